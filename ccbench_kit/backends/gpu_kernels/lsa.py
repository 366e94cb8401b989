"""nccl-tests' ``-D 1`` all_reduce (``--algorithms lsa``), on NCCL's device
API: each element summed by one rank straight from every rank's send window
and stored into every rank's receive window, between two LSA barriers.
Symmetric windows (``-R 2``), nvcc and NCCL 2.28's device headers
(`_devapi`)."""
COLLECTIVE = "all_reduce"
NAME = "lsa"
SOURCE = "lsa.cu"
API = "nccl-device"
DEVICE_IMPLEMENTATION = 1  # nccl-tests' -D
