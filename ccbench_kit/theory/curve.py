"""Theory curves (time, algbw, busbw vs size) and efficiency against a peak."""
import numpy as np
import xarray as xr

from ..errors import ConfigError
from . import models
from . import presets as _presets


def curve(collective, algorithm, sizes, nranks, preset=None, alpha=None, beta=None,
          gamma=0.0, segment_bytes=None):
    """The α-β prediction of one algorithm over `sizes`.

    Parameters
    ----------
    collective, algorithm : str
        An algorithm without a model (``mpi``, ``nccl``) gets the lower bound
        (docs/theory.md): what no point-to-point algorithm can beat.
    sizes : sequence of int
        Bytes, the collective's nccl-tests convention.
    nranks : int
    preset : str or Preset, optional
        Supplies α (``alpha_us``) and β = 1 / ``peak_gbps``.
    alpha, beta, gamma : float, optional
        s, s/B, s/B; override the preset's.
    segment_bytes : int, optional
        Pipelined algorithms' segment; default the best segment count.

    Returns
    -------
    xarray.Dataset
        `time` (µs), `algbw` and `busbw` (GB/s) along `size`, and the
        parameters in attrs.
    """
    p = None
    if preset is not None:
        p = _presets.get(preset)
        alpha = p.alpha if alpha is None else alpha
        beta = p.beta if beta is None else beta
    if alpha is None or beta is None:
        raise ConfigError("a theory curve needs a preset or both alpha (s) and beta (s/B)",
                          "theory")
    sizes = np.asarray(sizes, dtype=np.int64)
    coll = models.canonical_collective(collective)
    if models.has_model(coll, algorithm):
        t = models.predict_time(coll, algorithm, sizes, nranks, alpha, beta, gamma,
                                segment_bytes=segment_bytes)
        model = models.split_algorithm(algorithm)[0]
    else:
        t = models.lower_bound(coll, sizes, nranks, alpha, beta, gamma)
        model = "lower bound"
    t = np.asarray(t, dtype=float)
    factor = models.bus_factor(coll, nranks)
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(t > 0, sizes / t / 1e9, np.nan)
    attrs = {"collective": coll, "algorithm": str(algorithm), "model": model,
             "nranks": int(nranks), "alpha_s": float(alpha), "beta_s_per_B": float(beta),
             "gamma_s_per_B": float(gamma), "preset": p.name if p else ""}
    return xr.Dataset(
        {"time": ("size", t * 1e6, {"units": "us"}),
         "algbw": ("size", algbw, {"units": "GB/s"}),
         "busbw": ("size", algbw * factor, {"units": "GB/s"})},
        coords={"size": ("size", sizes, {"units": "B"})}, attrs=attrs)


def efficiency(ds, preset, stat="avg", rank_stat="max"):
    """Measured busbw / the preset's peak, a fraction, dims (algorithm, placement, size)."""
    p = _presets.get(preset, ds=ds)
    eff = ds.ccb.busbw(stat, rank_stat) / p.peak_gbps
    eff.attrs = {"units": "1", "long_name": f"busbw / {p.name} peak ({p.peak_gbps:.4g} GB/s)"}
    return eff.rename("efficiency")
