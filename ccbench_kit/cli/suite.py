"""``ccbench suite FILE.yaml``, ``ccbench suite status FILE.yaml``,
``ccbench suite collect FILE.yaml``."""
import sys
from ..errors import ConfigError, EXIT_RUN_FAILED
from ..markup import terminal
from ..suite import collect, load_suite, overview, run_suite, status

from .history import add_history_flag, file_results

ACTIONS = ("status", "collect")


def add_parser(sub):
    p = sub.add_parser(
        "suite", help="run a matrix of benchmarks from a YAML file",
        description="Run every combination of a suite file (collectives x environment "
                    "variants x node/rank counts x split masks) into one DataTree and one "
                    "report; in Slurm mode submit one sbatch job each, then `ccbench suite "
                    "status FILE` and `ccbench suite collect FILE`.")
    p.add_argument("words", nargs="+", metavar="[status|collect] FILE",
                   help="the suite file, after `status` or `collect` to query or gather")
    p.add_argument("-S", "--slurm-mode", action="store_true",
                   help="one sbatch job per combination, whatever the file's launcher says")
    p.add_argument("--dry-run", action="store_true",
                   help="Slurm mode: write the batch scripts and manifest, submit nothing")
    p.add_argument("--no-report", action="store_true", help="don't render the report")
    add_history_flag(p)
    p.set_defaults(func=main)


def main(args):

    words = list(args.words)
    action = words.pop(0) if words[0] in ACTIONS else "run"
    if len(words) != 1:
        raise ConfigError("give one suite file: ccbench suite [status|collect] FILE.yaml",
                          "FILE")
    suite = load_suite(words[0])

    def say(line):
        print(terminal(line), file=sys.stderr, flush=True)

    if action == "status":
        rows = status(suite)
        width = max([len("combination")] + [len(r[0]) for r in rows])
        print(f"{'combination':<{width}}  {'job/run':<12} {'results':<10} detail")
        for key, state, result, detail in rows:
            print(terminal(f"{key:<{width}}  {state:<12} {result:<10} {detail}"))
        return 0
    if action == "collect":
        result = collect(suite, report=not args.no_report, progress=say)
    else:
        result = run_suite(suite, slurm=True if args.slurm_mode else None,
                           dry_run=args.dry_run, report=not args.no_report, progress=say)
        if result.out is None and not result.failed:
            say(f"submitted {len(result.entries)} jobs; follow them with `ccbench suite "
                f"status {words[0]}`, then `ccbench suite collect {words[0]}`")
            return 0
    if result.out:
        print(terminal(overview(result.out).to_string(index=False), lines=True))
        file_results(args, result.out)
    for key, reason in result.failed:
        print(terminal(f"ccbench: failed: {key}: {reason}"), file=sys.stderr)
    return 0 if result.ok else EXIT_RUN_FAILED
