"""``--alltoallv-metadata``: counts and displacements in nccom-test's format.

::

    {"alltoallv_metadata": [
        {"send_counts": [512, 1024], "send_displs": [0, 512],
         "recv_counts": [512, 512], "recv_displs": [0, 512]}]}

Counts and displacements are in elements; each list has one value per rank
of the replica group.  One entry applies to every rank; otherwise give one
entry per rank of the group (the same for every group), or one per world
rank.  The result has one entry per world rank, so that rank r reads
``cfg.alltoallv[r]`` (r = its rank in the world, before any group split).

Checked here, because MPI would fail later with a less useful message:
every list is as long as the group; no count or displacement is negative;
no two peers' send ranges, nor two peers' receive ranges, overlap; and what
rank i sends to rank j is what rank j expects from rank i (MPI_Alltoallv
requires matching counts).
"""
from .source import is_int, load

FLAG = "--alltoallv-metadata"
KEYS = ("send_counts", "send_displs", "recv_counts", "recv_displs")


def read_alltoallv(value, nranks, groups=(), flag=FLAG):
    """One validated entry per world rank (dicts of `KEYS`, lists of ints).

    Parameters
    ----------
    value : str or path or dict or list
        The JSON file, or its parsed content.
    nranks : int
        Ranks in the world.
    groups : list of lists, optional
        Replica groups (world ranks); empty for one group of every rank.
    """
    data, src = load(value, flag)
    groups = [list(g) for g in groups] or [list(range(nranks))]
    gsize = len(groups[0])
    entries = _entries(data, src)
    for i, e in enumerate(entries):
        _check_entry(e, i, gsize, src)
    if len(entries) == 1:
        per_world = [entries[0]] * nranks
    elif len(entries) == gsize:
        per_world = [None] * nranks
        for g in groups:
            for k, r in enumerate(g):
                per_world[r] = entries[k]
    elif len(entries) == nranks:
        per_world = entries
    else:
        raise src.error(f"{len(entries)} entries: give 1 (for every rank) or one per rank "
                        f"of the replica group ({gsize})"
                        + (f" or of the world ({nranks})" if nranks != gsize else ""))
    for g in groups:
        _check_matching(g, per_world, src)
    return [{k: list(e[k]) for k in KEYS} for e in per_world]


def _entries(data, src):
    if isinstance(data, dict) and "alltoallv_metadata" in data:
        data = data["alltoallv_metadata"]
    elif isinstance(data, dict) and "send_counts" in data:
        data = [data]
    if not isinstance(data, list) or not data:
        raise src.error("expected {\"alltoallv_metadata\": [{\"send_counts\": [...], "
                        "\"send_displs\": [...], \"recv_counts\": [...], \"recv_displs\": [...]}]}")
    return data


def _check_entry(e, i, gsize, src):
    if not isinstance(e, dict):
        raise src.error(f"entry {i} is not an object with {', '.join(KEYS)}")
    missing = [k for k in KEYS if k not in e]
    unknown = sorted(set(e) - set(KEYS))
    if missing or unknown:
        raise src.error(f"entry {i}: " + "; ".join(
            ([f"missing {', '.join(missing)}"] if missing else [])
            + ([f"unknown key {', '.join(map(repr, unknown))}"] if unknown else [])))
    for k in KEYS:
        v = e[k]
        if not isinstance(v, list) or not all(is_int(x) for x in v):
            raise src.error(f"entry {i}: {k} must be a list of integers")
        if len(v) != gsize:
            raise src.error(f"entry {i}: {k} has {len(v)} values but the replica group "
                            f"has {gsize} ranks")
        neg = [j for j, x in enumerate(v) if x < 0]
        if neg:
            raise src.error(f"entry {i}: {k}[{neg[0]}] is negative ({v[neg[0]]})")
    for side in ("send", "recv"):
        _check_overlap(e[f"{side}_counts"], e[f"{side}_displs"], f"entry {i}: {side}", src)


def _check_overlap(counts, displs, what, src):
    spans = sorted((d, d + c, j) for j, (c, d) in enumerate(zip(counts, displs)) if c > 0)
    for (a0, a1, ja), (b0, b1, jb) in zip(spans, spans[1:]):
        if b0 < a1:
            raise src.error(f"{what} ranges overlap: peer {ja} has elements [{a0}, {a1}) "
                            f"and peer {jb} has [{b0}, {b1}) (from {what.split()[-1]}_displs)")


def _check_matching(group, per_world, src):
    for i, ri in enumerate(group):
        for j, rj in enumerate(group):
            sent = per_world[ri]["send_counts"][j]
            expected = per_world[rj]["recv_counts"][i]
            if sent != expected:
                raise src.error(
                    f"rank {ri} sends {sent} elements to rank {rj} (its send_counts[{j}]) but "
                    f"rank {rj} expects {expected} from it (its recv_counts[{i}]); "
                    "MPI_Alltoallv needs them equal")


def extents(entry):
    """(send, recv) buffer lengths in elements an entry needs."""
    def ext(counts, displs):
        return max([d + c for c, d in zip(counts, displs)] + [0])
    return (ext(entry["send_counts"], entry["send_displs"]),
            ext(entry["recv_counts"], entry["recv_displs"]))
