"""The doctor's per-node table on two nodes (issue 28): the loss column has
no other pair to compare a node's with, and says so with '-', never
``nanx``; three nodes and more keep their number."""
from ccbench_kit.health import report, verdict
from ccbench_kit.health.api import Diagnosis
from test_doctor_verdict import fake_raw


def _table(n):
    raw = fake_raw(n=n)
    v = verdict.judge(raw)
    diag = Diagnosis(v, 0, "", "", "ccbench doctor", list(raw.nodes))
    return v, report.text(diag)


def test_two_nodes_loss_is_a_dash_not_nan():
    v, table = _table(2)
    assert "nan" not in table.lower()
    assert v.scores["loss"] == {"node1": None, "node2": None}   # no ratio, as bandwidth's
    rows = {ln.split()[0]: ln.split()[1:] for ln in table.splitlines()
            if ln.startswith("node") and not ln.startswith("node ")}
    header = next(ln.split()[1:] for ln in table.splitlines() if ln.startswith("node "))
    assert "loss" in header and set(rows) == {"node1", "node2"}
    assert {r[header.index("loss")] for r in rows.values()} == {"-"}


def test_three_nodes_keep_their_loss_ratio():
    v, table = _table(3)
    assert sorted(v.scores["loss"]) == ["node1", "node2", "node3"]
    assert "nan" not in table.lower() and "0.00x" in table   # no retransmission anywhere


def test_a_nan_score_from_an_older_file_prints_a_dash():
    raw = fake_raw(n=2)
    v = verdict.judge(raw)
    v.scores["loss"] = {"node1": float("nan")}
    table = report.text(Diagnosis(v, 0, "", "", "c", list(raw.nodes)))
    assert "nan" not in table.lower()
