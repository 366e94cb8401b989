"""Fit α, β (and γ) of each algorithm to a measured sweep (docs/theory.md).

Each algorithm's model is linear in the machine parameters,
t(S) = L(S)·α + W(S)·β + R(S)·γ (`models.cost`); the library's own choices
(``mpi``, ``nccl``) take the generic t = A + F·S/B.  The fit is least
squares weighted by 1/t (relative error, so 8 B and 64 MiB count alike),
with α, β, γ ≥ 0, made robust by Huber reweighting: sizes disturbed by other
work on the machine are down-weighted (`AlgorithmFit.outliers`), clean data
get the plain least-squares answer.

γ and β multiply the same bytes within one algorithm, so a single algorithm
cannot tell them apart.  For reductions, γ is either given, or fitted jointly
over every modelled algorithm when their W:R ratios differ (ring has 2:1,
recursive doubling 1:1), with a latency per algorithm and β, γ shared; each
algorithm's α and β are then fitted with that γ held fixed.  When γ cannot
be separated it is reported as 0 and β includes it.

Cross-checks (docs/theory.md): A against the median time of the sizes
where the fitted bandwidth term is under 10 %, and the busbw asymptote
against the slope over the top decade of sizes.
"""
from dataclasses import dataclass, field
import json

import numpy as np

from ..errors import ConfigError
from . import models
import pandas as pd

GENERIC = "generic: A + F·S/B"

# When a fit "holds", i.e. may be drawn as a model of the sweep: the sizes it
# did not down-weight sit within 20 % of it (rms of relative residuals), at
# most a fifth of the sizes were down-weighted, and in log space (where a
# sweep over 8 B..64 MiB is judged) it explains 98 % of the variance.
HOLDS_RMS = 0.20
HOLDS_OUTLIERS = 0.20
HOLDS_R2_LOG = 0.98
# R² compares the fit with the spread of the times; where they span less than
# this factor (a latency-bound piece: 8 B..2 KiB all within a few µs) there
# is no spread to explain but noise, and the rms alone judges the line
HOLDS_R2_SPAN = 2.0


@dataclass
class AlgorithmFit:
    """α, β, γ of one algorithm and how well they fit.

    Times in seconds, β and γ in s/B; `residuals` are relative,
    (measured − fitted) / fitted, one per size in `sizes`.
    """

    collective: str
    algorithm: str
    nranks: int
    model: str                 # the algorithm's own model, or GENERIC
    alpha: float               # s per message step (A for the generic model)
    beta: float                # s/B
    gamma: float               # s/B reduced (0 when not separable or not a reduction)
    gamma_source: str          # "given", "joint fit over ...", "not separable: β includes γ", "n/a"
    sizes: np.ndarray          # bytes used in the fit
    times: np.ndarray          # s measured at `sizes`
    residuals: np.ndarray      # relative
    stat: str
    segment_bytes: int = 0    # pipelined algorithms' segment, 0 = one segment
    checks: dict = field(default_factory=dict)
    weights: np.ndarray = None  # robust weight per size (1 = full, < 1 = down-weighted outlier)

    # -- derived --------------------------------------------------------------
    @property
    def size_range(self):
        return (int(self.sizes.min()), int(self.sizes.max())) if self.sizes.size else (0, 0)

    @property
    def rms(self):
        """Root mean square of the relative residuals."""
        return float(np.sqrt(np.mean(self.residuals ** 2))) if self.residuals.size else float("nan")

    @property
    def outliers(self):
        """Sizes the robust fit down-weighted to under half (disturbed sizes)."""
        return int(np.sum(self.weights < 0.5)) if self.weights is not None else 0

    @property
    def rms_inliers(self):
        """rms of the relative residuals of the sizes kept at weight ≥ ½."""
        if not self.residuals.size:
            return float("nan")
        keep = self.weights >= 0.5 if self.weights is not None else np.ones(self.residuals.size, bool)
        r = self.residuals[keep] if keep.any() else self.residuals
        return float(np.sqrt(np.mean(r ** 2)))

    @property
    def r2_log(self):
        """R² of log(time) against log(fitted time): 1 − SS_res / SS_tot."""
        if self.sizes.size < 2:
            return float("nan")
        y = np.log(self.times)
        with np.errstate(all="ignore"):
            yhat = np.log(self.predict(self.sizes))
        tot = float(np.sum((y - y.mean()) ** 2))
        if not np.all(np.isfinite(yhat)) or tot <= 0:
            return float("nan")
        return 1.0 - float(np.sum((y - yhat) ** 2)) / tot

    @property
    def why_not(self):
        """Why the fit may not be drawn as a model ("" when it holds)."""
        if self.sizes.size < 3:
            return f"{self.sizes.size} sizes: too few to judge a two-parameter fit"
        reasons = []
        if not self.rms_inliers <= HOLDS_RMS:
            rms = f"{100 * self.rms_inliers:.0f} %" if self.rms_inliers < 10 else "> 1000 %"
            reasons.append(f"rms residual {rms} > {100 * HOLDS_RMS:.0f} %")
        if self.outliers > HOLDS_OUTLIERS * self.sizes.size:
            reasons.append(f"{self.outliers} of {self.sizes.size} sizes down-weighted")
        span = float(self.times.max() / self.times.min()) if self.times.size else 0.0
        if not self.r2_log >= HOLDS_R2_LOG and span >= HOLDS_R2_SPAN:
            reasons.append(f"R² (log) {self.r2_log:.3f} < {HOLDS_R2_LOG}")
        return "; ".join(reasons)

    @property
    def holds(self):
        """Whether the α-β line describes the sweep (`why_not` is empty)."""
        return not self.why_not

    @property
    def quality(self):
        """The quality figure as one short text: rms, R² (log), verdict."""
        return (f"rms {100 * self.rms_inliers:.1f} %, R² (log) {self.r2_log:.3f}"
                + ("" if self.holds else f" — no fit: {self.why_not}"))

    @property
    def max_residual(self):
        return float(np.max(np.abs(self.residuals))) if self.residuals.size else float("nan")

    def _cost(self, sizes):
        return _design(self.collective, self.algorithm, np.asarray(sizes, dtype=float),
                       self.nranks, self.segment_bytes)

    def predict(self, sizes):
        """Fitted seconds at `sizes` (bytes)."""
        c = self._cost(sizes)
        return c.latency * self.alpha + c.bandwidth * self.beta + c.reduction * self.gamma

    def busbw(self, sizes):
        """Fitted busbw (GB/s) at `sizes`."""
        sizes = np.asarray(sizes, dtype=float)
        return sizes * self.bus_factor / self.predict(sizes) / 1e9

    @property
    def bus_factor(self):
        return models.bus_factor(self.collective, self.nranks)

    @property
    def latency(self):
        """A: the fitted time of the smallest size's message steps (s)."""
        lo = self.size_range[0] or 1
        return float(self._cost([lo]).latency[0] * self.alpha)

    @property
    def peak_busbw(self):
        """busbw the fit approaches at large sizes (GB/s): F·S / (W β + R γ)."""
        hi = float(self.size_range[1] or 1 << 30)
        c = self._cost([hi])
        per_byte = (c.bandwidth[0] * self.beta + c.reduction[0] * self.gamma) / hi
        return self.bus_factor / per_byte / 1e9 if per_byte > 0 else float("inf")

    @property
    def half_size(self):
        """S½: the size at half of `peak_busbw`, A·B/F (bytes)."""
        if not np.isfinite(self.peak_busbw):
            return float("inf")
        return self.latency * self.peak_busbw * 1e9 / self.bus_factor

    def summary(self):
        """One row: the fit in the units people quote (µs, GB/s, ns/B)."""
        lo, hi = self.size_range
        return {
            "algorithm": self.algorithm,
            "model": self.model,
            "alpha_us": self.alpha * 1e6,
            "beta_ns_per_B": self.beta * 1e9,
            "link_GBps": (1.0 / self.beta / 1e9) if self.beta > 0 else float("inf"),
            "gamma_ns_per_B": self.gamma * 1e9,
            "gamma_source": self.gamma_source,
            "A_us": self.latency * 1e6,
            "peak_busbw_GBps": self.peak_busbw,
            "S_half_B": self.half_size,
            "size_min_B": lo,
            "size_max_B": hi,
            "points": int(self.sizes.size),
            "rms_residual_pct": 100 * self.rms,
            "rms_inliers_pct": 100 * self.rms_inliers,
            "r2_log": self.r2_log,
            "holds": self.holds,
            "outliers": self.outliers,
            "max_residual_pct": 100 * self.max_residual,
            "A_small_us": self.checks.get("A_small", float("nan")) * 1e6,
            "busbw_top_decade_GBps": self.checks.get("busbw_top", float("nan")),
        }


class FitResult(dict):
    """{algorithm: AlgorithmFit} with a table view."""

    def to_frame(self):
        """A pandas DataFrame, one row per algorithm (units in column names)."""
        return pd.DataFrame([f.summary() for f in self.values()]).set_index("algorithm")


def _design(collective, algorithm, sizes, nranks, segment_bytes=0):
    if models.has_model(collective, algorithm):
        segments = None
        if (models.canonical_collective(collective),
                models.split_algorithm(algorithm)[0]) in models.SEGMENTED:
            segments = models.segments_for(sizes, segment_bytes)
        return models.cost(collective, algorithm, sizes, nranks, segments)
    f = models.bus_factor(collective, nranks)
    return models.Cost(np.ones_like(sizes), f * sizes, np.zeros_like(sizes))


def _nnls_relative(columns, target, scale, weights=None):
    """argmin_x Σ wᵢ((targetᵢ − (X x)ᵢ)/scaleᵢ)² with x ≥ 0 (an active set on
    ≤ a few unknowns)."""
    w = np.sqrt(weights) if weights is not None else np.ones_like(scale)
    X = np.column_stack(columns) * (w / scale)[:, None]
    y = target * w / scale
    active = [j for j in range(X.shape[1]) if np.any(X[:, j] != 0)]
    x = np.zeros(X.shape[1])
    while active:
        sol, *_ = np.linalg.lstsq(X[:, active], y, rcond=None)
        if np.all(sol >= 0):
            x[active] = sol
            break
        active.pop(int(np.argmin(sol)))
    return x


HUBER_K = 1.345     # 95 % efficient under Gaussian noise
MIN_SCALE = 0.02    # residuals under ~3 % (K × 2 %) are never down-weighted


def _robust_relative(columns, t, target=None, iterations=20):
    """`_nnls_relative` made robust: iteratively reweighted with Huber weights
    on the relative residuals, so that a few sizes disturbed by other jobs
    (a 10× slower median) do not drag α and β.  Clean data keep weight 1
    and the plain weighted least squares answer.  Returns (x, weights)."""
    target = t if target is None else target
    X = np.column_stack(columns)
    w = np.ones_like(t)
    x = _nnls_relative(columns, target, t)
    for _ in range(iterations):
        r = (target - X @ x) / t
        scale = max(1.4826 * float(np.median(np.abs(r - np.median(r)))), MIN_SCALE)
        u = np.abs(r) / (HUBER_K * scale)
        new = np.where(u <= 1, 1.0, 1.0 / np.maximum(u, 1e-300))
        if np.allclose(new, w, atol=1e-4):
            break
        w = new
        x = _nnls_relative(columns, target, t, w)
    return x, w


def _segment_bytes(ds):
    """The pipelining segment the run used: what the backend recorded
    (``segment_bytes``), else the option the run was given; a file of an
    older kit whose mpi run left the option at 0 ran the engine's default
    (CCB_SEGMENT_DEFAULT in ext/coll.h; its backend now records it)."""
    seg = ds.attrs.get("segment_bytes", 0)
    try:
        config = json.loads(ds.attrs.get("config") or "{}")
        seg = seg or (config.get("backend_options") or {}).get("segment_bytes", 0) \
            or config.get("segment_bytes", 0)
    except (TypeError, ValueError, AttributeError):
        seg = 0
    if not seg and ds.attrs.get("backend") == "mpi":  # written before the attr was recorded
        seg = models.ENGINE_SEGMENT_DEFAULT
    return int(seg or 0)


def _measured(ds, stat, rank_stat, placement, min_size, max_size):
    t = ds.ccb.time(stat, rank_stat)
    if placement is None:
        placement = "out_of_place" if "out_of_place" in t["placement"].values \
            else str(t["placement"].values[0])
    t = t.sel(placement=placement).compute()
    sizes = ds["size"].values.astype(float)
    keep = np.ones(sizes.size, dtype=bool)
    if min_size is not None:
        keep &= sizes >= min_size
    if max_size is not None:
        keep &= sizes <= max_size
    return t, sizes, keep, placement


def _series(t, alg, sizes, keep):
    y = np.asarray(t.sel(algorithm=alg).values, dtype=float) * 1e-6
    ok = keep & np.isfinite(y) & (y > 0)
    return sizes[ok], y[ok]


def _joint_gamma(collective, nranks, series, seg):
    """γ (s/B) fitted over several algorithms, or None if not separable."""
    algs = [a for a in series if models.has_model(collective, a)]
    ratios = set()
    for a in algs:
        s, _ = series[a]
        c = _design(collective, a, s, nranks, seg)
        w, r = float(np.sum(c.bandwidth)), float(np.sum(c.reduction))
        if w > 0 and r > 0:
            ratios.add(round(r / w, 6))
    if len(ratios) < 2:
        return None, algs
    cols, t = [], []
    n_alg = len(algs)
    rows_lat, rows_w, rows_r = [], [], []
    for i, a in enumerate(algs):
        s, y = series[a]
        c = _design(collective, a, s, nranks, seg)
        lat = np.zeros((s.size, n_alg))
        lat[:, i] = c.latency
        rows_lat.append(lat)
        rows_w.append(c.bandwidth)
        rows_r.append(c.reduction)
        t.append(y)
    lat = np.vstack(rows_lat)
    cols = [lat[:, i] for i in range(n_alg)] + [np.concatenate(rows_w), np.concatenate(rows_r)]
    x, _ = _robust_relative(cols, np.concatenate(t))
    return float(x[-1]), algs


def _cross_checks(fit, sizes, y, nranks):
    c = fit._cost(sizes)
    bw_term = c.bandwidth * fit.beta + c.reduction * fit.gamma
    small = bw_term < 0.1 * np.maximum(c.latency * fit.alpha, 1e-300)
    checks = {}
    if np.any(small):
        checks["A_small"] = float(np.median(y[small]))
    top = sizes >= sizes.max() / 10
    if np.count_nonzero(top) >= 2 and np.ptp(sizes[top]) > 0:
        slope = np.polyfit(sizes[top], y[top], 1)[0]
        if slope > 0:
            checks["busbw_top"] = fit.bus_factor / slope / 1e9
    return checks


def fit(ds, stat="median", rank_stat="max", placement=None, algorithms=None,
        min_size=None, max_size=None, gamma=None):
    """Fit α, β (and γ) per algorithm of one collective's Dataset.

    Parameters
    ----------
    ds : xarray.Dataset
        A results Dataset (docs/data-contract.md).
    stat, rank_stat : str
        The time fitted: `stat` over iterations of `rank_stat` over ranks
        (``ds.ccb.time``); the median resists the odd slow iteration.
    placement : str, optional
        Default ``out_of_place`` when present.
    algorithms : list of str, optional
        Default: every algorithm in `ds`.
    min_size, max_size : int, optional
        Size range used (bytes), e.g. one protocol's range.
    gamma : float, optional
        Reduction time (s/B) to hold fixed.

    Returns
    -------
    FitResult
        {algorithm: AlgorithmFit}; ``.to_frame()`` for a table.
    """
    collective = models.canonical_collective(ds.attrs["collective"])
    nranks = ds.ccb.nranks
    t, sizes, keep, placement = _measured(ds, stat, rank_stat, placement, min_size, max_size)
    algs = [str(a) for a in (algorithms or t["algorithm"].values)]
    missing = [a for a in algs if a not in t["algorithm"].values]
    if missing:
        raise ConfigError(f"no algorithm {', '.join(missing)} in the Dataset", "algorithms")
    series = {a: _series(t, a, sizes, keep) for a in algs}
    seg = _segment_bytes(ds)
    reduces = collective in models.REDUCING
    if not reduces:
        g, source = 0.0, "n/a"
    elif gamma is not None:
        g, source = float(gamma), "given"
    else:
        g, used = _joint_gamma(collective, nranks, series, seg)
        source = f"joint fit over {', '.join(used)}" if g is not None else "not separable: β includes γ"
        g = g or 0.0
    out = FitResult()
    for a in algs:
        s, y = series[a]
        if s.size < 2:
            continue
        c = _design(collective, a, s, nranks, seg)
        x, weights = _robust_relative([c.latency, c.bandwidth], y, y - c.reduction * g)
        model = models.split_algorithm(a)[0] if models.has_model(collective, a) else GENERIC
        af = AlgorithmFit(collective, a, nranks, model, float(x[0]), float(x[1]),
                          g if model != GENERIC else 0.0,
                          source if model != GENERIC else ("n/a" if not reduces else "in β"),
                          s, y, np.zeros(0), stat, seg)
        af.residuals = (y - af.predict(s)) / af.predict(s)
        af.weights = weights
        af.checks = _cross_checks(af, s, y, nranks)
        out[a] = af
    return out


def fit_piecewise(ds, algorithm, stat="median", rank_stat="max", placement=None, min_points=4,
                  gamma=None):
    """Two α-β fits of one algorithm, below and above the size where the
    protocol changes, or None when no split gives two fits that hold.

    The split is the size boundary that minimises the summed squared
    relative residuals of the two pieces, each with ≥ `min_points` sizes
    (docs/theory.md: "fit piecewise where the protocol changes").

    Returns
    -------
    list of AlgorithmFit or None
        [below, above], each with its own `size_range`.
    """
    t, sizes, keep, placement = _measured(ds, stat, rank_stat, placement, None, None)
    s, _ = _series(t, algorithm, sizes, keep)
    best, best_cost = None, float("inf")
    for k in range(min_points, s.size - min_points + 1):
        lo = fit(ds, stat, rank_stat, placement, [algorithm], max_size=s[k - 1], gamma=gamma)
        hi = fit(ds, stat, rank_stat, placement, [algorithm], min_size=s[k], gamma=gamma)
        if algorithm not in lo or algorithm not in hi:
            continue
        pieces = [lo[algorithm], hi[algorithm]]
        cost = sum(float(np.sum(p.residuals ** 2)) for p in pieces)
        if cost < best_cost:
            best, best_cost = pieces, cost
    if best is None or not all(p.holds for p in best):
        return None
    return best
