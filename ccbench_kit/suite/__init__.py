"""Suites: a matrix of runs (collectives x environment variants x node or
rank counts x split masks) from one YAML file into one DataTree and one
report; ``ccbench suite FILE.yaml``."""
from .runner import collect, overview, run_suite, status
from .spec import load_suite, parse_suite

__all__ = ["collect", "load_suite", "overview", "parse_suite", "run_suite", "status"]
