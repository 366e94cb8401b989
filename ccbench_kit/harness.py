"""The per-rank sweep: sizes × algorithms × placements, one harness for
every collective and backend.  Rank 0 gathers each size as it completes and
hands it on (progress, partial saves); the last size gives the Dataset.
"""
import datetime
import os
import socket
import time
import warnings

import numpy as np

from . import checks, collectives
from ._version import __version__
from .backends import backend_class
from .session import Session
from .inputs.coalesced import combined, split_layout
from .dataset.schema import make_dataset
from .dtypes import OPS, get_dtype
from .errors import CCBenchError, RunError
from .joborigin import job_attrs
from .mpi_env import quiet_barrier
from .output_path import ResultsRescued
from .progress_board import RankReporter
from .units import format_size

INPUT_BLOCK = 1 << 20  # elements drawn at random when not checking; the rest repeats them
ENV_PREFIXES = ("NCCL_", "OMPI_", "CCB_", "UCX_", "FI_", "CUDA_VISIBLE_DEVICES")
# --unique-buff: at most this many bytes of extra buffer sets per rank; past
# a few sets of buffers larger than the caches, more sets change nothing.
UNIQUE_BUFF_BUDGET = 1 << 30


def captured_env():
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(ENV_PREFIXES) and "TOKEN" not in k and "SECRET" not in k}


def _agree_on_config(comm, cfg):
    """Every rank must have parsed the same configuration."""
    quiet_barrier(comm)  # rank 0 alone imports what writes the results
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

    def __init__(self, comm, cfg, emit=None, checkpoint=None, backend=None, reporter=None,
                 table=None, session=None):
        """`checkpoint` (rank 0): a `dataset.checkpoint.Checkpoint`, or None
        to keep the results in memory only.  `table` (rank 0): a
        `formats.nccl_tests.live_table.LiveTable` that prints each size's
        rows as it completes (a batch job's log), or None.  `session`: the
        job's `session.Session` on `comm`, whose communicators, backends,
        host facts and clock offsets the parts of a job share; None makes
        one that this sweep closes when it ends."""
        # self.comm is the world; collectives run on self.group_comm, and
        # self.rank / self.nranks are this rank's place in its replica group.
        self.comm, self.cfg = comm, cfg
        self.world_rank, self.world_size = comm.Get_rank(), comm.Get_size()
        self._own_session = session is None
        self.session = session or Session(comm)
        self._given_backend = backend
        self.group, self.group_comm = self.session.group(cfg.inputs.groups)
        self.rank, self.nranks = self.group_comm.Get_rank(), self.group_comm.Get_size()
        self.emit = emit or _warn_only
        self.checkpoint = checkpoint
        self.table = table
        self.reporter = reporter or RankReporter(None, comm.Get_rank())
        self.skipped_oversize = []
        self._buffer_bytes = 0      # the most buffer bytes one timed call held (-M)
        self._memory = {}
        groups = cfg.inputs.groups
        members = groups[self.group] if groups else list(range(self.world_size))
        self.coll = collectives.get(cfg.sweep.collective).configure(cfg.inputs, members)
        self.dtype = get_dtype(cfg.sweep.dtype)
        # the group's communicator runs the collectives; the world's picks devices
        self.backend = backend or self.session.backend(
            cfg.backend.name, cfg.backend_options(), cfg.inputs.groups)
        _agree_on_config(comm, cfg)
        self.backend.check_algorithms(self.coll.name, cfg.sweep.algorithms)
        if cfg.launch.nranks != self.world_size:
            raise RunError(f"configured for {cfg.launch.nranks} ranks but the communicator has "
                           f"{self.world_size}")

    def _start(self, comm):
        """The facts every size shares, measured once: cores per host and the
        memcpy peak (the Dataset's attrs), the clocks' offsets, the ranks'
        hosts and devices; (ranks_info, offsets) on rank 0."""
        from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs

        host_buffers = backend_class(self.cfg.backend.name).host_buffers
        self._facts, crowded = self.session.facts(host_buffers)
        if crowded and self.world_rank == 0:
            self.emit({"event": "warning", "message": crowded})
        clock = self.session.clock()
        self._start_ref = comm.bcast(MPI.Wtime() if self.world_rank == 0 else None)
        self._offset = clock.offset
        self._ranks_per_host = self.session.ranks_per_host()
        ranks_info = comm.gather((socket.gethostname(), self.backend.device_name), root=0)
        offsets = comm.gather((clock.offset * 1e6, clock.error * 1e6), root=0)
        return ranks_info, offsets

    def run(self):
        cfg, comm = self.cfg, self.comm
        ranks_info, offsets = self._start(comm)
        layouts = unique_layouts(self.coll, cfg.sweep.sizes, self.dtype.itemsize, self.nranks)
        self._parts = {}
        if cfg.inputs.coalesced_ratio:
            layouts = list({w.size: w for w in map(self._coalesce, layouts)}.values())
        blocks = []
        ds = None
        every = cfg.output.checkpoint_every
        saved_at, saved_n = time.monotonic(), 0
        # the template lets sidecars be folded before the file's first write;
        # a sweep of one size writes the file itself first, and no sidecar
        if self.world_rank == 0 and self.checkpoint is not None and len(layouts) > 1:
            A, P = len(cfg.sweep.algorithms), len(cfg.sweep.placements)
            nan = np.full((A, P, self.world_size, cfg.sweep.iters), np.nan)
            self.checkpoint.template(self._dataset(
                [(layouts[0], nan, nan, np.full((A, P), -1, dtype=np.int64))],
                ranks_info, offsets, complete=False))
        if self.backend.warms_every_size and not cfg.inputs.coalesced_ratio:
            quiet_barrier(comm)  # rank 0 wrote the file's template
            self._warm_every_size([l for l in layouts if self._fits(l, quiet=True)])
        try:
            for k, layout in enumerate(layouts):
                # the next size is in flight from here (its memory check is a
                # collective): a stall now names it, not the size just saved
                self.reporter.enter(layout.size, 0, 0, "preparing")
                quiet_barrier(comm)  # rank 0 may still be saving the last size
                if not self._fits(layout):
                    continue
                self.reporter.phase("preparing")
                lat, start, wrong = self._one_size(layout)
                self.reporter.phase("gathering")
                lat_all = comm.gather(lat, root=0)
                self._memory = self._memory_usage(comm)
                start_all = comm.gather(start, root=0)
                wrong_all = checks.total_wrong(comm, wrong) if cfg.inputs.check else wrong
                if self.world_rank != 0:
                    continue
                lat_all, start_all = np.stack(lat_all, axis=2), np.stack(start_all, axis=2)
                blocks.append((layout, lat_all, start_all, wrong_all))
                self._show(blocks[-1], ranks_info, offsets)
                self.emit({"event": "size", "collective": cfg.collective, "index": k,
                           "total": len(layouts),
                           "size": layout.size, "busbw": self._busbw(layout, lat_all)})
                last = k == len(layouts) - 1
                self.reporter.phase("saving")
                if last or (self.checkpoint is not None and time.monotonic() - saved_at >= every):
                    ds = self._dataset(blocks, ranks_info, offsets, complete=last)
                    self._save(ds)
                    saved_at, saved_n = time.monotonic(), len(blocks)
                elif self.checkpoint is not None:
                    self.checkpoint.pending(k, layout, lat_all, start_all, wrong_all,
                                            self.dtype.itemsize)
        except BaseException as error:
            if self.world_rank == 0 and len(blocks) > saved_n:
                try:  # what rank 0 holds, before the error goes on
                    self._save(self._dataset(blocks, ranks_info, offsets, complete=False))
                except ResultsRescued as rescued:  # the file could not take them: say where
                    raise rescued from error
                except (OSError, RuntimeError, ValueError, CCBenchError):
                    pass  # the write failed too (disk, HDF5): the first error is the one to tell
            raise
        if self.world_rank == 0 and blocks and (saved_n < len(blocks)
                                                or ds.attrs.get("complete") != "true"):
            # the last sizes were skipped or not yet written: the run is complete without them
            ds = self._dataset(blocks, ranks_info, offsets, complete=True)
            self._save(ds)
        self.reporter.phase("done")
        if self._own_session:
            if self._given_backend is not None:
                self._given_backend.close()
            self.session.close()
        return ds if self.world_rank == 0 else None

    def _warm_every_size(self, layouts):
        """nccl-tests' warm-up: every size, out of place, before any is timed.
        A GPU idle since start-up otherwise gives the first sizes 5-8 µs more
        (broadcast 8 B on 2x H200: 16 vs 8 µs; bench/RESULTS.md)."""
        if not layouts:
            return
        cfg, coll, be, dt = self.cfg, self.coll, self.backend, self.dtype
        self.reporter.phase("preparing")
        send = be.alloc(max(l.send_elems for l in layouts), dt)
        recv = be.alloc(max(l.recv_elems for l in layouts), dt)
        for layout in layouts:
            kw = self._call_args(layout)
            for alg in cfg.sweep.algorithms:
                scratch = be.scratch(coll.name, alg, layout.engine_count, dt, self.nranks)
                bufs = [(send[:layout.send_elems], recv[:layout.recv_elems], scratch)]
                be.time(coll.name, alg, bufs, warmup=cfg.sweep.warmup, iters=1, **kw)

    def _call_args(self, layout):
        """The backend's `time` arguments that depend on the size only."""
        cfg = self.cfg
        return dict(count=layout.engine_count, dtype=self.dtype, op=OPS.get(cfg.sweep.op, 0),
                    root=cfg.sweep.root, **self.coll.engine_vectors(self.rank, self.nranks, layout))

    def _memory_usage(self, comm):
        """nccl-tests -M's numbers, the max over ranks of each (as nccl-tests
        reduces them with MPI_MAX): the backend's entries around the buffer
        bytes the harness allocated for one timed call."""
        from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs

        mine = self.backend.memory_usage(self._buffer_bytes)
        return {k: int(comm.allreduce(int(v), op=MPI.MAX)) for k, v in mine.items()}

    def _memory_scope(self):
        return "host" if backend_class(self.cfg.backend.name).host_buffers else "device"

    def _show(self, block, ranks_info, offsets):
        """The rows of the size in `block` in the live table, if there is one."""
        if self.table is not None:
            self.table.add(self._dataset([block], ranks_info, offsets, complete=False))

    def _save(self, ds):
        if self.checkpoint is not None:
            self.checkpoint.full(ds)

    def _busbw(self, layout, lat):
        """The best busbw of one size (GB/s) from its (algorithm, placement,
        rank, iteration) latencies: max over ranks, mean over iterations.
        A phase timed alone (``oneshot:launch``) is no collective: its
        "busbw" (22.9 TB/s at 128 MiB on 2 H200s) is left out."""
        phases = self.backend.phase_algorithms(self.coll.name)  # as _one_size leaves them unchecked
        whole = [k for k, a in enumerate(self.cfg.sweep.algorithms) if a not in phases]
        lat = lat[whole]
        with warnings.catch_warnings():  # NaN where an algorithm was not available
            warnings.simplefilter("ignore", RuntimeWarning)
            t = np.nanmean(np.nanmax(lat, axis=2), axis=-1)
            bw = layout.size / (t * 1e3) * self.coll.bus_factor(self.nranks)
        bw = bw[np.isfinite(bw)]
        return float(bw.max()) if bw.size else float("nan")

    def _coalesce(self, layout):
        """--coalesced-cc-size-ratio: one layout standing for its parts."""
        parts = split_layout(self.coll, layout.size, self.dtype.itemsize, self.nranks,
                             list(self.cfg.inputs.coalesced_ratio))
        whole = combined(parts)
        self._parts[whole.size] = parts
        return whole

    def _timed_buffers(self, alg, placement, layout, first, own):
        """Buffer sets the timed loop cycles through, and operations per iteration.

        One set is `first` (the checked one); --coalesced-cc-size-ratio makes
        a set of one buffer triple per part, each with its own count, and
        --unique-buff makes more sets, one per operation up to a memory budget.
        """
        cfg, coll, dt, be = self.cfg, self.coll, self.dtype, self.backend
        parts = self._parts.get(layout.size)
        ops = (cfg.sweep.warmup + cfg.sweep.iters) * cfg.sweep.agg_iters
        per_set = sum((p.send_elems + p.recv_elems) * dt.itemsize for p in (parts or [layout]))
        rotate = be.rotating_sets(per_set, ops)      # IMB -off_cache (mpi backend)
        if not parts and not cfg.inputs.unique_buff and rotate <= 1:
            return [first], 1
        parts = parts or [layout]
        nsets = (min(ops, max(2, UNIQUE_BUFF_BUDGET // max(per_set, 1)))
                 if cfg.inputs.unique_buff else 1)
        nsets = max(nsets, rotate)
        sets = []
        for k in range(nsets):
            for part in parts:
                if k == 0 and len(parts) == 1:
                    sets.append(first)
                    continue
                send, recv = self._buffers(placement, part)
                be.upload(send, own[:part.send_elems])
                scratch = be.scratch(coll.name, alg, part.engine_count, dt, self.nranks)
                sets.append((send, recv, scratch, part.engine_count))
        return sets, len(parts)

    def _fits(self, layout, quiet=False):
        """Whether this size fits in memory on every host; decided together.

        Stops the run (earlier sizes are saved) unless --skip-oversize or
        `quiet` (a question only)."""
        from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs

        need = self.backend_bytes(layout) * self._ranks_per_host
        have = self.backend.memory_available()
        fits = self.comm.allreduce(int(need <= have), op=MPI.MIN)
        if fits or quiet:
            return bool(fits)
        msg = (f"size {layout.size} B needs about {format_size(need)} per host "
               f"({self._ranks_per_host} ranks) but only {format_size(have)} is available")
        if self.cfg.launch.skip_oversize:
            self.skipped_oversize.append(layout.size)
            self.emit({"event": "skip", "size": layout.size, "reason": msg})
            return False
        raise RunError(msg + "; stopped before allocating (--skip-oversize goes on without it)")

    def backend_bytes(self, layout):
        """Host bytes one rank holds at once for `layout`: buffers, scratch,
        and the inputs of every rank when checking."""
        it, p = self.dtype.itemsize, self.nranks
        scratch = max(self.backend.scratch_bytes(self.coll.name, a, layout.engine_count, self.dtype, p)
                      for a in self.cfg.sweep.algorithms)
        n = 2 * (layout.send_elems + layout.recv_elems) * it + scratch
        if self.cfg.inputs.check:
            n += (p + 2) * layout.send_elems * it + 3 * layout.recv_elems * 8
        return n

    def _buffers(self, placement, layout):
        """(send, recv) for one placement; in place, views of one allocation."""
        be, dt = self.backend, self.dtype
        if placement == "in_place":
            return self.coll.inplace_buffers(be.alloc, dt, self.rank, layout)
        return be.alloc(layout.send_elems, dt), be.alloc(layout.recv_elems, dt)

    def _one_size(self, layout):
        sw, inp = self.cfg.sweep, self.cfg.inputs
        coll, dt, be = self.coll, self.dtype, self.backend
        A, P, I = len(sw.algorithms), len(sw.placements), sw.iters
        lat = np.full((A, P, I), np.nan)
        start = np.full((A, P, I), np.nan)
        wrong = np.full((A, P), -1, dtype=np.int64)
        mode = inp.check or "random"
        golden = scale = None
        if inp.check:  # every rank's input, this rank's among them
            inputs = [checks.make_input(dt, layout.send_elems, r, mode, inp.seed)
                      for r in range(self.nranks)]
            own = inputs[self.rank]
            golden, scale = checks.expected(coll, inputs, self.rank, self.nranks, sw.op, sw.root,
                                            dt)
            del inputs
        else:  # timing only: random values (never zeros) tiled from one block, as
            # drawing GiBs of random numbers took longer than timing them
            own = np.resize(checks.make_input(dt, min(layout.send_elems, INPUT_BLOCK), self.rank,
                                              mode, inp.seed), layout.send_elems)
        kw = self._call_args(layout)
        phases = be.phase_algorithms(coll.name)  # their output is not the collective's
        for ai, alg in enumerate(sw.algorithms):
            for pi, placement in enumerate(sw.placements):
                if placement not in coll.placements:
                    continue  # e.g. alltoallv in place: NaN times, wrong -1
                send, recv = self._buffers(placement, layout)
                scratch = be.scratch(coll.name, alg, layout.engine_count, dt, self.nranks)
                bufs = [(send, recv, scratch)]
                be.upload(send, own)
                timed, nparts = self._timed_buffers(alg, placement, layout, bufs[0], own)
                self._buffer_bytes = max(self._buffer_bytes,
                                         sum(_set_bytes(b, placement) for b in timed))
                if self.group_comm is not self.comm:
                    self.comm.Barrier()  # replica groups start together, and run concurrently
                self.reporter.enter(layout.size, ai, pi)
                t, s = be.time(coll.name, alg, timed, warmup=sw.warmup, iters=sw.iters,
                               agg=sw.agg_iters * nparts, blocking=sw.blocking,
                               progress=self.reporter.calls, **kw)
                lat[ai, pi] = t * nparts  # the engine divides by every call of the iteration
                start[ai, pi] = (s / 1e6 + self._offset - self._start_ref) * 1e6
                del timed
                if inp.check and np.isfinite(t).any() and alg not in phases:  # NaN: refused
                    self.reporter.enter(layout.size, ai, pi, "checking")
                    be.upload(recv, np.zeros(layout.recv_elems, dtype=dt.storage))
                    be.upload(send, own)
                    be.time(coll.name, alg, bufs, warmup=0, iters=1, once=True,
                            progress=self.reporter.calls, **kw)
                    out = be.download(recv)
                    self.reporter.phase("preparing")
                    wrong[ai, pi] = checks.verify(
                        self.group_comm, coll, out, golden, dt, sw.op, self.nranks, scale, own=own,
                        save_as=checks.failure_path(self.cfg.output.out, coll.name, alg,
                                                    placement, layout.size,
                                                    self.world_rank))
                del bufs, send, recv, scratch
        return lat, start, wrong

    def _dataset(self, blocks, ranks_info, offsets, complete):
        cfg, sw, dt = self.cfg, self.cfg.sweep, self.dtype
        lays = [b[0] for b in blocks]
        attrs = {
            "collective": sw.collective, "dtype": sw.dtype, "op": sw.op, "root": sw.root,
            "nranks": self.world_size, "backend": cfg.backend.name, "library": self.backend.library,
            "timing": self.backend.timing, "warmup": sw.warmup, "iters": sw.iters,
            "agg_iters": sw.agg_iters, "blocking": sw.blocking,
            "blocking_mode": self.backend.blocking_mode(sw.blocking),
            "report_cputime": sw.report_cputime, "timing_clock": self.backend.timing_clock,
            "per_iter_timing": cfg.output.per_iter_timing,
            "per_iter_skip": cfg.output.per_iter_skip,
            "memory_report": cfg.output.memory_report,
            "memory_usage": dict(self._memory), "memory_scope": self._memory_scope(),
            "check": cfg.inputs.check or "none", "seed": cfg.inputs.seed,
            "kit_version": __version__,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": cfg.output.command, "hosts": sorted({h for h, _ in ranks_info}),
            "env": captured_env(), "source": "", "config": cfg.record(),
            "clock_offsets_us": [round(o, 3) for o, _ in offsets],
            "clock_errors_us": [round(e, 3) for _, e in offsets],
            "group_size": self.nranks, "unique_buff": cfg.inputs.unique_buff,
            "complete": complete, "skipped_sizes": list(sw.skipped_sizes),
            "skipped_oversize": self.skipped_oversize,
            **job_attrs(),          # launcher, Slurm job id, step, node list
        }
        if not complete:
            attrs["incomplete_reason"] = "run still in progress or interrupted"
        attrs.update(getattr(self, "_facts", {}))
        if cfg.inputs.groups:
            attrs["groups"] = list(cfg.inputs.groups)
        if cfg.inputs.coalesced_ratio:
            attrs["coalesced_ratio"] = list(cfg.inputs.coalesced_ratio)
        attrs.update(self.backend.dataset_attrs(lays))  # nccl: versions, GPUs, what NCCL ran
        return make_dataset(
            algorithms=list(sw.algorithms), placements=list(sw.placements),
            sizes=[l.size for l in lays], counts=[l.count for l in lays],
            in_bytes=[l.in_bytes(dt.itemsize) for l in lays],
            out_bytes=[l.out_bytes(dt.itemsize) for l in lays],
            latency=np.stack([b[1] for b in blocks], axis=2),
            start=np.stack([b[2] for b in blocks], axis=2),
            wrong=np.stack([b[3] for b in blocks], axis=2),
            ranks=range(self.world_size), hosts=[h for h, _ in ranks_info],
            devices=[d for _, d in ranks_info], attrs=attrs,
            extra_coords=group_coords(cfg.inputs.groups, self.world_size))


def _set_bytes(entry, placement):
    """Bytes of one buffer set (send, recv, scratch[, count]) of a timed call:
    in place, send and recv share one allocation, the larger of the two."""
    send, recv, scratch = entry[0], entry[1], entry[2]
    scratch_bytes = 0 if scratch is None else int(scratch.nbytes)
    if placement == "in_place":
        return max(int(send.nbytes), int(recv.nbytes)) + scratch_bytes
    return int(send.nbytes) + int(recv.nbytes) + scratch_bytes


def _warn_only(event):
    """Events nobody listens to: warnings still reach the user."""
    if event.get("event") == "warning":
        warnings.warn(event["message"], RuntimeWarning, stacklevel=2)


def group_coords(groups, nranks):
    """Coords along `rank`: each rank's replica group and its rank in it."""
    groups = groups or [list(range(nranks))]
    group, group_rank = [0] * nranks, [0] * nranks
    for g, members in enumerate(groups):
        for k, r in enumerate(members):
            group[r], group_rank[r] = g, k
    return {"group": ("rank", np.asarray(group, dtype=np.int64)),
            "group_rank": ("rank", np.asarray(group_rank, dtype=np.int64))}
