"""nccl-tests' ``-z/--blocking`` modes (2.19.6, ``startColl``/``BenchTime``),
as the kit's timed loops run them (ext/loop.c for the mpi backend,
`backends.nccl.NCCLBackend._loop` for nccl).

One place for what each mode does; the Dataset's ``blocking_mode`` attr
records the sentence of the mode a run used.
"""

BLOCKING_MODES = {
    0: "none: the iterations run back to back, each timed",
    1: "a barrier after every operation (-m), inside the timed span",
    2: "a wait for every operation (-m) to complete, no barrier",
    3: "a wait and a barrier after every iteration (-n), outside the timed span",
}

# What mode 2 adds on a backend whose calls have completed when they return
# (an MPI collective on host buffers): nothing.
BLOCKING_ON_RETURN = "the calls complete before they return, so mode 2 times as mode 0"
