"""Parameters are data, never code; results files are written atomically."""
import html
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import run_cli
from ccbench_kit.dataset import io, make_dataset


def tiny_dataset():
    lat = np.full((1, 1, 2, 2, 3), 10.0)
    return make_dataset(algorithms=["ring"], placements=["out_of_place"], sizes=[64, 128],
                        counts=[16, 32], in_bytes=[64, 128], out_bytes=[64, 128], latency=lat,
                        wrong=np.zeros((1, 1, 2), int), ranks=[0, 1], hosts=["a", "a"],
                        devices=["cpu", "cpu"],
                        attrs={"collective": "all_reduce", "nranks": 2, "dtype": "fp32"})


def test_report_title_cannot_run_code(tmp_path):
    results = tmp_path / "r.nc"
    io.save(tiny_dataset(), results)
    marker = tmp_path / "pwned"
    title = f"x\"); open(r'{marker}', 'w'); ('\n__import__('os').system('touch {marker}')"
    proc = run_cli("report", results, "-o", tmp_path / "r.html", "--title", title, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    page = (tmp_path / "r.html").read_text()
    assert html.escape("open(r'", quote=False) in page or "open(r&#x27;" in page


def test_save_never_leaves_a_half_written_file(tmp_path, monkeypatch):
    path = tmp_path / "r.nc"
    io.save(tiny_dataset(), path)
    before = path.read_bytes()
    broken = tiny_dataset()
    broken.attrs["bad"] = object()  # netCDF can't store it: the write fails midway
    with pytest.raises(Exception):
        io.save(broken, path)
    assert path.read_bytes() == before
    assert [f for f in os.listdir(tmp_path) if f != "r.nc"] == []


def test_atomic_write_text_replaces_whole_files(tmp_path):
    from ccbench_kit._files import atomic_write_text
    path = tmp_path / "sub" / "x.json"
    atomic_write_text(path, "one\n")
    atomic_write_text(path, "two\n")
    assert path.read_text() == "two\n"
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.json"]


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


# -- suite specs: every value that reaches a batch script --------------------

HOSTILE = ["x\ntouch {m}", "x; touch {m}", "$(touch {m})", "`touch {m}`", "x\r\nid",
           "'\"; touch {m}; \"'"]


def _suite_yaml(tmp_path, slurm=None, env=None, top=None):
    import yaml
    spec = {"name": "s", "launcher": "slurm",
            "run": {"minbytes": 8, "maxbytes": 8, "iters": 1},
            "matrix": {"collectives": ["all_reduce"], "nranks": [3],
                       "env": {"e": env or {"A": "1"}}},
            "slurm": slurm or {}, **(top or {})}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _dry_run(spec):
    """`ccbench suite SPEC --dry-run` in process: (exit code, error line)."""
    from ccbench_kit.errors import ConfigError
    from ccbench_kit.suite import load_suite, run_suite
    try:
        result = run_suite(load_suite(spec), dry_run=True)
    except ConfigError as e:
        return 2, str(e)
    return (3, result.failed) if result.failed else (0, "")


def _script_lines_are_data(script, marker):
    """A written batch script: directives on lines of their own, then
    commands with no shell operator outside quotes (values are single
    quoted words); bash parses it.  Returns the words after the directives."""
    import shlex
    import subprocess
    text = script.read_bytes().decode()   # as bash reads it: a \r stays a \r
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    lines = text.split("\n")
    head = [ln for ln in lines if ln.startswith("#")]
    assert lines[:len(head)] == head and str(marker) not in "".join(head)
    lexer = shlex.shlex("\n".join(lines[len(head):]), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    assert not [w for w in words if w and set(w) <= set("();<>|&")], words
    assert words[:2] == ["set", "-euo"] and "srun" in words
    return words


@pytest.mark.parametrize("field", ["partition", "time_limit", "account", "mpi", "srun_args"])
@pytest.mark.parametrize("value", HOSTILE[:4])
def test_suite_slurm_values_never_become_script_lines(tmp_path, field, value):
    marker = tmp_path / "pwned"
    spec = _suite_yaml(tmp_path, slurm={field: value.format(m=marker)})
    rc, err = _dry_run(spec)
    scripts = list((tmp_path / "results" / "s.suite" / "jobs").glob("*.sbatch"))
    if field == "srun_args":
        # a string of srun options is split as a shell would, then quoted back
        assert rc == 0, err
        _script_lines_are_data(scripts[0], marker)
        import shlex
        srun = [ln for ln in scripts[0].read_text().splitlines() if ln.startswith("srun")][0]
        # then the rank's 5 words: python -m ccbench_kit.launch.worker CONFIG --table
        assert shlex.split(value.format(m=marker)) == \
            shlex.split(srun)[len(shlex.split(srun)) - 5 - len(shlex.split(value.format(m=marker))):
                              len(shlex.split(srun)) - 5]
    else:
        assert rc == 2 and f"slurm.{field}" in err and "\n" not in err.split(": ", 1)[0], err
    assert not marker.exists()


def test_suite_srun_args_string_is_not_split_into_characters():
    from ccbench_kit.launch import slurm
    text = slurm.sbatch_script(["prog"], {"srun_args": "--exclusive --mem=0"}, 3, 1)
    assert text.splitlines()[-1].endswith("--kill-on-bad-exit=1 --exclusive --mem=0 prog")
    cmd = slurm.srun_command(3, ["prog"], {"srun_args": "--exclusive", "job_id": "7"})
    assert cmd[-2:] == ["--exclusive", "prog"]


@pytest.mark.parametrize("value", HOSTILE)
def test_suite_env_values_and_paths_stay_data(tmp_path, value):
    marker = tmp_path / "pwned"
    spec = _suite_yaml(tmp_path, env={"A": value.format(m=marker)})
    assert _dry_run(spec) == (0, "")
    script = next((tmp_path / "results" / "s.suite" / "jobs").glob("*.sbatch"))
    words = _script_lines_are_data(script, marker)
    exported = [words[i + 1] for i, w in enumerate(words) if w == "export"]
    assert "A=" + value.format(m=marker) in exported
    if "\n" in value or "\r" in value:
        for key in ("workdir", "out", "hosts_file", "report"):
            bad = _suite_yaml(tmp_path, top={key: value.format(m=marker)})
            rc, err = _dry_run(bad)
            assert rc == 2 and f"{key}:" in err, err


def test_suite_cli_refuses_a_hostile_slurm_value_in_one_line(tmp_path):
    marker = tmp_path / "pwned"
    spec = _suite_yaml(tmp_path, slurm={"partition": f"gpu\ntouch {marker}"})
    proc = run_cli("suite", spec, "--dry-run", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"ccbench: error: {spec}: --slurm-partition / slurm.partition: "
                                  "'gpu\\ntouch "), proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and not marker.exists()
    assert not (tmp_path / "results").exists()
    assert not marker.exists()


# -- reports: every value a results file holds is shown as text ---------------

EVIL = "ccbPWN"
EVIL_VALUES = [f"<script>alert('{EVIL}')</script>", f"<img src=x onerror=alert('{EVIL}')>",
               f"[{EVIL}](javascript:alert(1))", f"![{EVIL}](http://example.invalid/x.png)",
               f"x\n\n<b onmouseover=alert('{EVIL}')>y</b>", f"</code></pre><script>{EVIL}</script>"]


class _Tags:
    """Every element and attribute of an HTML page (the parser a browser
    would use, from the standard library)."""

    def __init__(self, text):
        from html.parser import HTMLParser
        self.found, self.scripts = [], []
        outer = self

        class P(HTMLParser):
            def handle_starttag(self, tag, attrs):
                outer.found.append((tag, dict(attrs)))

            def handle_data(self, data):
                if self.lasttag == "script":
                    outer.scripts.append(data)
        P().feed(text)

    def live(self, marker):
        """Elements, attributes or scripts the marker made."""
        bad = [s for s in self.scripts if marker in s]
        for tag, attrs in self.found:
            for k, v in attrs.items():
                v = v or ""
                if k == "href" and v.startswith("#"):
                    continue    # a link to a heading of the page itself
                if k.startswith("on") or (k in ("href", "src", "action", "formaction", "style")
                                          and (marker in v or "javascript:" in v)) \
                        or (tag == "img" and k == "src" and not v.startswith("data:")):
                    bad.append((tag, k, v))
        return bad


def hostile_dataset():
    lat = np.full((2, 1, 2, 2, 3), 10.0)
    lat[1] *= 2
    return make_dataset(algorithms=[EVIL_VALUES[0], EVIL_VALUES[2]], placements=["out_of_place"],
                        sizes=[64, 128], counts=[16, 32], in_bytes=[64, 128],
                        out_bytes=[64, 128], latency=lat, wrong=np.zeros((2, 1, 2), int),
                        ranks=[0, 1], hosts=[EVIL_VALUES[1], EVIL_VALUES[4]],
                        devices=["cpu", "cpu"],
                        attrs={"collective": "all_reduce", "nranks": 2, "dtype": EVIL_VALUES[3],
                               "backend": EVIL_VALUES[5], "timing": EVIL_VALUES[1],
                               "created": EVIL_VALUES[0], "op": EVIL_VALUES[2],
                               "check": EVIL_VALUES[4], "command": EVIL_VALUES[0]})


def test_report_shows_hostile_attrs_coords_and_title_as_text(tmp_path):
    results = tmp_path / "r.nc"
    io.save(hostile_dataset(), results)
    out = tmp_path / "r.html"
    proc = run_cli("report", results, "-o", out, "--title", EVIL_VALUES[0] + EVIL_VALUES[2],
                   "--baseline", results, timeout=300)
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert _Tags(page).live(EVIL) == []
    # shown, as text
    assert html.escape(f"alert('{EVIL}')", quote=False) in page.replace("&#x27;", "'")


def test_markup_boundary_keeps_the_kits_markdown():
    from ccbench_kit import markup
    text = markup.markdown("> a note\n- **bold** `code` <b>x</b> [l](javascript:y)")
    assert text == "> a note\n- **bold** `code` &lt;b&gt;x&lt;/b&gt; &#91;l&#93;(javascript:y)"


# -- derived paths stay inside the named folder --------------------------------

@pytest.mark.parametrize("attr,value", [("collective", "../../evil"),
                                        ("collective", "/tmp/evil"),
                                        ("env", '{"NCCL_TESTS_SPLIT": "../../../evil"}')])
def test_export_aws_naming_never_writes_outside_its_folder(tmp_path, attr, value):
    from ccbench_kit.errors import ConfigError
    from ccbench_kit.formats.csv.write import write_aws
    ds = tiny_dataset()
    ds.attrs[attr] = value
    target = tmp_path / "a" / "b"
    target.mkdir(parents=True)
    before = sorted(p for p in tmp_path.rglob("*"))
    with pytest.raises(ConfigError, match=r"^--aws-naming: .* is not a plain file name"):
        write_aws({"x": ds}, target)
    assert sorted(p for p in tmp_path.rglob("*")) == before


def test_export_aws_naming_refuses_a_link_and_a_bad_pattern(tmp_path):
    results = tmp_path / "r.nc"
    ds = tiny_dataset()
    ds.attrs["created"] = "2026-01-02T03:04:05"
    io.save(ds, results)
    folder = tmp_path / "csv"
    folder.mkdir()
    elsewhere = tmp_path / "elsewhere.csv"
    (folder / "nccl_1_ami_allreduce_0x0_20260102_030405_results.csv").symlink_to(elsewhere)
    proc = run_cli("export", results, "--aws-naming", folder)
    assert proc.returncode == 2 and "is a symbolic link" in proc.stderr, proc.stderr
    assert not elsewhere.exists()
    proc = run_cli("export", results, "--aws-naming", folder, "--pattern", "../x")
    assert proc.returncode == 2 and proc.stderr.startswith("ccbench: error: --pattern: '../x'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["csv", "r.nc"]


# -- scale of input: host names ----------------------------------------------------

# In a network and mount namespace of the test's own, a DNS server on its
# loopback that takes every query and never answers: each look-up of a name
# not in /etc/hosts hangs (the resolver waits 5 x 30 s).
_SILENT_DNS = r"""
import json, socket, subprocess, sys, threading
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run(["mount", "--bind", sys.argv[1], "/etc/resolv.conf"], check=True)
server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
server.bind(("127.0.0.1", 53))
asked, lock = set(), threading.Lock()

def serve():
    while True:
        packet = server.recv(512)
        labels, at = [], 12          # the question's name follows the 12-byte header
        while packet[at]:
            labels.append(packet[at + 1:at + 1 + packet[at]].decode())
            at += 1 + packet[at]
        with lock:
            asked.add(".".join(labels))

threading.Thread(target=serve, daemon=True).start()
from ccbench_kit.errors import ConfigError
from ccbench_kit.launch import hosts
names = json.loads(sys.argv[2])
bad = hosts.unresolvable(names, timeout=3)
try:
    hosts.check_resolvable(["localhost", "x.invalid"], timeout=1)
    refused = ""
except ConfigError as e:
    refused = str(e)
# the queries already sent may still be on their way to the server thread
wait = threading.Event()
while not wait.wait(0.05):
    with lock:
        if len(asked) >= hosts._RESOLVERS + 1:
            break
with lock:
    print(json.dumps({"bad": bad, "asked": sorted(asked), "refused": refused}))
"""


def test_host_names_resolve_concurrently_within_a_bound(tmp_path):
    """200 names whose look-ups never end: `unresolvable` returns at its
    deadline with every one of them, having asked for as many names at once
    as it has resolver threads (a one-by-one resolver would have asked for
    one); and a name that hangs is refused in one line naming --hosts."""
    import json
    from ccbench_kit.launch.hosts import _RESOLVERS
    if subprocess.run(["unshare", "--net", "--mount", "true"], capture_output=True).returncode:
        pytest.skip("the kernel refuses a network and mount namespace (unshare --net --mount)")
    conf = tmp_path / "resolv.conf"
    conf.write_text("nameserver 127.0.0.1\noptions timeout:30 attempts:5\n")
    names = ["localhost", "127.0.0.1"] + [f"n{k}.invalid" for k in range(200)]
    proc = subprocess.run(["unshare", "--net", "--mount", "--propagation", "private",
                           sys.executable, "-c", _SILENT_DNS, conf, json.dumps(names)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["bad"] == names[2:]  # in order; the ones never asked for too
    # each resolver thread is stuck on one of the first names, x.invalid on one more
    assert got["asked"] == sorted([f"n{k}.invalid" for k in range(_RESOLVERS)] + ["x.invalid"])
    assert got["refused"] == ("--hosts: 1 of 2 host names do not resolve to an address "
                              "(or not within 1 s): x.invalid")


def test_a_scheduler_that_accepts_and_never_answers_is_one_line(tmp_path):
    import json
    import socket
    import time
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(5)
    sched = tmp_path / "scheduler.json"
    sched.write_text(json.dumps({"address": f"tcp://127.0.0.1:{silent.getsockname()[1]}"}))
    t0 = time.monotonic()
    proc = run_cli("doctor", "--scheduler-file", sched, timeout=60)
    silent.close()
    assert time.monotonic() - t0 < 30
    assert proc.returncode == 2 and proc.stderr.startswith(
        "ccbench: error: --scheduler-file: no scheduler answers at tcp://127.0.0.1:"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1
