"""The kit's own processes load numpy with one BLAS thread (blas_threads.py):
the ``ccbench`` command and the rank entry set the variable before anything
imports numpy, and a value the user set is kept."""
import os
import subprocess
import sys

import pytest

from ccbench_kit.blas_threads import VARIABLES, one_blas_thread

# the threads of this process, after `CODE` ran in it
_THREADS = "import os; print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))"


def _python(code, **extra):
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    proc = subprocess.run([sys.executable, "-c", f"{code}\n{_THREADS}"], capture_output=True,
                          text=True, timeout=60, env={**env, **extra})
    assert proc.returncode == 0, proc.stderr
    threads, value = proc.stdout.split()[-2:]
    return int(threads), value


@pytest.fixture(scope="module")
def pool_of_plain_numpy():
    """The threads a process has after a plain ``import numpy`` here."""
    threads, value = _python("import numpy")
    assert value == "None"
    if threads < 2:
        pytest.skip(f"numpy's BLAS starts no thread pool here ({os.cpu_count()} CPU(s)), "
                    "so one thread cannot be told from the default")
    return threads


def test_unset_variables_are_set_to_one_and_a_users_value_is_kept():
    env = {"MKL_NUM_THREADS": "3"}
    one_blas_thread(env)
    assert env == {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "3"}


def test_the_rank_entry_sets_it_before_numpy_loads(pool_of_plain_numpy):
    # the worker module's imports load numpy; its first statement comes before
    threads, value = _python("import sys, ccbench_kit.launch.worker; assert 'numpy' in sys.modules")
    assert (threads, value) == (1, "1")


def test_the_ccbench_command_sets_it_before_numpy_loads(pool_of_plain_numpy):
    # `ccbench run --help` builds the run parser (numpy with it) and exits
    code = ("import sys; from ccbench_kit.cli import console; sys.argv = ['ccbench', 'run', '--help']\n"
            "try:\n    console()\nexcept SystemExit:\n    pass\n"
            "assert 'numpy' in sys.modules")
    threads, value = _python(code)
    assert (threads, value) == (1, "1")


def test_a_users_own_setting_reaches_numpy(pool_of_plain_numpy):
    threads, value = _python("import ccbench_kit.launch.worker",
                             OPENBLAS_NUM_THREADS=str(pool_of_plain_numpy))
    assert (threads, value) == (pool_of_plain_numpy, str(pool_of_plain_numpy))
