"""Change points in one series of nightly values (busbw, a latency percentile).

ruptures' binary segmentation with the L1 (median) cost finds where the
level moves (divisive, as MongoDB's E-Divisive, and 15x faster than PELT on
a year of nights: 0.08 s against 1 s); the
L1 cost is what makes one bad night and a series that only gets noisier
not look like a move: a segment's cost is its absolute deviations from its
median, which one outlier barely shifts and a wider spread around the same
median does not reduce by splitting.  Each candidate is then tested on its
own: a permutation test of the studentized difference of the medians of
the segments on either side, with the search for the best split repeated on
every permutation, gives its p-value, so a change is reported with how sure
it is.  A change needs `MIN_SEGMENT` runs on each side: it is called after the
third run at the new level, never on one night.

The permutation test alone cannot call a short, clean step: with 8 runs
before and 6 after, half of the random orders of the same runs already put
a majority of the high runs on one side, and a difference of medians sees
no more than that.  So a second rule calls a **clean step** on its size: the
two sides separated (at most one run of each side, an outlier, beyond the
other side's runs) and the medians apart by at least `CLEAN_MARGIN` times
the noise (the larger of the series' night-to-night noise and the two
sides' pooled spread, so a side that is only noisier raises the bar).  Clean steps are searched for in every segment binary
segmentation leaves whole, so a step is called at its third run at the new
level (bench/history_power.py measures the rule: bench/RESULTS.md).
"""
import dataclasses

import numpy as np

from .._optional import require

MIN_RUNS = 8          # fewer runs than this: "too short", nothing is guessed
MIN_SEGMENT = 3       # runs on each side of a change
MAX_NOISE = 0.25      # night-to-night spread (relative) above which: "too noisy"
P_VALUE = 0.01        # a change must be this unlikely under "no change"
PERMUTATIONS = 199
CLEAN_MARGIN = 4.0    # a clean step this many noise units high is called on its size


@dataclasses.dataclass(frozen=True)
class Change:
    """A move of the level at `index` (the first run at the new level).

    `change` is relative (-0.08: 8 % lower), `p_value` the permutation
    test's, `margin` the step in noise units and `clean` whether it was
    called as a clean step (see the module's docstring)."""
    index: int
    change: float
    p_value: float
    before: float
    after: float
    margin: float = float("nan")
    clean: bool = False

    def evidence(self):
        """Why it was called, for one line: its p-value, or its size in
        noise units for a clean step the permutation test cannot resolve."""
        if self.p_value < P_VALUE or not self.clean:
            return f"p={self.p_value:.3f}"
        return f"clean step, {self.margin:.0f}x noise"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the series says: status "ok", "too short" or "too noisy"; its
    night-to-night noise (relative) and its changes."""
    status: str
    noise: float
    changes: tuple = ()
    note: str = ""


def night_noise(log_values):
    """Robust night-to-night spread of log values (≈ relative sd), from the
    median absolute deviation of first differences, which a level shift
    moves only once."""
    d = np.diff(log_values)
    if len(d) < 2:
        return float("nan")
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2))


def _split_stat(rows, t, scale):
    """Difference of the medians left and right of split `t`, per row of
    `rows`, weighted by sqrt(t (n - t) / n) (a split near an end, with few
    runs on one side, must show a larger difference) and robustly
    studentized: each side's spread is its MAD, but never under the
    series' night-to-night noise `scale`, so that a few close runs cannot
    make a split look strong, and a side that is only noisier weighs less."""
    n = rows.shape[1]
    left, right = rows[:, :t], rows[:, t:]
    ml, mr = np.median(left, axis=1), np.median(right, axis=1)
    sl = np.maximum(1.4826 * np.median(np.abs(left - ml[:, None]), axis=1), scale)
    sr = np.maximum(1.4826 * np.median(np.abs(right - mr[:, None]), axis=1), scale)
    pooled = np.sqrt((t * sl ** 2 + (n - t) * sr ** 2) / n)
    return np.sqrt(t * (n - t) / n) * np.abs(mr - ml) / pooled


def _permutation_p(segment, split, scale, rng, wanted=True):
    """p-value of the change at `split` of `segment`: how often a random
    order of the same runs shows a split at least as strong ANYWHERE (the
    search is repeated on each permutation, as E-Divisive does, so the
    choice of the best split is paid for).

    All permutations are drawn at once; a change that is not `wanted`
    still draws them (so that the p-values of the changes after it are
    the same whatever is asked) but is not tested: NaN."""
    n = len(segment)
    shuffled = rng.permuted(np.tile(segment, (PERMUTATIONS, 1)), axis=1)
    if not wanted:
        return float("nan")
    observed = _split_stat(segment[None, :], split, scale)[0]
    grid = np.unique(np.linspace(MIN_SEGMENT, n - MIN_SEGMENT, min(n - 2 * MIN_SEGMENT + 1, 20))
                     .round().astype(int))
    best = np.max([_split_stat(shuffled, t, scale) for t in grid], axis=0)
    return float((np.count_nonzero(best >= observed - 1e-12) + 1) / (PERMUTATIONS + 1))


def _l1_costs(rows, counts):
    """ruptures' L1 cost (sum of absolute deviations from the median) of
    each row of `rows`, whose first `counts` values (NaN after them) are
    its segment: sorted, it is the sum of the upper half less the lower."""
    ordered = np.sort(rows, axis=1)                # NaN sort last
    ordered = np.where(np.isnan(ordered), 0.0, ordered)
    cum = np.concatenate([np.zeros((len(rows), 1)), np.cumsum(ordered, axis=1)], axis=1)
    at = np.arange(len(rows))
    half = counts // 2
    lower = cum[at, half]
    upper = cum[at, counts] - cum[at, counts - half]
    return upper - lower


def _split_gains(y, start, end):
    """(splits, gains) of segment y[start:end] for binary segmentation: the
    L1 cost of the segment less that of its two sides, for every split with
    MIN_SEGMENT runs a side, all at once (ruptures computes them one by
    one in Python); None when the segment is too short to split."""
    seg = y[start:end]
    n = len(seg)
    if n < 2 * MIN_SEGMENT:
        return None
    splits = np.arange(MIN_SEGMENT, n - MIN_SEGMENT + 1)
    before = np.arange(n)[None, :] < splits[:, None]
    left = _l1_costs(np.where(before, seg, np.nan), splits)
    right = _l1_costs(np.where(before, np.nan, seg), n - splits)
    whole = float(np.abs(seg - np.median(seg)).sum())
    return splits + start, whole - left - right


def _best_first_gain(y):
    """The largest gain of binary segmentation's first split of `y`."""
    return float(np.max(_split_gains(y, 0, len(y))[1]))


def _binseg(y, penalty):
    """The change ends ruptures' `Binseg(model="l1", min_size=MIN_SEGMENT,
    jump=1).fit(y).predict(pen=penalty)` returns, found the same greedy way
    with every split's gain computed at once -- or None when a choice is
    too close to call (two gains, or a gain and the penalty, within 1e-9 of
    the series' cost: sums taken in another order round differently), and
    ruptures must decide."""
    margin = 1e-9 * (1.0 + float(np.abs(y - np.median(y)).sum()))
    ends, gains = [len(y)], {}
    while True:
        best = []
        for start, end in zip([0] + ends[:-1], ends):
            if (start, end) not in gains:
                gains[start, end] = _split_gains(y, start, end)
            if gains[start, end] is None:
                continue
            splits, gain = gains[start, end]
            top = int(np.argmax(gain))
            if np.count_nonzero(gain >= gain[top] - margin) > 1:
                return None
            best.append((float(gain[top]), int(splits[top])))
        if not best:
            return ends
        best.sort(reverse=True)
        if len(best) > 1 and best[1][0] >= best[0][0] - margin:
            return None
        if abs(best[0][0] - penalty) <= margin:
            return None
        if best[0][0] < penalty:
            return ends
        ends = sorted(ends + [best[0][1]])


def _mad(x):
    return 1.4826 * float(np.median(np.abs(x - np.median(x))))


def step_margin(a, b, noise):
    """(margin, clean) of the step from runs `a` to runs `b` (log values):
    the difference of their medians in noise units (the noise is the
    larger of the series' night-to-night `noise` and the sides' pooled
    MAD), and whether the sides are separated but for at most one run
    each (an outlier)."""
    sa, sb = np.sort(a), np.sort(b)
    pooled = np.sqrt((len(a) * _mad(a) ** 2 + len(b) * _mad(b) ** 2) / (len(a) + len(b)))
    scale = max(noise, float(pooled), 1e-4)
    step = float(np.median(b) - np.median(a))
    if step > 0:
        separated = sa[-2] < sb[1]
    else:
        separated = sb[-2] < sa[1]
    return abs(step) / scale, bool(separated)


def _clean_splits(y, start, end, noise, found):
    """Add to `found` the clean steps of y[start:end] (binary: the
    cleanest split first, then each side again), each with MIN_SEGMENT
    runs a side and a margin of at least CLEAN_MARGIN.

    Only splits whose sides are separated are measured: the second
    largest of the runs before (prefix) against the second smallest after
    (suffix), and the mirror for a step down, computed in one pass."""
    n = end - start
    if n < 2 * MIN_SEGMENT:
        return
    seg = y[start:end]
    best = None
    for t in _separated_splits(seg):
        margin, clean = step_margin(seg[:t], seg[t:], noise)
        if clean and margin >= CLEAN_MARGIN and (best is None or margin > best[0]):
            best = (margin, t)
    if best is None:
        return
    found.add(start + best[1])
    _clean_splits(y, start, start + best[1], noise, found)
    _clean_splits(y, start + best[1], end, noise, found)


def _second(values, largest):
    """The second largest (or smallest) of every prefix of `values`."""
    out = np.full(len(values), np.nan)
    top = [-np.inf, -np.inf] if largest else [np.inf, np.inf]
    for i, v in enumerate(values):
        if largest:
            top = sorted([top[0], top[1], v])[1:]   # the two largest, ascending
            out[i] = top[0]
        else:
            top = sorted([top[0], top[1], v])[:2]   # the two smallest, ascending
            out[i] = top[1]
    return out


def _separated_splits(seg):
    """Splits t (MIN_SEGMENT..n-MIN_SEGMENT) whose two sides are separated
    but for one run each, up or down."""
    n = len(seg)
    t = np.arange(MIN_SEGMENT, n - MIN_SEGMENT + 1)
    before_2nd_max = _second(seg, True)[t - 1]
    before_2nd_min = _second(seg, False)[t - 1]
    after_2nd_min = _second(seg[::-1], False)[::-1][t]
    after_2nd_max = _second(seg[::-1], True)[::-1][t]
    up = before_2nd_max < after_2nd_min
    down = after_2nd_max < before_2nd_min
    return [int(x) for x in t[up | down]]


def change_bounds(values, first):
    """(least, most): bounds on the relative change of any change `detect`
    can report at index `first` or later, without searching.

    The runs after such a change are a segment of at least MIN_SEGMENT
    runs inside values[first:], those before it one of at least
    MIN_SEGMENT runs; the median of three or more values lies between
    their second smallest and second largest (so one outlier night moves
    no bound).  (nan, nan) when no change can start there."""
    values = np.asarray(values, dtype=float)
    ok = np.isfinite(values) & (values > 0)
    y, late = np.log(values[ok]), np.log(values[first:][ok[first:]])
    if len(y) < MIN_RUNS or len(late) < MIN_SEGMENT:
        return float("nan"), float("nan")
    every, recent = np.sort(y), np.sort(late)
    return (float(np.exp(recent[1] - every[-2]) - 1.0),
            float(np.exp(recent[-2] - every[1]) - 1.0))


def detect(values, wanted=None):
    """The `Verdict` of a series (oldest first); NaN and non-positive values
    (a size that failed) are skipped and indices refer to `values`.

    `wanted(index, change)`, when given, says which candidate changes the
    caller can use (`history check`: worse, large enough, in the window);
    the others are not tested and not returned.  What is returned is
    exactly what `detect(values)` returns for those changes."""
    values = np.asarray(values, dtype=float)
    keep = np.flatnonzero(np.isfinite(values) & (values > 0))
    y = np.log(values[keep])
    n = len(y)
    if n < MIN_RUNS:
        return Verdict("too short", float("nan"),
                       note=f"{n} runs; change detection needs at least {MIN_RUNS}")
    noise = night_noise(y)
    if noise > MAX_NOISE:
        return Verdict("too noisy", noise, note=f"runs differ by ~{noise:.0%} night to night; "
                       "a change cannot be told from noise")
    penalty = 3.0 * max(noise, 1e-4) * np.log(n)
    ends = _binseg(y, penalty)
    if ends is None:  # too close to call in another summation order: ruptures decides
        rpt = require("ruptures", "history")
        ends = rpt.Binseg(model="l1", min_size=MIN_SEGMENT, jump=1).fit(y).predict(pen=penalty)
    clean = set()
    for start, end in zip([0] + list(ends[:-1]), ends):
        _clean_splits(y, start, end, noise, clean)
    bounds = sorted(set([0] + list(ends)) | clean)
    rng = np.random.default_rng(0)  # the same history gives the same p-values
    changes = []
    for k in range(1, len(bounds) - 1):
        a, b = y[bounds[k - 1]:bounds[k]], y[bounds[k]:bounds[k + 1]]
        before, after = float(np.exp(np.median(a))), float(np.exp(np.median(b)))
        index, change = int(keep[bounds[k]]), after / before - 1.0
        use = wanted is None or wanted(index, change)
        p = _permutation_p(np.concatenate([a, b]), len(a), max(noise, 1e-4), rng, use)
        margin, separated = step_margin(a, b, noise)
        is_clean = separated and margin >= CLEAN_MARGIN
        if use and (p < P_VALUE or is_clean):
            changes.append(Change(index, change, p, before, after, margin, is_clean))
    return Verdict("ok", noise, tuple(changes))
