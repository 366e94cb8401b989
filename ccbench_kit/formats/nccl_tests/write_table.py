"""nccl-tests' table layout, with an algorithm column, from a Dataset."""
import math

import numpy as np

from ...dataset.schema import attr_json, library_name, not_available
from ...dataset.stats import describe
from .write_json import iter_stats

# nccl-tests -I's columns after each placement's #wrong: (header, unit, stat)
PER_ITER_COLUMNS = (("i_min", "(us)", "min"), ("i_max", "(us)", "max"),
                    ("i_p99", "(us)", "p99"), ("i_cv%", "(%)", "cv_pct"))

RAN_NOTE = ("# ran: what the library ran (NCCL: its TUNING log; Open MPI: only what "
            "OMPI_MCA_coll_tuned_use_dynamic_rules=1 with OMPI_MCA_coll_tuned_<coll>_algorithm "
            "forces; - = not reported: a release build of Open MPI does not report "
            "coll/tuned's choice)")


def _num(v, width=7):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "N/A".rjust(width)
    if abs(v) >= 1e4:
        return f"{v:{width}.1f}" if abs(v) < 1e7 else f"{v:{width}.3g}"
    return f"{v:{width}.2f}"


def run_flag(ds, name):
    """A 0/1 run flag from the attrs ("true"/"false" in a file, a bool in memory)."""
    return ds.attrs.get(name) in (True, 1, "true", "1")


def format_table(ds, stats=("avg",), rank_stat="max", show_io=False, show_ran=False):
    """Lines of the results table and the "Avg bus bandwidth" footer
    (`table_parts`, joined).

    A checked run (``--check``) ends with nccl-tests' ``# Out of bounds
    values : N OK|FAILED`` line before that footer (N: results with wrong
    elements, ``ds.ccb.failed_checks()``); an unchecked one has none, so that
    no line says OK of data that was never looked at.

    `show_io` adds each rank's input and output bytes after the count, as
    nccom-test's ``--show-input-output-size`` does.  An imported file whose
    printed numbers mean something else than the table's (bandwidths in
    GiB/s, another count) is preceded by lines that say so (`converted_notes`).

    The run's nccl-tests flags, as its attrs record them, shape the table as
    they shape nccl-tests': ``report_cputime`` (-C 1) heads the time column
    ``cputime``; ``per_iter_timing`` (-I 1) adds i_min i_max i_p99 i_cv% per
    placement, nccl-tests' statistics (`write_json.iter_stats`) of each
    iteration's max over ranks, the first ``per_iter_skip`` (-K) iterations
    left out; ``memory_report`` (-M 1) ends it with the memory usage line.
    `show_ran` (``--show-algorithm``) ends each row with what the library
    ran for that algorithm and size (`ran_at`), and the table with a line
    saying where that comes from.
    """
    head, rows, foot = table_parts(ds, stats, rank_stat, show_io, show_ran)
    return head + rows + foot


def ran_at(ds):
    """``ran(algorithm, size)``: what ran, as far as the Dataset knows: NCCL's
    choice from its TUNING log (attr ``nccl_ran``), the algorithm the
    environment forced Open MPI's coll/tuned to run (attr ``library_ran``),
    ``ccbench:NAME`` for the kit's own algorithms, else ``-`` (not reported)."""
    nccl_ran = attr_json(ds, "nccl_ran", {}) or {}
    library = ds.attrs.get("library_ran") or "-"

    def ran(alg, size):
        if isinstance(nccl_ran, dict) and alg in nccl_ran:
            return str(nccl_ran[alg].get(str(size), "-"))
        if alg in ("mpi", "nccl"):      # the library's own call
            return library
        return f"ccbench:{alg}"         # the kit's own implementation
    return ran


def run_lines(name, ds, stats=("avg",), rank_stat="max", show_io=False, show_ran=False):
    """What ``ccbench run`` prints for its part `name`: a line naming the run
    (ranks, data type, backend and library, iterations, concurrent groups),
    with `show_ran` the algorithm the library was forced to (where known),
    then `format_table`.

    Rank 0 of a launched job formats it from the Dataset it just saved and
    sends it to the launcher (`launch.sweep_task`, event ``table``), so that
    ``ccbench run`` prints it without reading the file back (importing
    xarray is most of a launcher's CPU); it is the same text either way.
    """
    a = ds.attrs
    lines = [f"# ccbench {name}: {a['nranks']} ranks, {a['dtype']}, backend {a['backend']} "
             f"({library_name(a)}), {a['warmup']} warm-up + {a['iters']} iterations"
             + _groups_note(attr_json(ds, "groups"))]
    if show_ran and "library_algorithm" in a:
        lines.append(f"# algorithm mpi: {a['library_algorithm']}")
    return lines + format_table(ds, stats=stats, rank_stat=rank_stat, show_io=show_io,
                                show_ran=show_ran)


def _groups_note(groups):
    if not groups:
        return ""
    return f", {len(groups)} concurrent groups of {len(groups[0])} (busbw per group)"


def table_parts(ds, stats=("avg",), rank_stat="max", show_io=False, show_ran=False):
    """`format_table`'s lines in three lists: the lines above the rows, one
    row per size and algorithm, and the lines below."""
    df = ds.ccb.summary(stats=stats, rank_stat=rank_stat)
    placements = [str(p) for p in ds["placement"].values]
    stats = [c[1][5:] for c in df.columns if isinstance(c, tuple) and c[0] == placements[0]
             and c[1].startswith("time:")]
    algw = max([9] + [len(str(a)) for a in ds["algorithm"].values])
    time_name = "cputime" if run_flag(ds, "report_cputime") else "time"
    per_iter = per_iter_stats(ds) if run_flag(ds, "per_iter_timing") else None
    group_cols = ([f"{time_name}:{s}" if len(stats) > 1 else time_name for s in stats]
                  + ["algbw", "busbw", "#wrong"])
    group_units = ["(us)"] * len(stats) + ["(GB/s)", "(GB/s)", ""]
    if per_iter is not None:
        group_cols += [c for c, _, _ in PER_ITER_COLUMNS]
        group_units += [u for _, u, _ in PER_ITER_COLUMNS]
    group_w = 8 * len(group_cols)
    widths = [max(7, len(c)) for c in group_cols]
    group_w = sum(w + 1 for w in widths)
    io_head = f" {'in_size':>12} {'out_size':>12}" if show_io else ""
    io_units = f" {'(B)':>12} {'(B)':>12}" if show_io else ""
    io_bytes = {int(s): (int(i), int(o)) for s, i, o in
                zip(ds["size"].values, ds["in_bytes"].values, ds["out_bytes"].values)}
    lead = (f"#{'size':>11} {'count':>13}{io_head} {'type':>9} {'redop':>7} {'root':>7} "
            f"{'algorithm':>{algw}}")
    lead_units = f"#{'(B)':>11} {'(elements)':>13}{io_units} {'':>9} {'':>7} {'':>7} {'':>{algw}}"
    title = " " * len(lead)
    for p in placements:
        title += f" {p.replace('_', '-'):^{group_w - 1}}"
    head, units = lead, lead_units
    for _ in placements:
        head += "".join(f" {c:>{w}}" for c, w in zip(group_cols, widths))
        units += "".join(f" {u:>{w}}" for u, w in zip(group_units, widths))
    ran = ran_at(ds) if show_ran else None
    if ran:
        head += "  ran"
    top = converted_notes(ds) + [title.rstrip(), head, units]
    lines = []
    for _, row in df.iterrows():
        io = "".join(f" {b:>12}" for b in io_bytes[row[("size", "")]]) if show_io else ""
        key = {k: row[(k, "")] for k in ("size", "count", "type", "redop", "root", "algorithm")}
        line = (f" {key['size']:>11} {key['count']:>13}{io} {key['type']:>9} {key['redop']:>7} "
                f"{key['root']:>7} {key['algorithm']:>{algw}}")
        for p in placements:
            vals = [row[(p, f"time:{s}")] for s in stats] + [row[(p, "algbw")], row[(p, "busbw")]]
            line += "".join(f" {_num(v, w)}" for v, w in zip(vals, widths))
            wrong = row[(p, "#wrong")]
            nw = len(stats) + 2
            line += f" {('N/A' if wrong < 0 else str(wrong)):>{widths[nw]}}"
            if per_iter is not None:
                st = per_iter.get((str(key["algorithm"]), p, int(key["size"])))
                line += "".join(f" {_num(st[k] if st else None, w)}"
                                for (_, _, k), w in zip(PER_ITER_COLUMNS, widths[nw + 1:]))
        if ran:
            line += f"  {ran(key['algorithm'], key['size'])}"
        lines.append(line)
    foot = [f"# not available: {alg}: {why}" for alg, why in not_available(ds).items()]
    if ran:
        foot.append(RAN_NOTE)
    if (ds["wrong"].values >= 0).any():
        failed = ds.ccb.failed_checks()
        foot.append(f"# {'Out of bounds values':<20} : {failed} {'FAILED' if failed else 'OK'}")
    foot.append(f"# Avg bus bandwidth    : {ds.ccb.avg_busbw(stats[0], rank_stat):.6g} "
                f"(GB/s; time = {describe(stats[0], rank_stat)})")
    if run_flag(ds, "memory_report"):
        foot.append(memory_line(ds))
    return top, lines, foot


def per_iter_stats(ds):
    """{(algorithm, placement, size): nccl-tests' iteration statistics} of
    each iteration's max over ranks, the first ``per_iter_skip`` left out."""
    skip = int(ds.attrs.get("per_iter_skip", 0) or 0)
    lat = ds["latency"].transpose("algorithm", "placement", "size", "rank", "iteration").values
    out = {}
    for ai, alg in enumerate(ds["algorithm"].values):
        for pi, p in enumerate(ds["placement"].values):
            for si, size in enumerate(ds["size"].values):
                times = np.max(lat[ai, pi, si], axis=0)[skip:]
                if np.isfinite(times).all() and times.size:
                    out[(str(alg), str(p), int(size))] = iter_stats(times)
    return out


def memory_line(ds):
    """nccl-tests -M's line from the ``memory_usage`` attr (bytes, max over
    ranks): ``# GPU memory usage : Initialization 1.00 GB | ... | Total  x``;
    "Host" for a backend whose buffers are host memory."""
    usage = attr_json(ds, "memory_usage", {}) or {}
    if isinstance(usage, str) or not usage:
        return f"# {'Memory usage':<20} : not recorded"
    scope = "GPU" if ds.attrs.get("memory_scope") == "device" else "Host"
    parts = " | ".join(f"{name} {mem_string(v)}" for name, v in usage.items())
    total = sum(int(v) for v in usage.values())
    return f"# {scope + ' memory usage':<20} : {parts} | Total  {mem_string(total)}"


def mem_string(nbytes):
    """nccl-tests' getMemString: B, KB, MB, GB by 1024, 2 decimals under
    10, 1 under 100, else none."""
    amount, unit = float(nbytes), " B"
    for name, scale in ((" GB", 1024.0 ** 3), (" MB", 1024.0 ** 2), (" KB", 1024.0)):
        if abs(amount) >= scale:
            amount, unit = amount / scale, name
            break
    digits = 2 if abs(amount) < 10 else 1 if abs(amount) < 100 else 0
    return f"{amount:.{digits}f}{unit}"


def converted_notes(ds):
    """``# converted:`` lines for an imported Dataset whose file printed
    bandwidths in another unit or counts of another meaning than the
    table's, so that no number differs from the file's without a word."""
    notes = []
    printed = ds.get("reported_busbw")
    unit = printed.attrs.get("units", "GB/s") if printed is not None else "GB/s"
    if unit != "GB/s":
        scale = 2.0 ** 30 / 1e9 if unit == "GiB/s" else float("nan")
        notes.append(f"# converted: algbw/busbw below are GB/s (1e9 B/s) from size/time; the file "
                     f"printed {unit} (x{scale:.4f} here); its numbers: reported_algbw, "
                     "reported_busbw")
    if "reported_size" in ds and (ds["reported_size"].values != ds["size"].values).any():
        notes.append(f"# converted: size below is the kit's ({ds.attrs.get('size_convention', '')})")
    if "reported_count" in ds and (ds["reported_count"].values != ds["count"].values).any():
        notes.append("# converted: count below is one rank's call count (as nccl-tests prints "
                     "it); the file's count(elems) is reported_count")
    return notes
