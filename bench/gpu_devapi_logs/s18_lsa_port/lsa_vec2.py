"""EXPERIMENT (session 18, not committed): lsa-vec without __launch_bounds__."""
COLLECTIVE = "all_reduce"
NAME = "lsa-vec2"
SOURCE = "lsa_vec2.cu"
API = "nccl-device"
DEVICE_IMPLEMENTATION = 97
