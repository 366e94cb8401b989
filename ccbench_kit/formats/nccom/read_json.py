"""nccom-test's ``--report-to-json-file`` output: ``{"results": [{"size(B)":
..., "time:avg(us)": ..., "algbw(GB/s)": ..., "busbw(GB/s)": ...}]}``.

The file names neither the collective nor the rank count unless it carries
the run's configuration; otherwise they come from the caller or from the
bus factor (busbw/algbw).
"""
from . import common as nc
from ..common.build import find_collective, to_dataset
from ..common.source import half_of, json_line_finder, json_number, key_line, loads_json

NAME = "nccom-test JSON"
_RANKS = ("nworkers", "num_workers", "nranks", "ranks", "world_size")
_COLL = ("cc_op", "operation", "collective", "op", "cc_operation")


def sniff(src, head):
    return head.lstrip().startswith("{") and '"size(B)"' in head


def _config(doc):
    """Rank count, collective and dtype if the JSON carries the run's config."""
    out = {}
    for scope in (doc, doc.get("config"), doc.get("args"), doc.get("parameters")):
        if not isinstance(scope, dict):
            continue
        for k in _RANKS:
            v = scope.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0 and "nranks" not in out:
                out["nranks"] = v
        for k in _COLL:
            v = scope.get(k)
            if isinstance(v, str) and find_collective(v) and "collective" not in out:
                out["collective"] = find_collective(v).name
        for k in ("datatype", "type"):
            v = scope.get(k)
            if isinstance(v, str) and "dtype" not in out:
                out["dtype"] = v
        # the kit's own nccom-style JSON says more in its config
        for k in ("group_size", "iters", "root"):
            v = scope.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and k not in out:
                out[k] = v
        v = scope.get("warmup_iters")
        if isinstance(v, int) and not isinstance(v, bool):
            out.setdefault("warmup", v)
        v = scope.get("op")
        if isinstance(v, str) and not find_collective(v):
            out.setdefault("op", v)
        v = scope.get("placement")
        if v in ("out_of_place", "in_place"):
            out.setdefault("placement", v)
        v = scope.get("algorithms")
        if isinstance(v, list) and len(v) == 1 and isinstance(v[0], str):
            out.setdefault("algorithm", v[0])
        for k in ("backend", "library", "command"):
            if isinstance(scope.get(k), str):
                out.setdefault("attr_" + k, scope[k])
    return out


def parse(src, hints):
    doc = loads_json(src)
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise src.error(json_line_finder(src, "results")(0) or 1,
                        "a JSON object with nccom-test's 'results' list",
                        type(doc.get("results") if isinstance(doc, dict) else doc).__name__)
    results = doc["results"]
    line_of = json_line_finder(src, "size(B)")
    rows, lines, cols = [], [], []
    for i, r in enumerate(results):
        line = line_of(i) or json_line_finder(src, "results")(0)
        if not isinstance(r, dict):
            raise src.error(line, f"an object for results[{i}]", type(r).__name__)
        row = {}
        for key, v in r.items():
            k = str(key).strip().lower()
            if k not in cols:
                cols.append(k)
            if k in (nc.TYPE, nc.ALGO):
                row[k] = (str(v), 0.0)
            else:
                row[k] = (json_number(v, src, key_line(src, line, key), key), half_of(v))
        if nc.SIZE not in row:
            raise src.error(line, f"'size(B)' in results[{i}]", ", ".join(map(str, r)))
        rows.append(row)
        lines.append(line or 0)
    if not rows:
        raise src.error(json_line_finder(src, "results")(0) or 1,
                        "at least one entry in 'results'")
    cmd = _config(doc)
    extra = {k[5:]: v for k, v in cmd.items() if k.startswith("attr_") and v}
    t = nc.build_table(src, lines[0], NAME, cols, rows, lines, cmd, extra)
    return [nc.to_kit_counts(to_dataset(t, hints))]
