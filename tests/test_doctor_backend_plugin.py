"""A new doctor transport is a Backend, with no doctor code.

`tests/example_backends/loopback.py` (the worked example of a backend,
which knows nothing of the doctor) is declared as an installed package
declares it: an entry point in the ``ccbench_kit.backends`` group, in a
``.dist-info`` folder on the path.  ``doctor --backend loopback`` is then a
transport like mpi or nccl: the check's ranks find it by name, run every
node's local all_reduce, the pairs' sendrecv and the host's all_reduce
through it (each all_reduce summed right, or the check fails), and the
records say which transport carried them."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

TESTS = pathlib.Path(__file__).resolve().parent

CODE = textwrap.dedent("""
    import json, sys, tempfile
    from ccbench_kit.health import api, results
    from ccbench_kit.health.api import choose_backend, per_gpu_nodes
    from ccbench_kit.health.collective import ring_algorithm, transports
    from ccbench_kit.launch.job import RANK_MODULE, Job
    from ccbench_kit.launch.mpirun import run_ranks
    out = {"transports": list(transports()), "chosen": list(choose_backend("loopback")),
           "ring": ring_algorithm("loopback")}
    plan = api.make_plan(3, ranks_per_node=1, repeats=2, bw_bytes="4K", lat_iters=3,
                         bw_iters=2, backend="loopback")
    plan["hosts"], plan["per_gpu"] = per_gpu_nodes(3, host="vm"), True
    plan["out"] = sys.argv[1]
    with tempfile.TemporaryDirectory() as run_dir:
        failure, _, _, _ = run_ranks(RANK_MODULE, [Job.doctor(plan).word()], 3, run_dir,
                                     describe=str, call_timeout=60)
    raw = results.Raw.read(plan["out"])
    host = results.host_allreduce(raw)
    out.update(failure=failure, backend=raw.plan["backend"], nodes=raw.nodes,
               local=sorted((r["rep"], r["node"]) for r in raw.local),
               pairs=sorted((r["rep"], r["a"], r["b"]) for r in raw.pair),
               host_gpus=host["gpus"], host_bytes=host["bytes"],
               host_positive=all(b > 0 for b in host["busbw_gbps"]))
    print("@@" + json.dumps(out))
""")


def test_a_registered_backend_is_a_doctor_transport_with_no_doctor_code(tmp_path):
    site = tmp_path / "site"
    dist = site / "example_backends-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: example-backends\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(
        "[ccbench_kit.backends]\nloopback = example_backends.loopback:LoopbackBackend\n")
    path = [str(site), str(TESTS), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    proc = subprocess.run([sys.executable, "-c", CODE, str(tmp_path / "raw.json")], env=env,
                          capture_output=True, text=True, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("@@")), None)
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads(line[2:])
    assert res["transports"] == ["mpi", "nccl", "torch", "tcp", "loopback"]
    assert res["chosen"] == ["loopback", "asked for"] and res["ring"] == "numpy"
    assert res["failure"] is None and res["backend"] == "loopback"
    assert res["nodes"] == ["vm gpu0", "vm gpu1", "vm gpu2"]
    assert res["local"] == [[rep, k] for rep in (0, 1) for k in range(3)]
    assert res["pairs"] == [[rep, a, b] for rep in (0, 1) for a, b in ((0, 1), (0, 2), (1, 2))]
    # the host's all_reduce of the 3 ranks, summed right in each of the 2 repeats
    assert res["host_gpus"] == 3 and res["host_bytes"] == 4096 and res["host_positive"]


def test_an_unknown_transport_names_every_one_there_is():
    from ccbench_kit.errors import ConfigError
    from ccbench_kit.health.api import choose_backend
    try:
        choose_backend("gloo2")
    except ConfigError as e:
        assert str(e).startswith("--backend: unknown backend 'gloo2'; choose one of mpi, nccl, "
                                 "torch, tcp")
    else:
        raise AssertionError("gloo2 was accepted")
