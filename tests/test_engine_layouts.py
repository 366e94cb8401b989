"""Sizes, counts and bus factors of every collective (docs/theory.md's table and
nccl-tests' src/<coll>.cu), and the check's tolerances and golden values."""
from pathlib import Path

import numpy as np
import pytest

from ccbench_kit import checks, collectives
from ccbench_kit.collectives.alltoallv import distance_weighted
from ccbench_kit.dtypes import get_dtype
from ccbench_kit.errors import ConfigError

FIXTURES = Path(__file__).parent / "data" / "baselines"  # nccl-tests logs (data/baselines/README.md)

# p = 4 ranks, fp32, 1000 B requested:
# (size, count, send elems, recv elems, bus factor), computed by hand.
EXPECTED = {
    "all_reduce": (1000, 250, 250, 250, 1.5),
    "all_gather": (992, 62, 62, 248, 0.75),        # 1000 // 4 // 4 = 62 per rank
    "reduce_scatter": (992, 62, 248, 62, 0.75),
    "alltoall": (992, 62, 248, 248, 0.75),
    "alltoallv": (988, 62, 248, 248, 0.75),        # 41 + 82 + 124 elements to distances 1..3
    "sendrecv": (1000, 250, 250, 250, 1.0),
    "permute": (1000, 250, 250, 250, 1.0),
    "broadcast": (1000, 250, 250, 250, 1.0),
    "reduce": (1000, 250, 250, 250, 1.0),
    "gather": (992, 62, 62, 248, 0.75),
    "scatter": (992, 62, 248, 62, 0.75),
    "hypercube": (744, 62, 62, 248, 1.0),          # count × (p - 1) elements
}


def test_every_collective_is_listed():
    assert set(EXPECTED) == set(collectives.NAMES)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_layout_and_bus_factor(name):
    coll = collectives.get(name)
    lay = coll.layout(1000, 4, 4)
    size, count, send, recv, factor = EXPECTED[name]
    assert (lay.size, lay.count, lay.send_elems, lay.recv_elems) == (size, count, send, recv)
    assert coll.bus_factor(4) == pytest.approx(factor)


@pytest.mark.parametrize("alias,name", [
    ("allr", "all_reduce"), ("allreduce", "all_reduce"), ("allg", "all_gather"),
    ("redsct", "reduce_scatter"), ("reduce-scatter", "reduce_scatter"), ("a2a", "alltoall"),
    ("all_to_allv", "alltoallv"), ("bcast", "broadcast"), ("send_recv", "sendrecv"),
    ("PERMUTE", "permute"), ("hc", "hypercube"), ("gather", "gather"), ("scatter", "scatter"),
    ("reduce", "reduce")])
def test_aliases(alias, name):
    assert collectives.get(alias).name == name


def test_unknown_collective_names_the_choices():
    with pytest.raises(ConfigError, match="COLLECTIVE: unknown collective 'allreduse'.*hypercube"):
        collectives.get("allreduse")


def test_too_small_names_the_flag():
    with pytest.raises(ConfigError, match=r"-b/--minbytes: all_gather size 12 B is too small .* 16 B"):
        collectives.get("all_gather").layout(12, 4, 4)


def _fixture_rows(name):
    rows = []
    for line in (FIXTURES / f"{name}_h200x2.txt").read_text().splitlines():
        f = line.split()
        if f and not line.lstrip().startswith("#") and f[0].isdigit():
            rows.append((int(f[0]), int(f[1])))
    return rows


@pytest.mark.parametrize("name", ["all_reduce", "all_gather"])
def test_size_and_count_match_nccl_tests(name):
    """nccl-tests 2.19.6 on 2 ranks, float: the size and count columns.

    nccl-tests also rounds per-rank counts down to 16 bytes for GPU
    alignment, so it prints 0 for all_gather below 32 B; the kit does not."""
    rows = _fixture_rows(name)
    assert len(rows) > 25
    coll = collectives.get(name)
    for size, count in rows:
        if size >= 32:
            lay = coll.layout(size, 4, 2)
            assert (lay.size, lay.count) == (size, count)


def test_alltoallv_default_pattern_is_nccl_tests():
    counts = distance_weighted(10, 4)          # T = 40 elements per rank
    assert counts.tolist() == [[0, 6, 13, 20], [20, 0, 6, 13], [13, 20, 0, 6], [6, 13, 20, 0]]
    assert (counts.sum(axis=0) == counts.sum(axis=1)).all()


def test_alltoallv_metadata_sets_the_size():
    from ccbench_kit.config import InputConfig
    meta = [{"send_counts": [1, 4], "send_displs": [0, 1], "recv_counts": [1, 2], "recv_displs": [0, 3]},
            {"send_counts": [2, 3], "send_displs": [5, 0], "recv_counts": [4, 3], "recv_displs": [0, 4]}]
    coll = collectives.get("alltoallv").configure(InputConfig(alltoallv=meta), [0, 1])
    lay = coll.layout(1 << 20, 4, 2)
    # rank 1 receives 4 + 3 = 7 elements, the most any rank sends or receives
    assert (lay.size, lay.count, lay.send_elems, lay.recv_elems) == (28, 7, 7, 7)
    v = coll.engine_vectors(1, 2, lay)
    assert v["sdispls"].tolist() == [5, 0] and v["recvcounts"].tolist() == [4, 3]
    inputs = [np.arange(7, dtype=np.int32), np.arange(100, 107, dtype=np.int32)]
    gold = coll.golden(inputs, 1, 2, "none", -1, get_dtype("int32"))
    # from rank 0: its elements 1..4 (send_displs[1] = 1) at 0..3; from itself:
    # its elements 0..2 (send_displs[1] = 0) at 4..6
    assert gold.tolist() == [1, 2, 3, 4, 100, 101, 102]


def test_tolerances():
    fp32, bf16 = get_dtype("fp32"), get_dtype("bf16")
    u32 = 2.0 ** -24
    assert checks.tolerance(fp32, "sum", 4) == pytest.approx(2 * 3 * u32)
    assert checks.tolerance(fp32, "avg", 4) == pytest.approx(2 * 4 * u32)
    assert checks.tolerance(bf16, "prod", 5) == pytest.approx(2 * 4 * 2.0 ** -8)
    for op in ("min", "max", "none"):
        assert checks.tolerance(bf16, op, 5) == 0.0
    assert checks.tolerance(get_dtype("int8"), "sum", 5) == 0.0


def test_tolerance_is_tight_enough_to_catch_an_ulp_too_many():
    """A sum of 2 fp32 inputs rounds once: 3 ulps off is wrong."""
    dt = get_dtype("fp32")
    golden = np.array([1.0 + 2 ** -22])
    good = np.float32(golden[0])
    bad = np.nextafter(np.nextafter(np.nextafter(good, np.float32(2)), np.float32(2)), np.float32(2))
    scale = np.array([1.0])
    assert checks.count_wrong(np.array([good]), golden, dt, "sum", 2, scale) == 0
    assert checks.count_wrong(np.array([bad]), golden, dt, "sum", 2, scale) == 1
    assert checks.count_wrong(np.array([good]), None, dt, "sum", 2) == 0  # undefined output


@pytest.mark.parametrize("name,op,g", [("all_reduce", "sum", 5.0), ("all_reduce", "prod", 1.0),
                                       ("all_reduce", "avg", 1.0), ("reduce", "sum", 5.0),
                                       ("all_gather", "none", 1.0), ("alltoall", "none", 1.0)])
def test_all_ones_golden_value(name, op, g):
    coll = collectives.get(name)
    assert checks.golden_value(coll, op, 5) == g
    dt = get_dtype("bf16")
    lay = coll.layout(4000, 2, 5)
    inputs = [checks.make_input(dt, lay.send_elems, r, "all_ones", 0) for r in range(5)]
    gold, _ = checks.expected(coll, inputs, 0, 5, op, 0, dt)
    assert np.all(gold == g)


def test_random_inputs_are_seeded_and_nonzero():
    dt = get_dtype("fp16")
    a = checks.make_input(dt, 1000, 3, "random", 42)
    assert np.array_equal(a, checks.make_input(dt, 1000, 3, "random", 42))
    assert not np.array_equal(a, checks.make_input(dt, 1000, 2, "random", 42))
    assert np.all(np.abs(a.astype(np.float64)) >= 0.49)
