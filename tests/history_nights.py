"""Nightly histories for the history tests, derived from a REAL run.

One real ``ccbench run`` gives the shape and the measured latencies of every
cell.  Night k is that run with its `created` date moved to night k, its
`library` attr changed where a scenario says so, and the latency of each
(collective, size) cell multiplied by a night factor: exp(N(0, sigma)) for
ordinary night-to-night noise (seeded), times the scenario's step, extra
noise or outlier.  So the values are a real run's, and the changes between
nights are the ones the scenario puts in, known exactly.
"""
import datetime as dt

import numpy as np

from ccbench_kit.dataset import open_parts, save

NEW_LIBRARY = "Open MPI v4.1.5, package: Debian OpenMPI, ident: 4.1.5"


def scenario_factor(kind, night, rng, sigma, at):
    """The latency factor of one cell on one night (1-based)."""
    noise = sigma * (5.0 if kind == "noisier" and night >= at else 1.0)
    f = float(np.exp(rng.normal(0.0, noise)))
    if kind == "drop" and night >= at:
        f /= 0.92           # busbw 8 % lower
    if kind == "slower" and night >= at:
        f *= 1.3            # a new library 1.3x slower
    if kind == "outlier" and night == at:
        f *= 1.6
    return f


def make_nights(base, out_dir, nights=60, scenarios=None, library_at=41, sigma=0.01, seed=1,
                start="2026-09-01T02:00:00+00:00", names=None):
    """Write `nights` results files night-NNN.nc into `out_dir`; returns their paths.

    scenarios: {(collective, size): (kind, night)} with kind drop | slower | noisier | outlier."""
    scenarios = scenarios or {}
    rng = np.random.default_rng(seed)
    parts = {k: v.load() for k, v in open_parts(str(base)).items()}
    t0 = dt.datetime.fromisoformat(start)
    paths = []
    for night in range(1, nights + 1):
        out = {}
        for name, ds in parts.items():
            ds = ds.copy(deep=True)
            factors = np.array([scenario_factor(*scenarios.get((name, int(s)), ("plain", 0))[:1],
                                                night, rng, sigma,
                                                scenarios.get((name, int(s)), ("plain", 0))[1])
                                for s in ds["size"].values])
            ds["latency"] = ds["latency"] * factors[None, None, :, None, None]
            ds.attrs["created"] = (t0 + dt.timedelta(days=night - 1)).isoformat()
            if library_at and night >= library_at:
                ds.attrs["library"] = NEW_LIBRARY
            out[name] = ds
        path = out_dir / (names(night) if names else f"night-{night:03d}.nc")
        save(out, path)
        paths.append(path)
    return paths

