"""The per-rank sweep: sizes × algorithms × placements, one harness for
every collective and backend.  Rank 0 gathers each size as it completes and
hands it on (progress, partial saves); the last size gives the Dataset.
"""
import datetime
import json
import os
import socket

import numpy as np

from . import __version__, checks, collectives
from .backends import get_backend
from .clock import estimate_offsets
from .dataset.schema import make_dataset
from .dtypes import OPS, get_dtype
from .errors import RunError

ENV_PREFIXES = ("NCCL_", "OMPI_", "CCB_", "UCX_", "FI_", "CUDA_VISIBLE_DEVICES")


def captured_env():
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(ENV_PREFIXES) and "TOKEN" not in k and "SECRET" not in k}


def _agree_on_config(comm, cfg):
    """Every rank must have parsed the same configuration."""
    digests = comm.allgather(cfg.digest())
    odd = [r for r, d in enumerate(digests) if d != digests[0]]
    if odd:
        raise RunError(f"ranks {odd} parsed a different configuration than rank 0 "
                       "(different sizes, flags or versions on different hosts?)")


def unique_layouts(coll, sizes, itemsize, nranks):
    """Layouts for the requested sizes; sizes that round to the same actual
    size are run once."""
    seen, out = set(), []
    for s in sizes:
        lay = coll.layout(s, itemsize, nranks)
        if lay.size not in seen:
            seen.add(lay.size)
            out.append(lay)
    return out


class Sweep:
    """One rank's part of a run.  Use `run()`; rank 0 gets the Dataset."""

    def __init__(self, comm, cfg, emit=None, on_partial=None, backend=None):
        self.comm, self.cfg = comm, cfg
        self.rank, self.nranks = comm.Get_rank(), comm.Get_size()
        self.emit = emit or (lambda event: None)
        self.on_partial = on_partial or (lambda ds: None)
        self.coll = collectives.get(cfg.collective)
        self.dtype = get_dtype(cfg.dtype)
        self.backend = backend or get_backend(cfg.backend, comm)
        cfg.validate(self.backend.algorithms(self.coll.name))
        _agree_on_config(comm, cfg)
        if cfg.nranks != self.nranks:
            raise RunError(f"configured for {cfg.nranks} ranks but the communicator has {self.nranks}")

    def run(self):
        cfg, comm = self.cfg, self.comm
        from mpi4py import MPI

        offset = estimate_offsets(comm)
        epoch = comm.bcast(MPI.Wtime() if self.rank == 0 else None)
        self._start_ref = epoch
        self._offset = offset
        ranks_info = comm.gather((socket.gethostname(), self.backend.device_name), root=0)
        offsets = comm.gather(offset * 1e6, root=0)
        layouts = unique_layouts(self.coll, cfg.sizes, self.dtype.itemsize, self.nranks)
        blocks = []
        for k, layout in enumerate(layouts):
            lat, start, wrong = self._one_size(layout)
            lat_all = comm.gather(lat, root=0)
            start_all = comm.gather(start, root=0)
            wrong_all = comm.reduce(wrong, op=MPI.SUM, root=0) if cfg.check else wrong
            if self.rank == 0:
                blocks.append((layout, np.stack(lat_all, axis=2), np.stack(start_all, axis=2), wrong_all))
                ds = self._dataset(blocks, ranks_info, offsets, complete=k == len(layouts) - 1)
                self.emit({"event": "size", "index": k, "total": len(layouts),
                           "size": layout.size, "busbw": _finite_max(ds.ccb.busbw().isel(size=-1))})
                self.on_partial(ds)
        self.backend.close()
        return ds if self.rank == 0 else None

    def _one_size(self, layout):
        cfg, coll, dt, be = self.cfg, self.coll, self.dtype, self.backend
        A, P, I = len(cfg.algorithms), len(cfg.placements), cfg.iters
        lat = np.full((A, P, I), np.nan)
        start = np.full((A, P, I), np.nan)
        wrong = np.full((A, P), -1, dtype=np.int64)
        mode = cfg.check or "random"
        own = checks.make_input(dt, layout.send_elems, self.rank, mode, cfg.seed)
        golden = scale = None
        if cfg.check:
            inputs = [checks.make_input(dt, layout.send_elems, r, mode, cfg.seed)
                      for r in range(self.nranks)]
            golden = coll.golden(inputs, self.rank, self.nranks, cfg.op, cfg.root, dt)
            if coll.reduces and dt.is_float:
                scale = coll.golden([np.abs(dt.to_float(x)) for x in inputs], self.rank,
                                    self.nranks, "sum", cfg.root, get_dtype("fp64"))
        op = OPS.get(cfg.op, 0)
        for ai, alg in enumerate(cfg.algorithms):
            for pi, placement in enumerate(cfg.placements):
                recv = be.alloc(layout.recv_elems, dt)
                send = coll.inplace_send(recv, self.rank, layout) if placement == "in_place" \
                    else be.alloc(layout.send_elems, dt)
                scratch = be.scratch(coll.name, alg, layout.engine_count, dt, self.nranks)
                bufs = [(send, recv, scratch)]
                kw = dict(count=layout.engine_count, dtype=dt, op=op, root=cfg.root)
                be.upload(send, own)
                t, s = be.time(coll.name, alg, bufs, warmup=cfg.warmup, iters=cfg.iters,
                               agg=cfg.agg_iters, blocking=cfg.blocking, **kw)
                lat[ai, pi] = t
                start[ai, pi] = (s / 1e6 + self._offset - self._start_ref) * 1e6
                if cfg.check:
                    be.upload(recv, np.zeros(layout.recv_elems, dtype=dt.storage))
                    be.upload(send, own)
                    be.time(coll.name, alg, bufs, warmup=0, iters=1, **kw)
                    out = be.download(recv)
                    wrong[ai, pi] = checks.count_wrong(out, golden, dt, cfg.op, self.nranks, scale)
                del bufs, send, recv, scratch
        return lat, start, wrong

    def _dataset(self, blocks, ranks_info, offsets, complete):
        cfg, dt = self.cfg, self.dtype
        lays = [b[0] for b in blocks]
        attrs = {
            "collective": cfg.collective, "dtype": cfg.dtype, "op": cfg.op, "root": cfg.root,
            "nranks": self.nranks, "backend": cfg.backend, "library": self.backend.library,
            "timing": self.backend.timing, "warmup": cfg.warmup, "iters": cfg.iters,
            "agg_iters": cfg.agg_iters, "blocking": cfg.blocking,
            "check": cfg.check or "none", "seed": cfg.seed,
            "kit_version": __version__,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": cfg.command, "hosts": sorted({h for h, _ in ranks_info}),
            "env": captured_env(), "source": "", "config": json.loads(cfg.to_json()),
            "clock_offsets_us": [round(o, 3) for o in offsets],
            "complete": complete, "skipped_sizes": cfg.skipped_sizes,
        }
        if not complete:
            attrs["incomplete_reason"] = "run still in progress or interrupted"
        return make_dataset(
            algorithms=cfg.algorithms, placements=cfg.placements,
            sizes=[l.size for l in lays], counts=[l.count for l in lays],
            in_bytes=[l.in_bytes(dt.itemsize) for l in lays],
            out_bytes=[l.out_bytes(dt.itemsize) for l in lays],
            latency=np.stack([b[1] for b in blocks], axis=2),
            start=np.stack([b[2] for b in blocks], axis=2),
            wrong=np.stack([b[3] for b in blocks], axis=2),
            ranks=range(self.nranks), hosts=[h for h, _ in ranks_info],
            devices=[d for _, d in ranks_info], attrs=attrs)


def _finite_max(da):
    v = np.asarray(da.values, dtype=float)
    v = v[np.isfinite(v)]
    return float(v.max()) if v.size else float("nan")
