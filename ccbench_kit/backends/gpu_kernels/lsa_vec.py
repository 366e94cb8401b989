"""nccl-tests' ``-D 2`` all_reduce (``--algorithms lsa-vec``): ``lsa`` with
16-byte words and 128 bytes of loads in flight a thread, for large
messages.  As ``lsa``: symmetric windows (``-R 2``), nvcc, NCCL 2.28."""
COLLECTIVE = "all_reduce"
NAME = "lsa-vec"
SOURCE = "lsa_vec.cu"
API = "nccl-device"
DEVICE_IMPLEMENTATION = 2  # nccl-tests' -D
