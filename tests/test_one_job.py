"""One job a launch: every part of ``ccbench run`` (collectives, ``-d``,
``-o``, ``--cycles``) in one mpirun, one rank entry, one session.

The job description's codec is checked in-process; the rest with real
ranks: one launch, counted from ``--debug``'s launch lines; one session,
seen in what it measures once (the clock offsets and the host facts are
the same numbers in every part); and a job that fails in its second part
keeps the first part whole and the second's sizes done, in ``--out``."""
import json
import os
import uuid

import pytest
import xarray as xr

from ccbench_kit.api import make_config
from ccbench_kit.dataset.io import open_parts
from ccbench_kit.errors import RunError
from ccbench_kit.launch.job import SCHEMA, Job, round_path

from conftest import run_cli


def test_a_sweep_job_round_trips_through_its_word_and_file(tmp_path):
    a = make_config("all_reduce", 3, [64, 100], check="random", seed=7)
    b = make_config("all_gather", 3, [64, 100], seed=7)
    job = Job.sweep({"all_reduce": a, "all_gather": b},
                    rounds={"target": 0.05, "cap": 40, "iters": 20})
    word = job.word()
    assert word.startswith("json64:") and " " not in word
    back = Job.read(word)
    assert back == job and back.configs[0].digest() == a.digest()
    path = tmp_path / "job.json"
    path.write_text(job.to_json())
    assert Job.read(str(path)) == job
    body = json.loads(job.to_json())
    assert body["schema"] == SCHEMA and body["task"] == "sweep"
    assert [p["name"] for p in body["parts"]] == ["all_reduce", "all_gather"]


def test_a_bare_config_reads_as_a_sweep_of_one_part(tmp_path):
    # what a Slurm batch script written before jobs existed hands its ranks
    cfg = make_config("broadcast", 2, [8])
    path = tmp_path / "config.json"
    path.write_text(cfg.to_json())
    job = Job.read(str(path))
    assert job.task == "sweep" and [p.name for p in job.parts] == ["broadcast"]
    assert job.configs == [cfg] and job.rounds is None


def test_a_doctor_job_and_an_unknown_schema():
    plan = {"hosts": ["a", "b"], "repeats": 2, "out": "/x/raw.json"}
    job = Job.read(Job.doctor(plan).word())
    assert (job.task, job.plan, job.parts) == ("doctor", plan, ())
    assert job.runner().__name__ == "rank_task"
    with pytest.raises(RunError, match=r"^this rank reads job descriptions ccbench-job/1, not "
                                       r"'ccbench-job/9' \(a different ccbench_kit version"):
        Job.from_json(json.dumps({"schema": "ccbench-job/9", "task": "sweep", "parts": []}))
    assert round_path("/r/x.nc.all_reduce", 2) == "/r/x.nc.all_reduce.round2.part"


def test_every_part_and_cycle_runs_in_one_launch_on_one_session(tmp_path):
    out = tmp_path / "r.nc"
    proc = run_cli("run", "all_reduce,broadcast", "-r", 3, "--sizes", "64,1K", "-n", 2, "-w", 1,
                   "-d", "fp32,bf16", "--cycles", 2, "-c", "--placement", "out_of_place",
                   "--debug", "--out", out, timeout=400, check=True)
    assert proc.stderr.count("# debug: launch:") == 1  # 4 parts x 2 cycles, one mpirun
    parts = open_parts(out)
    names = ["all_reduce.fp32", "all_reduce.bf16", "broadcast.fp32", "broadcast.bf16"]
    assert list(parts) == names
    offsets = {json.dumps(ds.attrs["clock_offsets_us"]) for ds in parts.values()}
    loads = {ds.attrs.get("load_average") for ds in parts.values()}
    # measured once a job, so the same numbers in every part
    assert len(offsets) == 1 and len(loads) == 1
    for ds in parts.values():
        assert ds.attrs["cycles"] == 2 and ds["cycle"].values.tolist() == [0, 0, 1, 1]
        assert int(ds["wrong"].sum()) == 0 and ds.attrs["complete"] == "true"
    assert proc.stdout.count("# cycle 1 of 2") == 1 and proc.stdout.count("# cycle 2 of 2") == 1
    assert not list(tmp_path.glob("*.part"))


def test_a_job_that_fails_in_its_second_part_keeps_the_first_and_the_sizes_done(tmp_path):
    # on 3 ranks fp32, all_gather rounds 64 and 100 B down to 60 and 96 B
    # (multiples of 3 elements) while all_reduce keeps them: the hang at
    # 96 B hits the second part's second size only
    tag = uuid.uuid4().hex
    env = {**os.environ, "CCB_TEST_TAG": tag, "CCB_FAULT_INJECT": "hang:1:96"}
    out = tmp_path / "f.nc"
    proc = run_cli("run", "all_reduce,all_gather", "-r", 3, "--sizes", "64,100", "-n", 2,
                   "-w", 1, "--placement", "out_of_place", "--timeout", 4, "--non-interactive",
                   "--out", out, env=env, timeout=200)
    assert proc.returncode == 3, proc.stderr
    assert "did not arrive at all_gather/mpi (out-of-place) at size 96 B" in proc.stderr
    assert f"Results for the 1 size done before are in {out}" in proc.stderr
    assert "Traceback" not in proc.stderr and not list(tmp_path.glob("*.part"))
    parts = open_parts(out)
    assert list(parts) == ["all_reduce", "all_gather"]
    whole, cut = parts["all_reduce"], parts["all_gather"]
    assert whole.attrs["complete"] == "true" and whole["size"].values.tolist() == [64, 100]
    assert cut.attrs["complete"] == "false" and cut["size"].values.tolist() == [60]
    assert "timeout: rank 1" in cut.attrs["incomplete_reason"]
    with xr.open_dataset(out) as root:  # the first part is the file's root group
        assert root.attrs["collective"] == "all_reduce"


def test_the_ranks_run_without_dask(tmp_path):
    """xarray probes for dask wherever it is installed (building a Dataset
    imports dask.array, writing netCDF imports distributed: ~1.6 s of CPU on
    rank 0 while the others wait); the rank entry makes it absent.  Seen in
    each rank's own import log (``-X importtime`` through --mpi-log-dir),
    for a run whose rank 0 writes its template, sidecars and file."""
    pytest.importorskip("dask")
    logs = tmp_path / "logs"
    out = tmp_path / "r.nc"
    r = run_cli("run", "all_reduce", "-r", 2, "-b", 8, "-e", 64, "-f", 2, "-n", 2, "-w", 0,
                "--non-interactive", "--mpi-log-dir", logs, "--out", out,
                env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert r.returncode == 0, r.stderr
    assert list(open_parts(out)["all_reduce"]["size"].values) == [8, 16, 32, 64]
    rank_logs = sorted(logs.glob("*/rank.*/stderr"))
    assert len(rank_logs) == 2
    for log in rank_logs:
        imported = [line.rsplit("|", 1)[1].strip() for line in log.read_text().splitlines()
                    if line.startswith("import time:") and "|" in line]
        assert "xarray" in imported or log.parent.name != "rank.0", imported[:5]
        # (a refused import of dask itself is logged too, as plain "dask")
        assert not [m for m in imported if m.startswith(("dask.", "distributed."))], log
