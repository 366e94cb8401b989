"""Parsing and validation of JSON inputs and specs (no MPI needed)."""
import json

import pytest

from ccbench_kit import collectives
from ccbench_kit.errors import ConfigError
from ccbench_kit.inputs import (combined, data_parallel_groups, parse_inputs, parse_ratio,
                                parse_split, peers, read_alltoallv, read_pairs, resolve_groups,
                                split_colors, split_layout)


# -- NCCL_TESTS_SPLIT -----------------------------------------------------------------

@pytest.mark.parametrize("spec, expected", [
    ("AND 0x7", ("&", 7)), ("and0x7", ("&", 7)), ("&0b101", ("&", 5)), ("& 7", ("&", 7)),
    ("OR 4", ("|", 4)), ("|0x10", ("|", 16)), ("MOD 8", ("%", 8)), ("%3", ("%", 3)),
    ("DIV 8", ("/", 8)), ("/ 010", ("/", 8)),  # a leading 0 is octal, as strtoul(s, 0)
    ("  mod   0B11 ", ("%", 3)), ("AND 0", ("&", 0)),
])
def test_split_syntax_as_nccl_tests_reads_it(spec, expected):
    assert parse_split(spec) == expected


@pytest.mark.parametrize("spec", ["XOR 3", "AND", "MOD 0", "DIV 0x0", "AND 0x7z", "MOD -2",
                                  "8", "AND 09", "MOD 0b2"])
def test_split_syntax_errors_name_the_flag(spec):
    with pytest.raises(ConfigError) as e:
        parse_split(spec)
    assert str(e.value).startswith("--split: ")


def test_split_colors_follow_nccl_tests_formulas():
    assert split_colors("AND 0x1", 6) == [0, 1, 0, 1, 0, 1]
    assert split_colors("OR 0x2", 4) == [2, 3, 2, 3]
    assert split_colors("MOD 3", 6) == [0, 1, 2, 0, 1, 2]
    assert split_colors("DIV 3", 6) == [0, 0, 0, 1, 1, 1]


def test_resolve_groups_from_each_source():
    assert resolve_groups(6, split="DIV 3") == [[0, 1, 2], [3, 4, 5]]
    assert resolve_groups(6, split="%3") == [[0, 3], [1, 4], [2, 5]]
    # OR 2 on 4 ranks: colors 2,3,2,3
    assert resolve_groups(4, split="|2") == [[0, 2], [1, 3]]
    assert resolve_groups(6, data_parallel_dimension=2) == [[0, 3], [1, 4], [2, 5]]
    assert resolve_groups(6, data_parallel_dimension=3) == [[0, 2, 4], [1, 3, 5]]
    assert resolve_groups(4, replica_groups=[[3, 1], [0, 2]]) == [[3, 1], [0, 2]]
    # one group of every rank in order is no split at all
    assert resolve_groups(4, split="AND 0") == []
    assert resolve_groups(4, data_parallel_dimension=4) == []


def test_environment_split_applies_when_no_flag_is_given():
    assert resolve_groups(4, env={"NCCL_TESTS_SPLIT": "MOD 2"}) == [[0, 2], [1, 3]]
    # the older hex mask form, with or without 0x
    assert resolve_groups(4, env={"NCCL_TESTS_SPLIT_MASK": "1"}) == [[0, 2], [1, 3]]
    assert resolve_groups(8, env={"NCCL_TESTS_SPLIT_MASK": "0x6"}) == \
        [[0, 1], [2, 3], [4, 5], [6, 7]]
    # an explicit flag wins over the environment
    assert resolve_groups(4, split="DIV 2", env={"NCCL_TESTS_SPLIT": "MOD 2"}) == [[0, 1], [2, 3]]
    assert resolve_groups(4, env={}) == []
    with pytest.raises(ConfigError, match=r"^NCCL_TESTS_SPLIT: .*divides by zero"):
        resolve_groups(4, env={"NCCL_TESTS_SPLIT": "DIV 0"})


def test_unequal_groups_are_refused():
    with pytest.raises(ConfigError, match=r"^--split: groups must all have the same size, "
                                          r"got sizes \[3, 2\]"):
        resolve_groups(5, split="DIV 3")


def test_only_one_group_source():
    with pytest.raises(ConfigError, match="give only one of --split, --data-parallel-dimension"):
        resolve_groups(4, split="DIV 2", data_parallel_dimension=2)


def test_data_parallel_dimension_must_divide():
    with pytest.raises(ConfigError, match=r"^--data-parallel-dimension: 2 does not divide the 5"):
        data_parallel_groups(2, 5)
    with pytest.raises(ConfigError, match="positive integer"):
        data_parallel_groups(0, 4)


@pytest.mark.parametrize("groups, message", [
    ([[0, 1], [1, 2]], "rank 1 is in group 0 and again in group 1"),
    ([[0, 0], [1, 2]], "rank 0 appears twice in group 0"),
    ([[0, 1], [2]], "groups must all have the same size"),
    ([[0, 1]], "rank 2 is in no group; every rank must be in exactly one"),
    ([[0], [1]], "rank 2 is in no group"),
    ([[0], [5], [2]], "rank 5 in group 1 is out of range: -r/--nworkers 3 gives ranks 0..2"),
    ([[0], [-1], [2]], "rank -1 in group 1 is out of range"),
    ([[0, 1], [2, 3]], "the groups name 4 ranks but -r/--nworkers is 3"),
    ([[0, "1"], [2]], "group 0 holds '1', which is not a rank number"),
    ([[0, True], [2]], "group 0 holds True"),
    ([], "non-empty list of non-empty lists"),
    ([[0, 1, 2], []], "non-empty list of non-empty lists"),
])
def test_bad_replica_groups(tmp_path, groups, message):
    path = tmp_path / "groups.json"
    path.write_text(json.dumps({"replica_groups": groups}))
    with pytest.raises(ConfigError) as e:
        resolve_groups(3, replica_groups=str(path))
    assert str(e.value).startswith(f"--custom-replica-group: {path}: ")
    assert message in str(e.value)


def test_group_file_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.json: no such file"):
        resolve_groups(2, replica_groups=str(tmp_path / "nope.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"replica_groups": [[0, 1],\n [2, 3}')
    with pytest.raises(ConfigError, match=r"not valid JSON: .* at line 2, column 7"):
        resolve_groups(4, replica_groups=str(bad))
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"groups": [[0, 1]]}')
    with pytest.raises(ConfigError, match=r"expected a 'replica_groups' key .* \['groups'\]"):
        resolve_groups(2, replica_groups=str(wrong))
    bare = tmp_path / "bare.json"
    bare.write_text("[[1, 0], [3, 2]]")
    assert resolve_groups(4, replica_groups=str(bare)) == [[1, 0], [3, 2]]


# -- alltoallv ------------------------------------------------------------------------

def _entry(sc, sd, rc, rd):
    return {"send_counts": sc, "send_displs": sd, "recv_counts": rc, "recv_displs": rd}


def test_alltoallv_one_entry_applies_to_every_rank(tmp_path):
    path = tmp_path / "m.json"
    e = _entry([3, 3, 3], [0, 3, 6], [3, 3, 3], [6, 0, 3])
    path.write_text(json.dumps({"alltoallv_metadata": [e]}))
    out = read_alltoallv(str(path), 3)
    assert out == [e, e, e]


def test_alltoallv_per_rank_entries_and_groups():
    # 2 ranks: rank 0 sends 1 to itself and 2 to rank 1; rank 1 sends 2 to 0 and 5 to itself
    e0 = _entry([1, 2], [0, 1], [1, 2], [0, 1])
    e1 = _entry([2, 5], [5, 0], [2, 5], [0, 2])
    assert read_alltoallv({"alltoallv_metadata": [e0, e1]}, 2) == [e0, e1]
    # the same per-group-rank entries on two groups of 2 give one entry per world rank
    out = read_alltoallv([e0, e1], 4, groups=[[0, 2], [3, 1]])
    assert out == [e0, e1, e1, e0]
    # one entry per world rank
    assert read_alltoallv([e0, e1, e0, e1], 4, groups=[[0, 1], [2, 3]]) == [e0, e1, e0, e1]


@pytest.mark.parametrize("entries, message", [
    ([_entry([1, 1, 1], [0, 1, 2], [1, 1], [0, 1])],
     "entry 0: send_counts has 3 values but the replica group has 2 ranks"),
    ([_entry([1, 1], [0, -1], [1, 1], [0, 1])], "entry 0: send_displs[1] is negative (-1)"),
    ([_entry([1, -1], [0, 1], [1, 1], [0, 1])], "entry 0: send_counts[1] is negative (-1)"),
    ([_entry([2, 2], [0, 1], [2, 2], [0, 2])],
     "entry 0: send ranges overlap: peer 0 has elements [0, 2) and peer 1 has [1, 3)"),
    ([_entry([2, 2], [0, 2], [2, 2], [1, 0])],
     "entry 0: recv ranges overlap: peer 1 has elements [0, 2) and peer 0 has [1, 3)"),
    # nccom-test's guide example: with one entry for every rank, counts must be uniform
    ([_entry([512, 1024], [0, 512], [256, 768], [0, 256])],
     "rank 0 sends 512 elements to rank 0 (its send_counts[0]) but rank 0 expects 256 from it "
     "(its recv_counts[0]); MPI_Alltoallv needs them equal"),
    ([_entry([1, 2], [0, 1], [1, 2], [0, 1]), _entry([1, 5], [5, 0], [2, 5], [0, 2])],
     "rank 1 sends 1 elements to rank 0 (its send_counts[0]) but rank 0 expects 2 from it"),
    ([_entry([1, 1], [0, 1], [1, 1], [0, 1])] * 3,
     "3 entries: give 1 (for every rank) or one per rank of the replica group (2)"),
    ([{"send_counts": [1, 1], "send_displs": [0, 1], "recv_counts": [1, 1]}],
     "entry 0: missing recv_displs"),
    ([{**_entry([1, 1], [0, 1], [1, 1], [0, 1]), "send_count": [1]}],
     "entry 0: unknown key 'send_count'"),
    ([_entry([1, 1.5], [0, 1], [1, 1], [0, 1])], "entry 0: send_counts must be a list of integers"),
    ({"something": []}, "expected {\"alltoallv_metadata\""),
])
def test_bad_alltoallv_metadata(tmp_path, entries, message):
    path = tmp_path / "meta.json"
    data = {"alltoallv_metadata": entries} if isinstance(entries, list) else entries
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as e:
        read_alltoallv(str(path), 2)
    assert str(e.value).startswith(f"--alltoallv-metadata: {path}: ")
    assert message in str(e.value)


def test_zero_counts_never_overlap():
    e = _entry([0, 4], [0, 0], [0, 4], [0, 0])
    e_other = _entry([4, 0], [0, 0], [4, 0], [0, 0])
    assert read_alltoallv([e_other, e], 2) == [e_other, e]


# -- permute pairs --------------------------------------------------------------------

def test_pairs_in_nccom_test_format(tmp_path):
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps({"src_target_pairs": [[[0, 1], [1, 0], [2, 3], [3, 2],
                                                      [4, 4], [5, 5], [6, 6], [7, 7]]]}))
    pairs = read_pairs(str(path), 8)
    assert pairs[:4] == [[0, 1], [1, 0], [2, 3], [3, 2]]
    assert peers(pairs, 2) == (3, 3) and peers(pairs, 5) == (5, 5)
    # a flat list and a rotation on 3 ranks
    ring = read_pairs({"src_target_pairs": [[2, 0], [0, 1], [1, 2]]}, 3)
    assert ring == [[0, 1], [1, 2], [2, 0]]
    assert peers(ring, 0) == (1, 2)


@pytest.mark.parametrize("pairs, message", [
    ([[0, 1], [1, 1], [2, 0]], "not a permutation: rank 1 receives twice, in [0, 1] and [1, 1]"),
    ([[0, 1], [0, 2], [2, 0]], "not a permutation: rank 0 sends twice"),
    ([[0, 1], [1, 0]], "not a permutation: rank 2 sends nothing"),
    ([[0, 1], [1, 2], [2, 3]], "rank 3 in pair [2, 3] is out of range: the group has 3 ranks"),
    ([[0, 1, 2]], "[0, 1, 2] is not a [src, target] pair"),
    ([[[0, 1], [1, 2], [2, 0]], [[0, 2], [1, 0], [2, 1]]], "2 different lists of pairs"),
])
def test_bad_pairs(tmp_path, pairs, message):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"src_target_pairs": pairs}))
    with pytest.raises(ConfigError) as e:
        read_pairs(str(path), 3)
    assert str(e.value).startswith(f"--custom-src-target-pairs: {path}: ")
    assert message in str(e.value)


def test_inputs_belong_to_their_collective():
    with pytest.raises(ConfigError, match=r"^--alltoallv-metadata: applies to alltoallv only, "
                                          r"not all_reduce"):
        parse_inputs("all_reduce", 2, alltoallv_metadata={"alltoallv_metadata": []})
    with pytest.raises(ConfigError, match=r"^--custom-src-target-pairs: applies to permute only"):
        parse_inputs("all_gather", 2, src_target_pairs=[[0, 1], [1, 0]])


def test_pairs_are_checked_against_the_group_size():
    out = parse_inputs("permute", 4, split="MOD 2", src_target_pairs=[[0, 1], [1, 0]])
    assert out["groups"] == [[0, 2], [1, 3]] and out["pairs"] == [[0, 1], [1, 0]]
    with pytest.raises(ConfigError, match="rank 2 in pair"):
        parse_inputs("permute", 4, split="MOD 2", src_target_pairs=[[0, 2], [2, 0], [1, 1]])


# -- coalesced ratio ------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("[1,2,1]", [1, 2, 1]), (["1", "2", "1"], [1, 2, 1]), (["[1,", "2,", "1]"], [1, 2, 1]),
    ("1 3", [1, 3]), ([0.5, 1.5], [0.5, 1.5]), (None, []),
])
def test_parse_ratio(value, expected):
    assert parse_ratio(value) == expected


@pytest.mark.parametrize("value", ["[1,0,1]", "[1,-2]", "[a]", "[]", "inf"])
def test_bad_ratio(value):
    with pytest.raises(ConfigError, match=r"^--coalesced-cc-size-ratio: "):
        parse_ratio(value)


def test_split_layout_follows_nccom_example_and_rounds_like_the_collective():
    ar = collectives.get("all_reduce")
    parts = split_layout(ar, 4 << 20, 4, 8, [1, 2, 1])
    assert [p.size for p in parts] == [1 << 20, 2 << 20, 1 << 20]
    # 1000 B of fp32 split in three: boundaries 333, 666, 1000 -> 83, 83, 83 elements
    parts = split_layout(ar, 1000, 4, 3, [1, 1, 1])
    assert [p.count for p in parts] == [83, 83, 83]
    total = combined(parts)
    assert total.size == 996 and total.count == 249 and total.send_elems == 249
    ag = collectives.get("all_gather")
    # all_gather sizes are whole outputs: each part rounds to 3 ranks x fp32
    parts = split_layout(ag, 1200, 4, 3, [1, 3])
    assert [p.size for p in parts] == [300, 900] and [p.count for p in parts] == [25, 75]
    with pytest.raises(ConfigError, match=r"^--coalesced-cc-size-ratio: part 0 of 16 B split "
                                          r"\[1, 7\] is 2 B, too small for all_reduce"):
        split_layout(ar, 16, 4, 2, [1, 7])
