"""``--debug``: what the launch does, shown as it happens.

nccom-test's ``--debug`` shows the debug logs of the run in real time and
implies ``--non-interactive``.  In the kit it means:

- the launcher's command line and the variables the kit adds to the ranks'
  environment, printed (``# debug: ...`` on stderr) before the ranks start;
- every line the ranks write to stderr relayed as it comes (normally only
  kept for the error message of a failed run);
- with the nccl backend, ``NCCL_DEBUG=INFO`` for the ranks unless the
  environment already sets NCCL_DEBUG (NCCL's version, transports and
  channels at start-up, on stdout);
- no progress lines (``--non-interactive``).
"""
import os
import shlex

from ..backends import backend_class


def rank_env(backend, env=None, environ=None):
    """The ranks' extra environment `env` with the debug variables of
    `backend` added where the user did not set them."""
    environ = os.environ if environ is None else environ
    env = dict(env or {})
    for name, value in backend_class(backend).debug_env:
        if name not in environ:
            env.setdefault(name, value)
    return env


def launch_lines(cmd, job_env, environ=None):
    """``# debug:`` lines naming the command and the variables `job_env`
    adds to or changes in this process's environment."""
    environ = os.environ if environ is None else environ
    lines = [f"# debug: launch: {shlex.join(cmd)}"]
    for name in sorted(job_env):
        if environ.get(name) != job_env[name]:
            lines.append(f"# debug: rank environment: {name}={shlex.quote(str(job_env[name]))}")
    return lines
