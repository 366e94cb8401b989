"""``--custom-src-target-pairs``: the permute collective's pairs, in
nccom-test's format::

    {"src_target_pairs": [[[0, 1], [1, 0], [2, 3], [3, 2]]]}

Ranks are ranks within the replica group, and the same pairs apply to every
group.  The outer list may hold several lists only if they are identical
(one per group); a flat list of pairs is read too.  The pairs must be a
permutation of the group: every rank sends to exactly one rank and receives
from exactly one (``[r, r]`` keeps a rank's data where it is).
"""
from .source import is_int, load_keyed

FLAG = "--custom-src-target-pairs"


def read_pairs(value, group_size, flag=FLAG):
    """Validated ``[src, dst]`` pairs, sorted by source."""
    data, src = load_keyed(value, flag, "src_target_pairs", "a list of [src, target] pairs")
    if not isinstance(data, list) or not data:
        raise src.error("src_target_pairs must be a non-empty list of [src, target] pairs")
    nested = all(isinstance(x, list) and x and all(isinstance(y, list) for y in x) for x in data)
    lists = data if nested else [data]
    if any(lst != lists[0] for lst in lists[1:]):
        raise src.error(f"{len(lists)} different lists of pairs: give one list; it applies "
                        "to every replica group, in ranks within the group")
    return check_permutation(lists[0], group_size, src)


def check_permutation(pairs, n, src):
    """`pairs` if they permute ranks 0..n-1, else a `ConfigError` saying why."""
    for p in pairs:
        if not (isinstance(p, list) and len(p) == 2 and all(is_int(x) for x in p)):
            raise src.error(f"{p!r} is not a [src, target] pair of rank numbers")
        for x in p:
            if not 0 <= x < n:
                raise src.error(f"rank {x} in pair {p} is out of range: the group has "
                                f"{n} ranks (0..{n - 1})")
    for i, role in ((0, "sends"), (1, "receives")):
        seen = {}
        for p in pairs:
            if p[i] in seen:
                raise src.error(f"not a permutation: rank {p[i]} {role} twice, in "
                                f"{seen[p[i]]} and {p}")
            seen[p[i]] = p
        missing = [r for r in range(n) if r not in seen]
        if missing:
            raise src.error(f"not a permutation: rank {missing[0]} {role} nothing "
                            f"(every rank 0..{n - 1} needs one pair as "
                            f"{'source' if i == 0 else 'target'}; [r, r] keeps data in place)")
    return sorted([list(p) for p in pairs])


def peers(pairs, rank):
    """(send_to, recv_from) of `rank` under `pairs`."""
    send_to = next(d for s, d in pairs if s == rank)
    recv_from = next(s for s, d in pairs if d == rank)
    return send_to, recv_from
