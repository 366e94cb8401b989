"""Which launcher started this process, and in which Slurm job: recorded in
every Dataset (attrs ``launcher``, ``slurm_job_id``, ``slurm_step_id``,
``slurm_nodelist``) so that a result can be traced to its allocation."""
import os


def launcher(environ=None):
    """"mpirun", "srun", or "none" (a process started on its own).

    mpirun's ranks carry its URI (also when mpirun itself runs inside a
    Slurm job and starts its daemons with srun); srun's ranks carry a step id.
    """
    env = os.environ if environ is None else environ
    if "OMPI_MCA_orte_hnp_uri" in env or "PRTE_LAUNCHED" in env or "HYDRA_CONTROL_FD" in env:
        return "mpirun"
    if "SLURM_STEP_ID" in env:
        return "srun"
    if "OMPI_COMM_WORLD_SIZE" in env or "PMIX_RANK" in env or "PMI_RANK" in env:
        return "mpirun"
    return "none"


def job_attrs(environ=None):
    """{"launcher": ..., and the Slurm job, step and node list when in one}."""
    env = os.environ if environ is None else environ
    attrs = {"launcher": launcher(env)}
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if job:
        attrs["slurm_job_id"] = job
        for key, var in (("slurm_step_id", "SLURM_STEP_ID"),
                         ("slurm_nodelist", "SLURM_JOB_NODELIST"),
                         ("slurm_partition", "SLURM_JOB_PARTITION"),
                         ("slurm_cluster", "SLURM_CLUSTER_NAME")):
            if env.get(var):
                attrs[key] = env[var]
    return attrs
