"""Inputs beyond sizes and names: replica groups, alltoallv metadata, permute
pairs and coalesced ratios, read from JSON files or specs and validated once,
before any rank starts.  Bad input raises `ConfigError` naming the flag and
the file; the harness and the collectives only read the parsed result (the
`RunConfig` fields ``groups``, ``alltoallv``, ``pairs``, ``coalesced_ratio``).
"""
from ..errors import ConfigError
from .alltoallv import FLAG as ALLTOALLV_FLAG
from .alltoallv import read_alltoallv
from .coalesced import FLAG as COALESCED_FLAG
from .coalesced import combined, parse_ratio, split_layout
from .groups import (data_parallel_groups, groups_from_colors, parse_split,
                     read_replica_groups, resolve_groups, split_colors)
from .pairs import FLAG as PAIRS_FLAG
from .pairs import peers, read_pairs

__all__ = ["parse_inputs", "resolve_groups", "read_alltoallv", "read_pairs", "read_replica_groups",
           "parse_split", "split_colors", "groups_from_colors", "data_parallel_groups",
           "parse_ratio", "split_layout", "combined", "peers"]

# The collectives each input belongs to.
_USERS = {ALLTOALLV_FLAG: ("alltoallv",), PAIRS_FLAG: ("permute",)}


def parse_inputs(collective, nranks, *, split=None, data_parallel_dimension=None,
                 replica_groups=None, alltoallv_metadata=None, src_target_pairs=None,
                 coalesced_ratio=None, env=None):
    """Parse and validate every input of one run.

    Parameters
    ----------
    collective : str
        The collective's canonical name.
    nranks : int
        Ranks in the world (``-r``).
    split, data_parallel_dimension, replica_groups
        At most one; see `resolve_groups`.  ``NCCL_TESTS_SPLIT`` from `env`
        applies when none is given.
    alltoallv_metadata, src_target_pairs : str, path or parsed JSON
        Only for alltoallv and permute.
    coalesced_ratio : str or list

    Returns
    -------
    dict
        ``groups``, ``alltoallv``, ``pairs``, ``coalesced_ratio``: the
        `RunConfig` fields.
    """
    for flag, value in ((ALLTOALLV_FLAG, alltoallv_metadata), (PAIRS_FLAG, src_target_pairs)):
        if value not in (None, "") and collective not in _USERS[flag]:
            raise ConfigError(f"applies to {' and '.join(_USERS[flag])} only, "
                              f"not {collective}", flag)
    groups = resolve_groups(nranks, split, data_parallel_dimension, replica_groups, env)
    gsize = len(groups[0]) if groups else nranks
    out = {"groups": groups, "alltoallv": [], "pairs": [],
           "coalesced_ratio": parse_ratio(coalesced_ratio)}
    if alltoallv_metadata not in (None, ""):
        out["alltoallv"] = read_alltoallv(alltoallv_metadata, nranks, groups)
    if src_target_pairs not in (None, ""):
        out["pairs"] = read_pairs(src_target_pairs, gsize)
    if out["coalesced_ratio"] and out["alltoallv"]:
        raise ConfigError("cannot split alltoallv, whose counts come from "
                          "--alltoallv-metadata", COALESCED_FLAG)
    return out
