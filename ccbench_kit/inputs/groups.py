"""Replica groups: which ranks run one collective together.

Every group runs the same collective at the same time on its own
communicator, as nccl-tests does with ``NCCL_TESTS_SPLIT`` and nccom-test with
``--data-parallel-dimension`` / ``--custom-replica-group``.  A group is a list
of world ranks; a rank's position in its list is its rank in the group.

Three ways to give them:

- ``NCCL_TESTS_SPLIT`` (environment or ``--split``): ``AND 0x7``, ``OR 4``,
  ``MOD 8``, ``DIV 8`` or the short forms ``&0x7``, ``|4``, ``%8``, ``/8``.
  Rank r gets the color ``r <op> value``; ranks of one color form a group,
  ordered by world rank (nccl-tests calls ``MPI_Comm_split(color, rank)``).
  Numbers are read as C's ``strtoul(s, 0)`` does (``0x`` hex, a leading ``0``
  octal), plus ``0b`` binary.  ``NCCL_TESTS_SPLIT_MASK=0x7`` (hex) is the
  older form of ``AND 0x7``.
- ``--data-parallel-dimension D``: groups of D ranks, ``nranks / D`` apart,
  so that with ranks placed node by node every group spans D nodes (the
  "one rank per node" layout nccom-test describes).
- ``--custom-replica-group FILE``: ``{"replica_groups": [[0, 1], [2, 3]]}``
  (a bare list of lists is read too).

All groups must have the same size: sizes round down to the group size, and
the Dataset has one size coordinate for every group.
"""
import os
import re

from .source import Source, is_int, load_keyed

SPLIT_FLAG = "--split"
DP_FLAG = "--data-parallel-dimension"
GROUP_FLAG = "--custom-replica-group"
SPLIT_ENV = ("NCCL_TESTS_SPLIT_MASK", "NCCL_TESTS_SPLIT")

_SPLIT_OPS = {"and": "&", "&": "&", "or": "|", "|": "|", "mod": "%", "%": "%",
              "div": "/", "/": "/"}
_SPLIT = re.compile(r"^\s*(and|or|mod|div|&|\||%|/)\s*(.*?)\s*$", re.IGNORECASE)
_BASES = ((re.compile(r"^0[bB]([01]+)$"), 2), (re.compile(r"^0[xX]([0-9a-fA-F]+)$"), 16),
          (re.compile(r"^0([0-7]*)$"), 8), (re.compile(r"^([1-9][0-9]*)$"), 10))


def parse_number(text, src):
    """A non-negative integer written as nccl-tests reads it (0x, 0b, 0, decimal)."""
    t = str(text).strip()
    for pattern, base in _BASES:
        m = pattern.match(t)
        if m:
            return int(m.group(1) or "0", base)
    raise src.error(f"cannot read {text!r} as a number (decimal, 0x hex, 0b binary or 0 octal)")


def parse_split(spec, flag=SPLIT_FLAG):
    """(op, value) of an ``NCCL_TESTS_SPLIT`` spec; op is one of ``& | % /``."""
    src = Source(flag)
    m = _SPLIT.match(str(spec))
    if not m:
        raise src.error(f"cannot read {spec!r}: expected AND, OR, MOD or DIV (or &, |, %, /) "
                        "and a number, e.g. 'AND 0x7', 'MOD 8', '/4'")
    op = _SPLIT_OPS[m.group(1).lower()]
    value = parse_number(m.group(2), src)
    if op in "%/" and value == 0:
        raise src.error(f"{spec!r} divides by zero")
    return op, value


def split_colors(spec, nranks, flag=SPLIT_FLAG):
    """Each rank's color under an ``NCCL_TESTS_SPLIT`` spec."""
    op, v = parse_split(spec, flag)
    f = {"&": lambda r: r & v, "|": lambda r: r | v, "%": lambda r: r % v,
         "/": lambda r: r // v}[op]
    return [f(r) for r in range(nranks)]


def groups_from_colors(colors):
    """Groups of equal color, each ordered by rank; group 0 holds rank 0."""
    by_color = {}
    for rank, c in enumerate(colors):
        by_color.setdefault(c, []).append(rank)
    return list(by_color.values())


def mask_of_groups(groups, nranks):
    """The ``AND`` mask that splits `nranks` ranks into `groups` (0 for one
    group of all, or no groups), or None when no mask does (``DIV 3``).

    Bit b is in the mask when rank 2^b is not in rank 0's group; the groups
    the mask makes are then compared with `groups`."""
    if not groups:
        return 0
    color = {r: k for k, g in enumerate(groups) for r in g}
    mask = sum(1 << b for b in range(max(nranks - 1, 1).bit_length())
               if (1 << b) < nranks and color.get(1 << b) != color.get(0))
    made = groups_from_colors([r & mask for r in range(nranks)])
    return mask if sorted(map(sorted, made)) == sorted(map(sorted, groups)) else None


def data_parallel_groups(dim, nranks, flag=DP_FLAG):
    """``nranks / dim`` groups of `dim` ranks, members ``nranks / dim`` apart."""
    src = Source(flag)
    if not is_int(dim) or dim < 1:
        raise src.error(f"must be a positive integer, got {dim!r}")
    if nranks % dim:
        raise src.error(f"{dim} does not divide the {nranks} ranks of -r/--nworkers")
    stride = nranks // dim
    return [[g + k * stride for k in range(dim)] for g in range(stride)]


def read_replica_groups(value, nranks, flag=GROUP_FLAG):
    """Validated groups from a JSON file (or parsed data)."""
    data, src = load_keyed(value, flag, "replica_groups", "a list of lists of ranks")
    return check_groups(data, nranks, src)


def check_groups(groups, nranks, src):
    """`groups` as lists of ints, or a `ConfigError` saying what is wrong."""
    if not isinstance(groups, list) or not groups or \
            not all(isinstance(g, list) and g for g in groups):
        raise src.error("replica groups must be a non-empty list of non-empty lists of ranks, "
                        "e.g. [[0, 1], [2, 3]]")
    for gi, g in enumerate(groups):
        bad = [r for r in g if not is_int(r)]
        if bad:
            raise src.error(f"group {gi} holds {bad[0]!r}, which is not a rank number")
    where = {}
    for gi, g in enumerate(groups):
        for r in g:
            if r in where:
                other = where[r]
                raise src.error(f"rank {r} is in group {other} and again in group {gi}"
                                if other != gi else f"rank {r} appears twice in group {gi}")
            where[r] = gi
    if len(where) > nranks:
        raise src.error(f"the groups name {len(where)} ranks but -r/--nworkers is {nranks}")
    for r, gi in where.items():
        if not 0 <= r < nranks:
            raise src.error(f"rank {r} in group {gi} is out of range: -r/--nworkers "
                            f"{nranks} gives ranks 0..{nranks - 1}")
    missing = [r for r in range(nranks) if r not in where]
    if missing:
        listed = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
        raise src.error(f"rank{'s' if len(missing) > 1 else ''} {listed} "
                        f"{'are' if len(missing) > 1 else 'is'} in no group; "
                        "every rank must be in exactly one")
    sizes = sorted({len(g) for g in groups})
    if len(sizes) > 1:
        raise src.error(f"groups must all have the same size, got sizes "
                        f"{[len(g) for g in groups]}")
    return [list(g) for g in groups]


def resolve_groups(nranks, split=None, data_parallel_dimension=None, replica_groups=None,
                   env=None):
    """The replica groups of a run, or [] for one group of every rank.

    At most one of `split`, `data_parallel_dimension` and `replica_groups`
    may be given; with none, ``NCCL_TESTS_SPLIT_MASK`` / ``NCCL_TESTS_SPLIT``
    from `env` (``os.environ`` by default) apply, as in nccl-tests.
    """
    given = [(f, v) for f, v in ((SPLIT_FLAG, split), (DP_FLAG, data_parallel_dimension),
                                 (GROUP_FLAG, replica_groups)) if v not in (None, "")]
    if len(given) > 1:
        raise Source(given[1][0]).error(f"give only one of {', '.join(f for f, _ in given)}")
    env = os.environ if env is None else env
    if given:
        flag, value = given[0]
        if flag == SPLIT_FLAG:
            groups = groups_from_colors(split_colors(value, nranks, flag))
        elif flag == DP_FLAG:
            groups = data_parallel_groups(value, nranks, flag)
        else:
            groups = read_replica_groups(value, nranks, flag)
    elif env.get("NCCL_TESTS_SPLIT_MASK"):
        mask = read_mask(env["NCCL_TESTS_SPLIT_MASK"])
        groups = groups_from_colors([r & mask for r in range(nranks)])
    elif env.get("NCCL_TESTS_SPLIT"):
        groups = groups_from_colors(split_colors(env["NCCL_TESTS_SPLIT"], nranks,
                                                 "NCCL_TESTS_SPLIT"))
    else:
        return []
    if groups == [list(range(nranks))]:
        return []
    flag = given[0][0] if given else "NCCL_TESTS_SPLIT"
    return check_groups(groups, nranks, Source(flag))


def read_mask(text, name="NCCL_TESTS_SPLIT_MASK"):
    """The value of NCCL_TESTS_SPLIT_MASK, read as nccl-tests reads it."""
    return parse_number(_hex(text), Source(name))


def _hex(text):
    # nccl-tests reads the mask with strtoul(s, NULL, 16): hex with or without 0x
    t = str(text).strip()
    return t if t.lower().startswith("0x") else "0x" + t
