"""dataset.checkpoint on its own: sidecars folded into the file or into the
template, duplicates dropped, nothing left behind (the launcher's use of it
after a killed or hung rank is tested in test_reliability.py)."""
import numpy as np

from ccbench_kit import collectives
from ccbench_kit.dataset import load, make_dataset
from ccbench_kit.dataset.checkpoint import Checkpoint, merge_pending, pending_files

COLL = collectives.get("all_reduce")
A, P, R, I = 2, 2, 3, 4  # algorithms, placements, ranks, iterations


def block(size, seed):
    rng = np.random.default_rng(seed)
    lay = COLL.layout(size, 4, R)
    return lay, rng.uniform(1, 9, (A, P, R, I)), rng.uniform(0, 1e3, (A, P, R, I)), \
        rng.integers(0, 2, (A, P))


def dataset(blocks):
    lays = [b[0] for b in blocks]
    return make_dataset(
        algorithms=["ring", "mpi"], placements=["out_of_place", "in_place"],
        sizes=[l.size for l in lays], counts=[l.count for l in lays],
        in_bytes=[l.in_bytes(4) for l in lays], out_bytes=[l.out_bytes(4) for l in lays],
        latency=np.stack([b[1] for b in blocks], axis=2), start=np.stack([b[2] for b in blocks], axis=2),
        wrong=np.stack([b[3] for b in blocks], axis=2), ranks=range(R), hosts=["h"] * R,
        devices=["cpu"] * R, attrs={"collective": "all_reduce", "dtype": "fp32", "nranks": R,
                                    "complete": False})


def test_sidecars_fold_into_the_last_full_write(tmp_path):
    out = tmp_path / "r.nc"
    ck = Checkpoint(out)
    first = block(96, 1)
    ck.full(dataset([first]))
    later = [block(960, 2), block(9600, 3)]
    for k, (lay, lat, start, wrong) in enumerate(later, start=1):
        ck.pending(k, lay, lat, start, wrong, 4)
    ck.pending(3, *first, 4)  # a size the file already holds is not added twice
    assert len(pending_files(out)) == 3
    assert merge_pending(out) == 2
    ds = load(out)
    want = dataset([first, *later])
    assert ds["size"].values.tolist() == [96, 960, 9600]
    assert ds["count"].values.tolist() == want["count"].values.tolist()
    np.testing.assert_array_equal(ds["latency"].values, want["latency"].values)
    np.testing.assert_array_equal(ds["start"].values, want["start"].values)
    np.testing.assert_array_equal(ds["wrong"].values, want["wrong"].values)
    assert pending_files(out) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["r.nc"]


def test_sidecars_fold_into_the_template_when_the_file_was_never_written(tmp_path):
    out = tmp_path / "t.nc"
    ck = Checkpoint(out)
    nan = np.full((A, P, R, I), np.nan)
    ck.template(dataset([(COLL.layout(96, 4, R), nan, nan, np.full((A, P), -1))]))
    blocks = [block(96, 4), block(960, 5)]
    for k, b in enumerate(blocks):
        ck.pending(k, *b, 4)
    assert not out.exists() and merge_pending(out) == 2
    ds = load(out)
    assert ds["size"].values.tolist() == [96, 960]
    np.testing.assert_array_equal(ds["latency"].values, dataset(blocks)["latency"].values)
    assert ds.attrs["collective"] == "all_reduce"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.nc"]


def test_a_full_write_clears_the_sidecars_and_the_template(tmp_path):
    out = tmp_path / "c.nc"
    ck = Checkpoint(out)
    b = block(96, 6)
    ck.template(dataset([b]))
    ck.pending(0, *b, 4)
    ck.full(dataset([b]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.nc"]
    assert merge_pending(out) == 0  # nothing to do, nothing changes
    assert load(out)["size"].values.tolist() == [96]
