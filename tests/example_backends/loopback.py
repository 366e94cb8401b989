"""An example backend, `loopback`: every rank computes the collective itself
with numpy from all ranks' inputs, exchanged over mpi4py.

It is the worked example of docs/architecture.md ("a new backend"): it plugs
in through `ccbench_kit.backends.base.Backend` alone, and one line registers
it (``backends.register("loopback", "example_backends.loopback:LoopbackBackend")``,
or an entry point in the ``ccbench_kit.backends`` group).  The data moves as
pickled numpy arrays over the control plane (``comm.allgather``), so it
measures Python and MPI's pickling, not a network; its results are checked
against the harness's own golden results, computed by other code.
"""
import time
from dataclasses import dataclass

import numpy as np

from ccbench_kit.backends.base import Backend
from ccbench_kit.backends.hostloop import HostBuffers, time_on_host
from ccbench_kit.errors import ConfigError

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall",
               "sendrecv")
# the engine's op numbers (ccbench_kit.dtypes.OPS) to numpy reductions
REDUCE = {0: np.sum, 1: np.prod, 2: np.min, 3: np.max}


@dataclass(frozen=True)
class LoopbackOptions:
    delay_us: float = 0.0   # --loopback-delay-us: added to every call, to see options arrive


class LoopbackBackend(HostBuffers, Backend):
    name = "loopback"
    default_algorithm = "numpy"
    Options = LoopbackOptions
    timing = "host-clock"

    @classmethod
    def algorithms_for(cls, collective):
        return ["numpy"] if collective in COLLECTIVES else []

    @classmethod
    def add_arguments(cls, group):
        group.add_argument("--loopback-delay-us", type=float, default=0.0, metavar="US",
                           help="loopback: microseconds added to every call")

    @classmethod
    def options_from_args(cls, args):
        return {"delay_us": args.loopback_delay_us} if args.loopback_delay_us else {}

    @classmethod
    def make_options(cls, **values):
        opts = super().make_options(**values)
        if not opts.delay_us >= 0:
            raise ConfigError(f"must be >= 0, got {opts.delay_us}", "--loopback-delay-us")
        return opts

    @property
    def library(self):
        return f"numpy {np.__version__} (loopback)"

    @property
    def device_name(self):
        return "numpy"

    def time(self, collective, algorithm, buffers, *, count, dtype, op, root, warmup, iters,
             agg=1, blocking=0, progress=None, once=False, **vectors):
        if dtype.is_float != (dtype.storage.kind == "f"):  # bf16, fp8: bit patterns
            raise ConfigError(f"loopback has no {dtype.name}", "-d/--datatype")

        def call(send, recv, n):
            self._call(collective, send, recv, n, op, root)
            if self.options.delay_us:
                time.sleep(self.options.delay_us / 1e6)
        return time_on_host(call, buffers, self.comm, count=count, warmup=warmup, iters=iters,
                            agg=agg, blocking=blocking, progress=progress, once=once)

    def _call(self, collective, send, recv, count, op, root):
        """One collective, computed here from every rank's send buffer."""
        rank, p = self.comm.Get_rank(), self.comm.Get_size()
        everyone = self.comm.allgather(np.array(send, copy=True))
        if collective == "all_reduce":
            out = REDUCE[op](np.stack(everyone), axis=0)
        elif collective == "all_gather":
            out = np.concatenate(everyone)
        elif collective == "reduce_scatter":
            out = REDUCE[op](np.stack([x[rank * count:(rank + 1) * count] for x in everyone]),
                             axis=0)
        elif collective == "broadcast":
            out = everyone[root]
        elif collective == "sendrecv":  # from the previous rank, to the next
            out = everyone[(rank - 1) % p]
        else:  # alltoall: block r of every rank's input, in rank order
            out = np.concatenate([x[rank * count:(rank + 1) * count] for x in everyone])
        recv[...] = out.astype(recv.dtype, copy=False)[:len(recv)]
