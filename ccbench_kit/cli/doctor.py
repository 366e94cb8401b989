"""``ccbench doctor``: find the slow node, the bad link, the rank that hangs.

Exit codes: 0 healthy, 1 an outlier found (or a node that hangs or never
starts), 2 bad input, 3 the run failed without naming a node.  The last line
printed is the verdict: ``verdict: node3``, ``verdict: node3 link`` or
``verdict: none``.
"""
import os
import shlex
import sys
import tempfile
from pathlib import Path

from ..health import api as doctor_api, fields as doctor_fields, report as doctor_report
from ..errors import ConfigError
from ..health import gpu
from ..health import baseline as _baseline
from ..health.gpu import check, per_gpu_baseline, report
from ..launch.cluster import connect
from .._optional import require
from ..output_path import check_distinct, check_output
from .cluster import add_launch_arguments, launch_options
from .history import add_history_flag, file_results


def add_parser(sub):
    p = sub.add_parser("doctor", help="health check: name the slow node, the bad link, the "
                                      "rank that hangs",
                       description="Measure every node's own all_reduce and every pair of "
                                   "nodes (bandwidth and latency, O(N) rounds of disjoint "
                                   "pairs) through --backend nccl, mpi or tcp; name the node, "
                                   "link or uplink that stands out. Exit 0 healthy, 1 outlier "
                                   "(or cannot tell), 2 bad input, 3 run failed.")
    add_launch_arguments(p, rank_output=False)
    for group in (doctor_fields.MEASURE_GROUP, doctor_fields.GPU_GROUP):
        g = p.add_argument_group(group)
        for f in doctor_fields.in_group(group):  # the doctor's options (`health.fields`)
            g.add_argument(*f.flags, **f.argparse_keywords())
        if group == doctor_fields.MEASURE_GROUP:
            add_history_flag(g)
    p.set_defaults(func=main, uses_dask=lambda args: bool(args.scheduler_file))


def main_local(args):
    """``ccbench doctor --local``: this node's GPUs (`health.gpu.local`)."""
    given = [doctor_fields.flag(k) if k != "slurm_mode" else "-S/--slurm-mode"
             for k in ("hosts", "hosts_file", "slurm_mode", "scheduler_file", "topology",
                       "backend") if getattr(args, k)]
    if given:
        raise ConfigError(f"--local checks this node's GPUs with no launcher; {given[0]} "
                          "does not apply", given[0])
    if args.per_gpu:  # refused before anything is measured, not after the GPU checks
        doctor_api.per_gpu_nodes(*doctor_api.visible_gpus())
    argv = ["ccbench", *sys.argv[1:]] if sys.argv and sys.argv[0].endswith("ccbench") else []
    diag = gpu.local(args.gpus, repeats=args.repeats, out=args.out, baseline=args.baseline,
                     save_baseline=args.save_baseline, command=shlex.join(argv) if argv else "",
                     pairs=args.pairs,
                     progress=lambda msg: print(f"[gpu] {msg}", file=sys.stderr, flush=True))
    ds = check.load(diag.out)
    for note in diag.verdict.notes:
        if note:
            print(f"note: {note}")
    print(report.text(ds, diag.verdict))
    print(f"GPU check: {ds.attrs.get('gpu_check_s')} s; results: {diag.out}")
    if args.save_baseline:
        print(f"baseline saved: {args.save_baseline}")
    if args.report:
        print(f"report: {report.html(diag.out, args.report)}")
    if not args.per_gpu:
        print(diag.line)
        return diag.exit_code
    # --local --per-gpu: then the GPUs' pairs and the host's all_reduce
    # through nccl (its own results file), judged against the same baseline
    print(f"GPU checks: {diag.line}")
    line, code = doctor_api.joint_verdict([diag, *per_gpu_after(args, diag)])
    print(line)
    return code


def per_gpu_after(args, diag):
    """The ``--per-gpu`` run after the GPU checks `diag`, and its figures
    against the baseline (`per_gpu_baseline`): [Diagnosis] to join."""
    with tempfile.TemporaryDirectory() as tmp:
        # the pair rates, as `health.api` saves them, read back below
        pair_base = os.path.join(tmp, "per-gpu-baseline.json") \
            if args.save_baseline or args.baseline else None
        pairs = run_doctor(args, out=None, baseline=None, save_baseline=pair_base, report=None,
                           aside=True)
        per_gpu = None
        if pair_base and os.path.exists(pair_base) and pairs.out:
            per_gpu = per_gpu_baseline.figures(pairs.out, pair_base, diag.nodes[0])
    print(f"nccl pairs: {pairs.line}")
    if per_gpu and args.save_baseline:
        per_gpu_baseline.extend(args.save_baseline, per_gpu)
        print(f"baseline: the NCCL pairs and the host all_reduce added to {args.save_baseline}")
    if not (per_gpu and args.baseline):
        return [pairs]
    past = per_gpu_baseline.judge(per_gpu, _baseline.load(args.baseline), diag.nodes[0],
                                  diag.verdict)
    for note in past.notes:
        print(f"note: {note}")
    for f in past.findings:
        print(f.sentence())
    return [pairs, doctor_api.Diagnosis(past, doctor_api.OUTLIER
                                        if past.findings or past.undecided
                                        else doctor_api.HEALTHY)]


def _check_outputs(args):
    """The results file and the report can be written: checked before the
    check runs, so that a bad path costs nothing measured."""
    if args.out is not None:
        check_output(args.out, "--out")
    notebook = None
    if args.report is not None:
        page = Path(args.report)
        if page.suffix != ".html":
            raise ConfigError(f"{page}: the report is HTML; name it NAME.html", "--report")
        check_output(page, "--report")
        notebook = page.with_suffix(".ipynb")
        check_output(notebook, "--report")
        for module in ("papermill", "nbconvert"):  # the page is made after measuring
            require(module, "report")
    check_distinct({"--out": args.out, "--save-baseline": args.save_baseline,
                    "--report": args.report, "--report (its notebook)": notebook},
                   {"--baseline": args.baseline})


def main(args):
    _check_outputs(args)
    if args.local:
        return main_local(args)
    for flag, given in (("--gpus", args.gpus is not None), ("--pairs", args.pairs is not None)):
        if given:
            raise ConfigError("applies to the GPU checks: add --local", flag)
    diag = run_doctor(args)
    print(diag.line)
    file_results(args, diag.out)
    return diag.exit_code


def run_doctor(args, **override):
    """`health.doctor` with the command line's settings (`override`: out,
    baseline, save_baseline, report; aside=True: save_baseline is a scratch
    file, its note not printed); prints the notes and the table."""
    opt = {k: override.get(k, getattr(args, k))
           for k in ("out", "baseline", "save_baseline", "report")}
    given = {**doctor_fields.keywords(args, doctor_fields.PLAN),
             **doctor_fields.keywords(args, doctor_fields.CHECK), **opt}
    given.pop("report")
    launch = launch_options(args)
    if launch["hosts"] and len(launch["hosts"]) > 16:
        print(f"ccbench: resolving {len(launch['hosts'])} host names ...", file=sys.stderr,
              flush=True)
    argv = ["ccbench", *sys.argv[1:]] if sys.argv and sys.argv[0].endswith("ccbench") else []
    client = None
    if args.scheduler_file:
        client = connect(args.scheduler_file)
    try:
        diag = doctor_api.doctor(
            launch["hosts"], hosts_file=launch["hosts_file"], nnodes=launch["nnodes"],
            slurm=launch["slurm"], client=client, command=shlex.join(argv) if argv else "",
            **given)
    finally:
        if client is not None:
            client.close()
    if diag.message:
        print(f"ccbench: {diag.message}", file=sys.stderr)
    kept_aside = f"baseline saved: {opt['save_baseline']}" if override.get("aside") else None
    for note in diag.verdict.notes:
        if note not in (diag.message, kept_aside):  # a scratch file is no news to the user
            print(f"note: {note}")
    print(doctor_report.text(diag))
    if opt["report"] and diag.out:
        path = doctor_report.html(diag.out, opt["report"])
        print(f"report: {path}")
    return diag
