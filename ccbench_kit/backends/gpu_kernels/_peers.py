"""Peer memory and launches of the own kernels, for one nccl backend.

Each rank owns a staging buffer of two halves and a small flag area
(cudaMalloc), maps every other rank's with CUDA IPC (handles exchanged over
the job's MPI communicator) and keeps its call number in its own memory
(common.cuh says why the halves and the number).  Everything here is collective over the communicator: the
ranks call it with the same algorithm and size, in the same order, as the
harness does; every refusal is agreed (the first rank's reason wins), so no
rank waits on a peer that gave up.
"""
from . import _nvrtc
from ._registry import ELEMENT_TYPES, OPS, WORD_BYTES, kernel_name

MAX_PEERS = 8      # common.cuh's CCB_MAX_PEERS, ext/nccl_api.h's CCBN_MAX_PEERS
MAX_BLOCKS = 128   # common.cuh's CCB_MAX_BLOCKS
THREADS = 512      # common.cuh's __launch_bounds__
FLAG_BYTES = MAX_BLOCKS * MAX_PEERS * 4
ALIGN = 2 << 20


def stage_name(module):
    """The staging buffer `module`'s kernels use: the one every kernel
    shares, or its own (``STAGE``: LL lines, common.cuh says why)."""
    own = getattr(module, "STAGE", "")
    return f"stage:{own}" if own else "stage"


def agree(comm, reason):
    """The first non-empty reason among the ranks of `comm` ("" if none);
    collective: every rank refuses together or none does."""
    return next((r for r in comm.allgather(reason) if r), "")


class PeerKernels:
    """The own kernels of one backend: compiled modules, peer buffers, calls.

    Parameters
    ----------
    lib : ccbench_kit._nccl.Library
    comm : mpi4py communicator of the collectives
    device : int
        This rank's GPU (current).
    gpu : dict
        This rank's GPU: ``device_info``'s name and pci_bus_id, and its host.
    """

    def __init__(self, lib, comm, device, gpu):
        self.lib, self.comm, self.device = lib, comm, device
        self.rank, self.nranks = comm.Get_rank(), comm.Get_size()
        self._gpu = gpu
        self._gpus = []
        self._setup = None          # "" when peer memory is ready, else why not
        self._modules = {}          # (source, phase) -> loaded module handle, or why not
        self._functions = {}        # (kernel name, phase) -> function handle
        self._mine = {}             # "flags", "seq", staging buffers -> (ptr, bytes)
        self._peers = {"flags": []}  # every rank's pointer of each, mapped here
        self.target = ""
        self.images = {}            # (source, phase) -> the cached image it was loaded from

    # -- agreement -------------------------------------------------------------
    def _agree(self, reason):
        return agree(self.comm, reason)

    def refusal(self, module, dtype, op, phase=""):
        """Why `module` (its `phase` alone, one of `PHASES`, or whole) can't
        run here ("" when it can); collective."""
        if dtype not in ELEMENT_TYPES:
            return f"{module.NAME} has {', '.join(ELEMENT_TYPES)} kernels, not {dtype}"
        if op not in OPS:
            return f"{module.NAME} has {', '.join(OPS)} kernels, not {op}"
        if self._setup is None:
            self._gpus = self.comm.allgather(self._gpu)
            try:
                problem = self._local_problem()
            except Exception as e:  # a CUDA error asking about the GPUs: this rank's reason
                problem = f"the GPUs could not be queried: {e}"
            self._setup = self._agree(problem) or self._agree(self._map_flags())
        if self._setup:
            return self._setup
        key = (module.SOURCE, phase)
        if key not in self._modules:
            self._modules[key] = self._load(module, phase)
        loaded = self._modules[key]
        return loaded if isinstance(loaded, str) else ""

    def _local_problem(self):
        """What keeps this rank from peer memory with every other ("" if nothing)."""
        me = self._gpus[self.rank]
        if self.nranks > MAX_PEERS:
            return f"{self.nranks} ranks: the kit's own kernels take at most {MAX_PEERS}"
        if len({g["host"] for g in self._gpus}) > 1:
            return "its ranks are on more than one host; peer memory needs one"
        models = sorted({g["name"] for g in self._gpus})
        if len(models) > 1:
            return f"GPUs of different models ({', '.join(models)})"
        if not (self.lib.has("cuLaunchKernel") and self.lib.has("cudaIpcOpenMemHandle")):
            return "the CUDA driver library libcuda.so.1 (or CUDA IPC) could not be loaded"
        for r, g in enumerate(self._gpus):
            if g["pci_bus_id"] == me["pci_bus_id"]:
                continue
            dev = self.lib.device_by_bus_id(g["pci_bus_id"])
            if dev < 0:
                return (f"rank {self.rank} does not see rank {r}'s GPU {g['pci_bus_id']} "
                        "(CUDA_VISIBLE_DEVICES)")
            if not self.lib.can_access_peer(self.device, dev):
                return (f"no peer access from GPU {me['pci_bus_id']} to {g['pci_bus_id']} "
                        f"(ranks {self.rank} and {r})")
        major, minor = self.lib.compute_capability(self.device)
        if major < 8:
            return f"its bf16 conversions need sm_80 or later; this GPU is sm_{major}{minor}"
        self.target = f"sm_{major}{minor}"
        return ""

    # -- memory --------------------------------------------------------------------
    def _alloc(self, name, nbytes):
        ptr = self.lib.malloc(nbytes)
        self.lib.fill(ptr, 0, nbytes)
        self._mine[name] = (ptr, nbytes)
        return ptr

    def _exchange(self, name):
        """Every rank's `name` buffer, mapped into this process."""
        ptr = self._mine[name][0]
        handles = self.comm.allgather(self.lib.ipc_handle(ptr))
        return [ptr if r == self.rank else self.lib.ipc_open(h) for r, h in enumerate(handles)]

    def _map_flags(self):
        try:
            self._alloc("flags", FLAG_BYTES)
            self._alloc("seq", 8)  # common.cuh's call number and blocks done
            self._peers["flags"] = self._exchange("flags")
        except Exception as e:  # a CUDA error from the runtime: this rank's reason
            return f"peer memory could not be set up: {e}"
        return ""

    def _ensure_stage(self, name, nbytes):
        """Staging buffer `name` of two halves of `nbytes` or more on every
        rank (collective); why not ("" when there is one), agreed: a rank
        short of memory must not leave the others waiting for its handle.
        The halves keep their size while the buffer lives (common.cuh relies
        on it)."""
        need = 2 * max(self.comm.allgather(-(-max(nbytes, 1) // ALIGN) * ALIGN))
        if name in self._mine and self._mine[name][1] >= need:
            return ""
        self._unmap(name)
        reason = ""
        try:
            self._alloc(name, need)
        except Exception as e:  # cudaMalloc's out of memory, on this rank
            reason = f"no device memory for its {need} B staging buffer: {e}"
        reason = self._agree(reason)
        if reason:
            if name in self._mine:
                self.lib.free(self._mine.pop(name)[0])
            return reason
        self._peers[name] = self._exchange(name)
        return ""

    def _unmap(self, name):
        """Unmap the peers' `name` buffers and free this rank's (collective:
        no rank frees while a peer still has it mapped)."""
        for r, p in enumerate(self._peers.get(name, [])):
            if r != self.rank:
                self.lib.ipc_close(p)
        self._peers[name] = []
        self.comm.Barrier()
        if name in self._mine:
            self.lib.free(self._mine.pop(name)[0])

    # -- kernels -------------------------------------------------------------------
    def _load(self, module, phase):
        """The loaded module of `module`'s source (`phase`), or why not (agreed)."""
        handle, reason = 0, ""
        try:
            data, self.images[module.SOURCE, phase] = _nvrtc.image(
                _nvrtc.load(), module, self.target, phase=phase)
            handle = self.lib.module_load(data)
            for dt in ELEMENT_TYPES:
                for wide in (False, True):
                    name = kernel_name(module, dt, wide)
                    self._functions[name, phase] = self.lib.module_function(handle, name)
        except Exception as e:  # NVRTC missing, a compile error, a driver refusing the image
            reason = str(e)
        return self._agree(reason) or handle

    def calls(self, module, dtype, base_calls, phase=""):
        """`base_calls` (the backend's call dicts) with `module`'s kernel for
        `dtype` (a `ccbench_kit.dtypes` type; its `phase` alone, or whole),
        and what it launches (text); (None, why not) where the staging
        buffer could not be had."""
        count = max(d["count"] for d in base_calls)
        stage = stage_name(module)
        short = self._ensure_stage(stage, module.staging_elems(count, self.nranks) * dtype.itemsize)
        if short:
            return None, short
        # 16-byte words where every rank's every buffer and count allow them
        # (the ranks must agree: a block's elements are its words' elements)
        wide = all(self.comm.allgather(all(
            d["send"] % WORD_BYTES == 0 and d["recv"] % WORD_BYTES == 0
            and d["count"] * dtype.itemsize % WORD_BYTES == 0 for d in base_calls)))
        lanes = WORD_BYTES // dtype.itemsize if wide else 1
        per_block = THREADS * lanes  # a word a thread before any takes two (CCB_WORDS)
        blocks = max(1, min(MAX_BLOCKS,
                            -(-module.parallel_elems(count, self.nranks) // per_block)))
        name = kernel_name(module, dtype.name, wide)
        func = self._functions[name, phase]
        out = []
        for d in base_calls:
            kargs = {"send": d["send"], "recv": d["recv"], "count": d["count"],
                     "stage": self._peers[stage], "signal": self._peers["flags"],
                     "seq": self._mine["seq"][0], "half": self._mine[stage][1] // 2,
                     "rank": self.rank,
                     "nranks": self.nranks}
            out.append(dict(d, kernel=(func, blocks, THREADS, kargs)))
        return out, f"{name} {blocks}x{THREADS}"

    def close(self):
        for m in self._modules.values():
            if not isinstance(m, str) and m:
                try:
                    self.lib.module_unload(m)
                except Exception:  # at exit the context may be gone already
                    pass
        self._modules.clear()
        for name in [n for n in self._peers if n != "flags"] + ["flags"]:
            if self._peers.get(name):
                self._unmap(name)
        if "seq" in self._mine:
            self.lib.free(self._mine.pop("seq")[0])

