"""Synthetic results Datasets drawn from the α-β models, with noise.

For tests of the fit and the plots, and for the report benchmark: a sweep
whose true α, β, γ are known.  Each iteration's time is the model's time
times (1 + ε), ε ~ N(0, noise); every rank but the slowest finishes a little
earlier, so the max over ranks (the kit's iteration time) is the model's.
"""
import numpy as np

from ..dataset import make_dataset
from . import models
from .. import collectives
from ..dtypes import get_dtype
from ..errors import ConfigError


def synthetic_dataset(collective="all_reduce", algorithms=("ring", "recursive_doubling"),
                      sizes=None, nranks=8, iters=20, alpha=5e-6, beta=1e-10, gamma=0.0,
                      noise=0.03, seed=0, warmup_iters=0, straggler=None, start=True,
                      generic_latency=None, dtype="fp32", segment_bytes=None, extra_attrs=None):
    """A Dataset of `collective` whose times follow the α-β(-γ) models.

    Parameters
    ----------
    algorithms : sequence of str
        Modelled algorithms; any other name (``mpi``) follows the generic
        t = A + F·S/B with A = `generic_latency` (default 2⌈lg p⌉α).
    sizes : sequence of int, optional
        Bytes; default 8 B to 256 MiB by factors of 2.
    alpha, beta, gamma : float
        s, s/B, s/B.
    noise : float
        Relative standard deviation of each iteration's time.
    warmup_iters : int
        The first iterations run 1.5×, 1.3×, ... slower (a visible warm-up).
    straggler : int, optional
        A rank that starts each iteration late by 20 % of its time; the
        others wait for it (their latency grows by as much).
    start : bool
        Fill `start` (µs on one clock): iterations back to back.
    segment_bytes : int, optional
        Pipelined algorithms' segment (recorded in attrs); default the best k.
    """
    rng = np.random.default_rng(seed)
    sizes = np.asarray(sizes if sizes is not None else [8 << i for i in range(26)], dtype=np.int64)
    coll = models.canonical_collective(collective)
    algorithms = [str(a) for a in algorithms]
    p, n_it = int(nranks), int(iters)
    model_t = np.empty((len(algorithms), sizes.size))
    for i, a in enumerate(algorithms):
        if models.has_model(coll, a):
            model_t[i] = models.predict_time(coll, a, sizes, p, alpha, beta, gamma,
                                             segment_bytes=segment_bytes)
        else:
            lat = generic_latency if generic_latency is not None else 2 * models._lg(p) * alpha
            model_t[i] = lat + models.bus_factor(coll, p) * sizes * beta
    # (algorithm, size, iteration) iteration times, µs
    it = model_t[:, :, None] * 1e6 * (1 + noise * rng.standard_normal((len(algorithms), sizes.size, n_it)))
    if warmup_iters:
        ramp = 1 + 0.5 * np.clip(1 - np.arange(n_it) / max(warmup_iters, 1), 0, None)
        it = it * ramp
    it = np.maximum(it, 1e-3)
    # ranks finish up to 5 % earlier; one random rank per iteration is the slowest
    early = rng.uniform(0, 0.05, (len(algorithms), sizes.size, p, n_it))
    slowest = rng.integers(0, p, (len(algorithms), sizes.size, n_it))
    np.put_along_axis(early, slowest[:, :, None, :], 0.0, axis=2)
    lat = it[:, :, None, :] * (1 - early)
    starts = None
    if start:
        # back-to-back iterations on a common clock; every rank starts when
        # the previous iteration's slowest rank is done
        t0 = np.concatenate([np.zeros(it.shape[:2] + (1,)), np.cumsum(it, axis=-1)[..., :-1]], axis=-1)
        skew = rng.uniform(0, 0.02, lat.shape) * it[:, :, None, :]
        starts = t0[:, :, None, :] + skew
        if straggler is not None:
            starts[:, :, straggler, :] += 0.2 * it
        starts = starts[:, None]
    if straggler is not None:
        # the others wait for it: their latency grows, its own does not
        others = np.arange(p) != straggler
        lat[:, :, others, :] += 0.2 * it[:, :, None, :]
    item = get_dtype(dtype).itemsize
    layout = [models_layout(coll, int(s), item, p) for s in sizes]
    attrs = {"collective": coll, "dtype": dtype, "op": "sum" if coll in models.REDUCING else "",
             "root": 0, "nranks": p, "backend": "synthetic", "library": "α-β model",
             "timing": "synthetic", "warmup": 0, "iters": n_it, "kit_version": "",
             "created": "", "command": "synthetic_dataset", "hosts": ["synthetic"], "env": {},
             "source": f"synthetic α={alpha:g} s, β={beta:g} s/B, γ={gamma:g} s/B, noise {noise:g}",
             "check": "none"}
    if segment_bytes:
        attrs["segment_bytes"] = int(segment_bytes)
    attrs.update(extra_attrs or {})
    return make_dataset(
        algorithms=algorithms, placements=["out_of_place"], sizes=sizes,
        counts=[c for c, _, _ in layout], in_bytes=[i for _, i, _ in layout],
        out_bytes=[o for _, _, o in layout], latency=lat[:, None], wrong=np.full(
            (len(algorithms), 1, sizes.size), -1), ranks=np.arange(p),
        hosts=["synthetic"] * p, devices=[f"cpu:{r}" for r in range(p)], start=starts,
        attrs=attrs)


def models_layout(collective, size, itemsize, nranks):
    """(count, in_bytes, out_bytes) from the collective module when it exists."""
    try:
        lay = collectives.get(collective).layout(size, itemsize, nranks)
        return lay.count, lay.in_bytes(itemsize), lay.out_bytes(itemsize)
    except ConfigError:
        return size // itemsize, size, size
