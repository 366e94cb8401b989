"""The kit as users on a cluster get it: a wheel built from the checkout,
installed (not editable) into a fresh venv outside the checkout, renders a
report with its plots from the notebooks it ships as package data; and the
conda environment asks for what pyproject.toml asks for."""
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _name(requirement):
    """('numpy', '>=1.24') of 'numpy>=1.24' (name lower-cased, _ as -)."""
    m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*(.*?)\s*", requirement)
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def pyproject_requirements():
    """{name: spec} of what `pip install ".[all]"` asks for, and what the build needs."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = meta["project"]["optional-dependencies"]
    wanted, todo = list(meta["project"]["dependencies"]), ["all"]
    while todo:
        for req in extras[todo.pop()]:
            inner = re.fullmatch(r"ccbench_kit\[(.*)\]", req)
            if inner:
                todo += inner.group(1).split(",")
            else:
                wanted.append(req)
    wanted += meta["build-system"]["requires"]
    return dict(map(_name, wanted))


def environment_requirements():
    """{name: spec} of environment.yml's conda and pip dependencies."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    found = []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            found += [d for d in dep["pip"] if not d.startswith("-e")]
        else:
            found.append(dep)
    return dict(map(_name, found))


# conda's own (the interpreter, the MPI that pip cannot install, pip itself);
# pip's build tools, which conda's python brings
CONDA_ONLY = {"python", "openmpi", "pip"}
BUILD_TOOLS = {"setuptools", "wheel"}


def test_environment_yml_is_in_step_with_pyproject():
    py = {k: v for k, v in pyproject_requirements().items() if k not in BUILD_TOOLS}
    conda = {k: v for k, v in environment_requirements().items() if k not in CONDA_ONLY}
    assert sorted(set(py) - set(conda)) == [], "in pyproject.toml, not in environment.yml"
    assert sorted(set(conda) - set(py)) == [], "in environment.yml, not in pyproject.toml"
    assert {k: v for k, v in conda.items() if py[k] != v} == {}, "different versions"


def test_the_requirement_reader_expands_nested_extras():
    reqs = pyproject_requirements()
    assert reqs["papermill"] == ">=2.5"  # from [report], reached through [all]
    assert reqs["cython"] == ">=3.0"  # a build requirement
    assert "nvidia-nccl-cu12" not in reqs  # [nccl] is not part of [all]


def _run(cmd, cwd, env=None, timeout=600):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}:\n{proc.stdout[-3000:]}\n" \
                                 f"{proc.stderr[-3000:]}"
    return proc


# the wheel's requirements (and those of the extras named) not met where it
# is installed, one a line
_UNMET = """
import sys
from importlib.metadata import PackageNotFoundError, requires, version
from packaging.requirements import Requirement
for line in requires("ccbench_kit"):
    req = Requirement(line)
    if req.marker and not any(req.marker.evaluate({"extra": e}) for e in ["", *sys.argv[1:]]):
        continue
    try:
        got = version(req.name)
    except PackageNotFoundError:
        got = None
    if got is None or not req.specifier.contains(got, prereleases=True):
        print(line, "->", got)
"""


@pytest.mark.slow
def test_wheel_installed_in_a_fresh_venv_renders_a_report(tmp_path):
    # the files a clone has (tracked, or new and not ignored: no built
    # extension, no build/), so the wheel is built from source as pip does
    # for a user, and the checkout is left as it was
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\n")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # the build tools already here (no download); unoptimised (setup.py
    # takes CFLAGS' -O level): what is checked is that the wheel builds,
    # installs and runs, and -O3 with debug info is 30 s more of compiling
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", tmp_path / "dist", src], cwd=tmp_path, env={**env, "CFLAGS": "-O0 -g0"})
    wheel, = (tmp_path / "dist").glob("ccbench_kit-*.whl")
    # a venv of its own, the wheel installed from the file alone; its
    # dependencies are this environment's (set-up installed them from the
    # registry with the same metadata): its site-packages as a plain path
    # entry, so that the checkout's editable finder there is never run and
    # ccbench_kit can only come from the wheel.  No network: the suite asks
    # no server anything (tests/without-dns).
    # (without a pip of its own: this environment's pip installs into it)
    venv.EnvBuilder(with_pip=False).create(tmp_path / "venv")
    bin_ = tmp_path / "venv" / "bin"
    site = _run([bin_ / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                cwd=tmp_path, env=env).stdout.strip()
    here = [p for p in sys.path if p.endswith("site-packages")]
    Path(site, "deps-from-the-test-environment.pth").write_text("\n".join(here) + "\n")
    # and nbconvert's templates, data files of a dependency (not the
    # environment's kernels: the report's kernel must be this venv's Python)
    (tmp_path / "venv" / "share" / "jupyter").mkdir(parents=True)
    (tmp_path / "venv" / "share" / "jupyter" / "nbconvert").symlink_to(
        Path(sys.prefix) / "share" / "jupyter" / "nbconvert")
    _run([sys.executable, "-m", "pip", "--python", bin_ / "python", "install", "-q",
          "--no-index", "--no-deps", wheel], cwd=tmp_path, env=env)
    # what the wheel asks for (with [report]) is what is there
    unmet = _run([bin_ / "python", "-c", _UNMET, "report"], cwd=tmp_path, env=env).stdout
    assert unmet == "", unmet
    work = tmp_path / "work"  # outside the checkout: nothing found by a relative path
    work.mkdir()
    env["PATH"] = f"{bin_}{os.pathsep}{env['PATH']}"
    where = _run([bin_ / "python", "-c", "import ccbench_kit; print(ccbench_kit.__file__)"],
                 cwd=work, env=env).stdout
    assert where.startswith(str(tmp_path / "venv")), where
    _run([bin_ / "ccbench", "run", "all_reduce", "-r", 2, "-b", 8, "-e", "4K",
          "--out", "r.nc"], cwd=work, env=env)
    _run([bin_ / "ccbench", "report", "r.nc", "-o", "r.html"], cwd=work, env=env)
    html = (work / "r.html").read_text()
    assert html.count("data:image/png;base64,") >= 2  # the plots, inline
    assert "Traceback" not in html
    out = _run([bin_ / "ccbench", "compare", "r.nc", "r.nc"], cwd=work, env=env).stdout
    assert "indistinguishable" in out
    assert "--hosts" in _run([bin_ / "ccbench", "doctor", "--help"], cwd=work, env=env).stdout
