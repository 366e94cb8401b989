"""An emulated Slurm cluster on one machine, for ccbench_kit's tests and
demos: real slurmctld/slurmd/munge, one network namespace per node, a
two-tier fabric shaped with tc, and faults to inject (see README.md)."""
from .cluster import Cluster, Config, TestbedError, check_host, parse_fault
from .faults import KINDS as FAULT_KINDS, FaultUnavailable, lossy_unavailable

__all__ = ["Cluster", "Config", "TestbedError", "FaultUnavailable", "FAULT_KINDS",
           "check_host", "parse_fault", "lossy_unavailable"]
