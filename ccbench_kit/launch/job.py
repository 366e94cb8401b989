"""One job description for every launch: what the ranks of one MPI job do.

A ``ccbench run`` of several parts (collectives × ``-d all`` × ``-o all`` ×
``--cycles``) and a ``ccbench doctor`` check are each one `Job`: one
launch, one rank entry (`launch.worker`), one session on the ranks.  The
job travels to the ranks as one word (`Job.word`: JSON, compressed, base64,
for ranks on hosts that cannot read this host's files) or as a file.

The format is versioned (``schema``); a word or file that holds a bare
`RunConfig` (what a rank was given before jobs existed, and what a Slurm
batch script written then still holds) reads as a sweep of one part.
"""
import base64
import dataclasses
import importlib
import json
import zlib

from ..config import RunConfig
from ..errors import RunError

SCHEMA = "ccbench-job/1"
#: the module every rank of every launch runs (``python -m RANK_MODULE JOB``)
RANK_MODULE = "ccbench_kit.launch.worker"
WORD_PREFIX = "json64:"

#: what each task runs on a rank, as ``module:function`` (resolved when a rank
#: runs it, as backends are: the doctor's probe sits in a layer above launch/)
TASKS = {
    "sweep": "ccbench_kit.launch.sweep_task:run",
    "doctor": "ccbench_kit.health.probe:rank_task",
}


def round_path(out, k):
    """Round `k`'s results file of a part whose file is `out` (``--until-stable``)."""
    return f"{out}.round{k}.part"


@dataclasses.dataclass(frozen=True)
class Part:
    """One sweep of a job: its name (the results file's group) and configuration."""

    name: str
    config: RunConfig


@dataclasses.dataclass(frozen=True)
class Job:
    """What every rank of one launch does.

    Parameters
    ----------
    task : {"sweep", "doctor"}
        The rank function (`TASKS`).
    parts : tuple of Part
        ``sweep``: the sweeps, run in order on one session.
    plan : dict, optional
        ``doctor``: the health check's plan (`health.plan`).
    rounds : dict, optional
        ``sweep`` with ``--until-stable``: `stable.Rounds`' target, cap and
        iterations; the parts run in rounds, each round's results in
        `stable.round_path` of the part's file.
    table : dict, optional
        ``sweep``: rank 0 sends each part's nccl-tests table, formatted with
        these `formats.nccl_tests.write_table.run_lines` options, in an
        event ``table`` (`sweep_task`).
    """

    task: str
    parts: tuple = ()
    plan: dict = None
    rounds: dict = None
    table: dict = None

    @classmethod
    def sweep(cls, parts, rounds=None):
        """A sweep job of `parts`: {name: RunConfig} in run order."""
        return cls("sweep", tuple(Part(n, c) for n, c in parts.items()), rounds=rounds)

    @classmethod
    def doctor(cls, plan):
        return cls("doctor", plan=plan)

    @property
    def configs(self):
        return [p.config for p in self.parts]

    def to_json(self):
        body = {"schema": SCHEMA, "task": self.task}
        if self.task == "sweep":
            body["parts"] = [{"name": p.name, "config": json.loads(p.config.to_json())}
                             for p in self.parts]
            body["rounds"] = self.rounds
            body["table"] = self.table
        else:
            body["plan"] = self.plan
        return json.dumps(body, sort_keys=True)

    @classmethod
    def from_json(cls, text):
        body = json.loads(text)
        if "schema" not in body:  # a bare RunConfig: a sweep of one part
            cfg = RunConfig.from_json(text)
            return cls.sweep({cfg.collective: cfg})
        if body["schema"] != SCHEMA:
            raise RunError(f"this rank reads job descriptions {SCHEMA}, not {body['schema']!r} "
                           "(a different ccbench_kit version on this host?)")
        if body["task"] == "sweep":
            return cls("sweep", tuple(Part(p["name"], RunConfig.from_json(json.dumps(p["config"])))
                                      for p in body["parts"]), rounds=body.get("rounds"),
                       table=body.get("table"))
        return cls(body["task"], plan=body.get("plan"))

    def word(self):
        """The job as one command-line word."""
        return WORD_PREFIX + base64.urlsafe_b64encode(zlib.compress(self.to_json().encode())).decode()

    @classmethod
    def read(cls, arg):
        """The job in `arg`: a `word`, or the path of a file holding its JSON."""
        if arg.startswith(WORD_PREFIX):
            return cls.from_json(zlib.decompress(base64.urlsafe_b64decode(arg[len(WORD_PREFIX):])))
        with open(arg) as f:
            return cls.from_json(f.read())

    def runner(self):
        """The rank function of this job's task."""
        if self.task not in TASKS:
            raise RunError(f"no task {self.task!r} (known: {', '.join(TASKS)})")
        module, _, name = TASKS[self.task].partition(":")
        return getattr(importlib.import_module(module), name)
