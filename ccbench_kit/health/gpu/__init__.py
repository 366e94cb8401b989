"""The doctor's GPU local check: ``ccbench doctor --local``.

Per GPU of this node: HBM bandwidth (device copy), a bf16 matrix product
(tensor cores), pinned host<->device copies (PCIe) and the NVML state,
each judged against the GPU's peers, the hardware preset and a saved
baseline (`judge`).  Modules: `cuda` (the rates, CUDA loaded at run time
with ctypes), `nvml` (the state, nvidia-ml-py), `check` (the run and its
Dataset), `judge` (the verdict), `report` (text and bars).

Imports nothing from CUDA or NVML until a check runs: a CPU-only install
imports it freely.
"""
import json
import os

import numpy as np
import xarray as xr

from ...errors import ConfigError, MissingDependency
from ...output_path import check_distinct, check_output
from .. import baseline as _baseline
from ..api import BAD_INPUT, HEALTHY, OUTLIER, Diagnosis, default_out  # noqa: F401
from . import check, judge, pairs as _pairs
from .cuda import CudaError
from .nvml import NvmlError


def local(gpus=None, *, repeats=5, out=None, baseline=None, save_baseline=None, command="",
          progress=None, pairs=None):
    """Check this node's GPUs; return a `health.Diagnosis` (`nodes` = [this node]).

    Parameters
    ----------
    gpus : str, optional
        CUDA indices to check, ``"0,2"`` (default: all).
    repeats : int
        Samples of every figure (interleaved); at least 2.
    out : str, optional
        Results file (netCDF, dims node, gpu, repeat; default
        ``results/doctor-gpu-STAMP.nc``).
    baseline : str, optional
        A baseline file saved from a healthy run (``--baseline``); read and
        checked before anything is measured.
    save_baseline : str, optional
        Write this run's figures as a baseline (``--save-baseline``).
    pairs : bool, optional
        The NVLink pair matrix (`pairs`, ``--pairs``/``--no-pairs``); None:
        where 2 GPUs or more are checked.  True with one GPU is bad input.
    """
    out = os.path.abspath(out or default_out().replace("doctor-", "doctor-gpu-"))
    check_distinct({"--out": out, "--save-baseline": save_baseline}, {"--baseline": baseline})
    base = _baseline.load(baseline) if baseline else None
    check_output(out, "--out")
    if save_baseline:
        check_output(save_baseline, "--save-baseline")
    try:
        inv = check.inventory(gpus)
    except (NvmlError, CudaError, MissingDependency) as e:  # nothing ran
        raise ConfigError(str(e), "--local") from e
    try:
        with_pairs = _pairs.wanted(pairs, len(inv.indices))
        if base is not None:
            _baseline.check_matches(base, _gpu_names(inv))
        ds = check.measure(inv, repeats, progress)
        if with_pairs:
            ds = _with_pairs(ds, inv, repeats, progress)
    finally:
        inv.close()
    ds.attrs["command"] = command
    os.makedirs(os.path.dirname(out), exist_ok=True)
    check.save(ds, out)  # what was measured is kept whatever the judging does
    verdict = judge.judge(ds, base)
    ds.attrs["doctor_verdict"] = _json(verdict.to_dict())
    check.save(ds, out)
    if save_baseline:
        _baseline.save(ds, save_baseline)
    return Diagnosis(verdict, OUTLIER if verdict.findings or verdict.undecided else HEALTHY,
                     out, "", command,
                     [inv.node])


def _with_pairs(ds, inv, repeats, progress):
    """`ds` and the pair matrix; a CUDA or NVML error in the matrix keeps
    the GPU figures (the verdict's note says why) rather than losing them."""
    try:
        matrix = _pairs.measure(inv, repeats, progress)
    except (CudaError, inv.pynvml.NVMLError) as e:
        ds.attrs["pair_matrix_error"] = str(e)
        return ds
    return xr.merge([ds, matrix], combine_attrs="no_conflicts")


def _gpu_names(inv):
    """A Dataset of this node's GPU names only, to check a baseline before measuring."""
    return xr.Dataset(coords={"node": [inv.node], "gpu": inv.indices,
                              "gpu_name": (("node", "gpu"), np.array([inv.names]))})


def _json(d):
    return json.dumps(d, default=float)
