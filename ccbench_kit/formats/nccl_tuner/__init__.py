"""NCCL's tuner example (NVIDIA/nccl plugins/tuner/example): the performance CSV its
optimize_config.py reads, written."""
