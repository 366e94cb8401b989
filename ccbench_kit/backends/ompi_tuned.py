"""What Open MPI's coll/tuned ran for the library's own call (`mpi`), where
that can be known.

coll/tuned picks an algorithm per call from fixed rules of message size and
communicator size; a release build of Open MPI reports none of its choices
(its decision tracing is compiled out).  The choice is known only where the
environment forces it: ``OMPI_MCA_coll_tuned_use_dynamic_rules=1`` with
``OMPI_MCA_coll_tuned_<collective>_algorithm=N``; the number is named as
this Open MPI's ``ompi_info`` names it (4 -> ``ring`` for allreduce in 4.1).
"""
import functools
import shutil
import subprocess

#: the kit's collectives -> coll/tuned's names for them (its MCA parameters)
TUNED_NAMES = {"all_reduce": "allreduce", "all_gather": "allgather", "alltoall": "alltoall",
               "alltoallv": "alltoallv", "broadcast": "bcast", "reduce": "reduce",
               "reduce_scatter": "reduce_scatter", "gather": "gather", "scatter": "scatter"}


def forced_algorithm(collective, environ):
    """The algorithm `environ` forces coll/tuned to run for `collective`
    (its ``ompi_info`` name, else the value as given), or None."""
    name = TUNED_NAMES.get(collective)
    if name is None or environ.get("OMPI_MCA_coll_tuned_use_dynamic_rules") not in ("1", "true"):
        return None
    value = environ.get(f"OMPI_MCA_coll_tuned_{name}_algorithm", "").strip()
    if value in ("", "0", "ignore"):
        return None
    return enumerators(f"coll_tuned_{name}_algorithm").get(value, value)


@functools.lru_cache(maxsize=None)
def enumerators(param):
    """{number: name} of an MCA parameter's values, from ``ompi_info``
    ({} where it is not on PATH or does not answer)."""
    exe = shutil.which("ompi_info")
    if exe is None:
        return {}
    try:
        out = subprocess.run([exe, "--param", "coll", "tuned", "--level", "9", "--parsable"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    prefix = f"mca:coll:tuned:param:{param}:enumerator:value:"
    return dict(line[len(prefix):].split(":", 1) for line in out.splitlines()
                if line.startswith(prefix) and line.count(":") > prefix.count(":"))
