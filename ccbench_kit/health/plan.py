"""Which pairs of nodes meet in which round.

Every pair of N nodes is measured once per repeat, in rounds of disjoint
pairs (a round-robin tournament, the circle method): N - 1 rounds for even
N, N for odd N (each round one node sits out).  The pairs of one round run
at the same time, so the matrix costs O(N) rounds, not O(N^2) pair tests.

Pairs of one round share nothing at the nodes, but they may share an
oversubscribed uplink: two pairs that both cross the same spine split its
bandwidth, and a node whose own link is slow then hides behind the shared
one.  Given the topology (`leaf_of`), a round is split into waves so that
at most one pair crosses between any two leaves at a time; on a
non-blocking fabric (no topology given) a round is one wave.
"""


def tournament(n):
    """Rounds of disjoint pairs covering every pair of ``range(n)`` once.

    Returns a list of rounds, each a list of ``(a, b)`` with ``a < b``;
    ``n - 1`` rounds for even `n`, `n` for odd `n`.
    """
    if n < 2:
        return []
    players = list(range(n)) + ([None] if n % 2 else [])
    m = len(players)
    rounds = []
    for _ in range(m - 1):
        pairs = []
        for i in range(m // 2):
            a, b = players[i], players[m - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        # keep the first fixed, rotate the others by one
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def waves(pairs, leaf_of=None):
    """Split one round's pairs into waves that share no uplink.

    Pairs inside one leaf never share an uplink; of the pairs between two
    leaves, one per wave (per unordered leaf pair).  `leaf_of` maps a node
    index to its leaf (None: no topology, one wave).
    """
    if leaf_of is None:
        return [list(pairs)]
    out = []
    for a, b in pairs:
        crossing = frozenset((leaf_of(a), leaf_of(b))) if leaf_of(a) != leaf_of(b) else None
        for wave in out:
            if crossing is None or crossing not in wave["crossings"]:
                wave["pairs"].append((a, b))
                if crossing is not None:
                    wave["crossings"].add(crossing)
                break
        else:
            out.append({"pairs": [(a, b)], "crossings": {crossing} - {None}})
    return [w["pairs"] for w in out]


def schedule(n, leaf_of=None):
    """The waves of the whole matrix: a list of lists of pairs, in order."""
    return [w for r in tournament(n) for w in waves(r, leaf_of)]


def halves(nodes):
    """Split `nodes` for bisection: the first half and the rest."""
    k = len(nodes) // 2
    return list(nodes[:k]), list(nodes[k:])
