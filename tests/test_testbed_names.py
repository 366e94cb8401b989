"""`python -m testbed down --name N` removes instance N only (issue 28): real
network namespaces, named as two instances would name them."""
import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"),
                                reason="needs root and iproute2")


def _netns():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def _testbed(*args, base):
    return subprocess.run([sys.executable, "-m", "testbed", *args, "--base", str(base)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_down_removes_its_own_namespaces_not_a_longer_named_instance(tmp_path):
    name = f"hd{uuid.uuid4().hex[:6]}"
    mine = [f"ccbtb-{name}-head", f"ccbtb-{name}-node3", f"ccbtb-{name}-fab"]
    other = [f"ccbtb-{name}-x-head", f"ccbtb-{name}-x-node1"]
    for ns in mine + other:
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        proc = _testbed("down", "--name", name, base=tmp_path)
        assert proc.returncode == 0, proc.stderr
        names = _netns().split()
        assert not [ns for ns in mine if ns in names]
        assert [ns for ns in other if ns in names] == other
    finally:
        for ns in mine + other:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_a_corrupt_state_file_is_one_line(tmp_path):
    state = tmp_path / "ccbtb-corrupt" / "state.json"
    state.parent.mkdir()
    for text in ("{not json", json.dumps({"faults": {}}), json.dumps({"config": {"bogus": 1}})):
        state.write_text(text)
        proc = _testbed("status", "--name", "corrupt", base=tmp_path)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
        assert "state.json" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
