"""Generated hostile input per surface (issue 28): run, doctor, suite,
export, import (NCCL Inspector dumps and nccl-tests logs), report, compare,
show, recover, history and the Python API (``ccb.load``, ``ccb.run``) --
the hypothesis tests of tests/test_fuzz_surfaces.py and two of
tests/test_fuzz_cli.py, on fresh random seeds.  Every example must end in
exit 0, or one line on stderr and a documented status (the API: a
CCBenchError), never a traceback; a failing example fails its test and is
printed.

N (default 850) sets the examples per test, weighted by what one costs
(``fuzz(weight)`` in the test file: a test whose example writes a netCDF
file takes 0.25 N, one that only parses up to 3 N; the two tests of
test_fuzz_cli.py take N): about 20.5 N in all, 17,000 by default.
Everything runs in-process; no rank, check or kernel starts (outputs are
FIFOs, folders or devices), so it takes minutes, not hours.

    .venv/bin/python bench/fuzz_surfaces.py [N] [--new]

``--new`` runs only the eight tests of the surfaces issue 37 added (history
check's flags, doctor baselines, compare of a doctor's file, the API's
types; then two names of one host and the doctor's sizes, environment
sizes, a filed run's bytes, the shared-memory cleanup): 13.75 N inputs.
"""
import collections
import sys

from _fuzz_runner import run

TESTS = ["tests/test_fuzz_surfaces.py", "tests/test_fuzz_cli.py::test_run_flags",
         "tests/test_fuzz_cli.py::test_importer_times"]
SURFACE = {   # test -> the surface its examples reach
    "test_run_flags": "run (CLI flags, JSON inputs)",
    "test_doctor_never_measures_with_a_bad_output": "doctor",
    "test_suite_values_never_reach_a_script_as_code": "suite (spec -> sbatch script)",
    "test_export_writes_only_inside_its_folder": "export (--aws-naming, --pattern)",
    "test_import_inspector_records": "import: NCCL Inspector dumps",
    "test_importer_times": "import: nccl-tests logs",
    "test_report_refuses_before_any_kernel": "report (outputs, --title)",
    "test_report_markup_boundary": "report: Markdown/HTML cells",
    "test_show_and_compare_check_every_number": "show + compare --min-ratio",
    "test_recover_with_foreign_sidecars": "recover",
    "test_history_actions": "history (every action)",
    "test_api_load_checks_every_file": "ccb.load (eager and chunks)",
    "test_api_run_refuses_before_any_rank": "ccb.run",
    # issue 37
    "test_history_gate_spellings": "history check (--since, --min-change, --series)",
    "test_baseline_files_are_checked_whole": "doctor baselines (health.baseline.load)",
    "test_compare_refuses_files_of_another_kind": "compare (a doctor's results file)",
    "test_api_types_are_config_errors": "ccb.run / run_many (nranks, env, out types)",
    # issue 37, round three
    "test_doctor_host_names_and_sizes_refused_before_launch":
        "doctor (two names of one host, --bw-size/--local-size, --backend)",
    "test_environment_sizes_are_checked_before_anything_runs":
        "env sizes (ccb.run env=, a suite's matrix.env)",
    "test_a_filed_run_is_read_only_as_it_was_filed": "a filed run read (show, ccb.load)",
    "test_shared_memory_cleanup_takes_only_its_jobs_files": "/dev/shm cleanup (remove_segments)",
}
# `--new`: only the surfaces issue 37 added, both rounds (weights 1 + 2 + 0.25 + 3 and
# 1.5 + 2 + 1 + 3 = 13.75 N inputs)
NEW = [f"tests/test_fuzz_surfaces.py::{t}" for t in list(SURFACE)[-8:]]


def main():
    args = [a for a in sys.argv[1:] if a != "--new"]
    n = int(args[0]) if args else 850
    load_before = open("/proc/loadavg").read().split()[:3]
    rc, out, outcomes, counts, wall = run(NEW if "--new" in sys.argv else TESTS, n,
                                          by_test=True)
    load_after = open("/proc/loadavg").read().split()[:3]
    per_test = collections.defaultdict(collections.Counter)
    for (test, outcome), k in outcomes.items():
        per_test[test][outcome] += k
    print("| surface | test | inputs | outcomes |\n|---|---|---|---|")
    ran = NEW if "--new" in sys.argv else TESTS
    for test, surface in SURFACE.items():
        if "--new" in sys.argv and not any(t.endswith(f"::{test}") for t in ran):
            continue
        got = per_test.get(test, {})
        print(f"| {surface} | `{test}` | {sum(got.values()):,} | "
              + ", ".join(f"{k}: {v:,}" for k, v in sorted(got.items())) + " |")
    total = sum(sum(c.values()) for c in per_test.values())
    print(f"# {total:,} inputs reached a surface; {len(counts)} tests, "
          f"{sum(c[0] for c in counts):,} passing and {sum(c[1] for c in counts)} failing "
          f"examples in the generate phase; tracebacks: "
          f"{out.count('Traceback (most recent call last)')}; {wall:.0f} s; exit {rc}")
    print("load average before:", " ".join(load_before), " after:", " ".join(load_after))
    return rc


if __name__ == "__main__":
    sys.exit(main())
