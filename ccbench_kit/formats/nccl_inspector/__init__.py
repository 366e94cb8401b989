"""NCCL Inspector (NVIDIA/nccl plugins/profiler/inspector): its JSON dumps, read."""
