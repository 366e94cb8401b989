"""The history as Python: file runs, list series, read one, find regressions.

>>> import ccbench_kit as ccb
>>> ccb.history.add("results/nightly.nc", "/shared/ccbench-history")
>>> h = ccb.history.open("/shared/ccbench-history")
>>> h.series()[:3]
>>> h.regressions(since=ccb.history.parse_since("2026-11-01"))
"""
import dataclasses
import datetime as dt
import fnmatch
import json
import os
import pathlib
import re
import tempfile

from .. import dataset
from ..errors import ConfigError
from . import changepoints as C
from . import facts as F
from . import index as I
from . import store as S

_SINCE = re.compile(r"^(\d+(?:\.\d+)?)\s*([hdw])$")


def add(results, directory):
    """File results into the history at `directory`; returns [(run_id, new)].

    `results`: a path, a list of paths, or a Dataset/DataTree/{name: Dataset}
    (saved to a temporary file first).  Every file is checked before any is
    filed: a bad one files nothing."""
    d = S.check_dir(directory, write=True)
    I.index_path(d)  # before anything is filed: the index must be the history's own
    if not isinstance(results, (str, os.PathLike, list, tuple)):
        return _add_data(results, d)
    paths = [results] if isinstance(results, (str, os.PathLike)) else list(results)
    read = []
    now = dt.datetime.now(dt.timezone.utc)
    for p in paths:
        if not pathlib.Path(p).is_file():
            raise ConfigError("no such file", str(p))
        run_facts, rows = I.read_run(p)
        _check_created(run_facts["created"], now, str(p))
        read.append((p, run_facts, rows))
    done = []
    for p, run_facts, rows in read:
        run_id, stored, new = S.file_copy(p, d)
        with S.write_lock(d):
            I.add_indexed(d, run_id, stored, run_facts, rows)
        done.append((run_id, new))
    return done


def _add_data(data, directory):
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "results.nc"
        dataset.save(data, path)
        return add(path, directory)


def rebuild(directory):
    """Rebuild the index of `directory` from its filed files."""
    d = S.check_dir(directory, write=True)
    I.index_path(d)
    I.rebuild(d)


#: a filed run may be dated this far ahead of this host's clock (another
#: host's clock running fast); further is a wrong date, refused
CLOCK_SKEW = dt.timedelta(hours=1)


def _check_created(created, now, path):
    """Refuse a run whose `created` date is unreadable or in the future: it
    would sort as the newest run of the history for ever."""
    when = _created(created)
    if when is None:
        raise ConfigError(f"its date (created {created!r}) is not an ISO date; nothing was filed",
                          path)
    if when > now + CLOCK_SKEW:
        raise ConfigError(f"it is dated {created}, in the future (this host's clock says "
                          f"{now.isoformat(timespec='seconds')}); nothing was filed", path)


def parse_since(text, now=None):
    """`--since` as a UTC datetime.

    A duration (7d, 12h, 2w) counts back from now (`now`, a UTC datetime,
    when given); a date (2026-11-01, ISO) is that date.  Either in the
    future: ConfigError.  Anchored on now, never on the newest run: a run
    with a wrong date cannot move the window."""
    if not isinstance(text, str):
        raise ConfigError(f"{text!r} is not a duration (7d, 12h, 2w) or a date (2026-11-01)",
                          "--since")
    now = now or dt.datetime.now(dt.timezone.utc)
    s = str(text).strip().lower()
    m = _SINCE.match(s)
    if m:
        n, unit = float(m.group(1)), m.group(2)
        try:
            when = now - dt.timedelta(hours=n * {"h": 1, "d": 24, "w": 168}[unit])
        except OverflowError:
            raise ConfigError(f"{text!r} reaches back too far", "--since") from None
    else:
        try:
            when = dt.datetime.fromisoformat(str(text).strip())
        except ValueError:
            raise ConfigError(f"{text!r} is not a duration (7d, 12h, 2w) or a date "
                              "(2026-11-01)", "--since") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
    if when > now:
        raise ConfigError(f"{text!r} is in the future", "--since")
    return when


def _created(text):
    try:
        t = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def _check_min_change(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not 0 <= value < 10:
        raise ConfigError(f"{value!r} is not a relative change (0.05 for 5 %)", "min_change")
    return float(value)


@dataclasses.dataclass(frozen=True)
class Regression:
    """A change for the worse in one series, starting at one run: the
    metrics that moved there ((metric, relative change, evidence), ...),
    the evidence as `changepoints.Change.evidence` words it."""
    series: str
    changes: tuple
    position: int           # 1-based: the n-th run of the series
    runs: int
    run: dict               # the first run at the new level
    facts: tuple            # what changed there

    def line(self):
        when = self.run["created"] or self.run["filed"]
        moved = ", ".join(f"{m} {c:+.1%} ({why})" for m, c, why in self.changes)
        why = "; ".join(self.facts) if self.facts else "no recorded fact changed"
        return (f"REGRESSION {self.series} from run {self.position}/{self.runs} {when} "
                f"({self.run['name']}, {self.run['run_id'][:12]}): {moved}: {why}")


class History:
    """An open history directory (see `open`)."""

    def __init__(self, directory):
        self.directory = S.check_dir(directory, write=False)
        self._con = I.connect(self.directory)

    def close(self):
        self._con.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def runs(self):
        """Every filed run, oldest first, as dicts of its facts."""
        cur = self._con.execute(f"SELECT {','.join(I.RUN_COLUMNS)} FROM runs "
                                "ORDER BY created, filed, run_id")
        return [_run_dict(r) for r in cur]

    def series(self, pattern=None):
        """[(series key, number of runs)], optionally those matching a glob."""
        if pattern is not None and not isinstance(pattern, str):
            raise ConfigError(f"{pattern!r} is not a glob of series (all_reduce/*)", "--series")
        rows = self._con.execute("SELECT s.key, count(*) FROM series s JOIN points p "
                                 "USING (series_id) GROUP BY s.key ORDER BY s.key").fetchall()
        return [r for r in rows if pattern is None or fnmatch.fnmatchcase(r[0], pattern)]

    def points(self, key):
        """The runs of one series, oldest first: [(run dict, {metric: value})]."""
        cur = self._con.execute(
            f"SELECT {','.join('r.' + c for c in I.RUN_COLUMNS)}, p.busbw, p.lat_p50, p.lat_p99 "
            "FROM series s JOIN points p USING (series_id) JOIN runs r USING (run_id) "
            "WHERE s.key = ? ORDER BY r.created, r.filed, r.run_id", (key,))
        out = [(_run_dict(row[:len(I.RUN_COLUMNS)]),
                dict(zip(F.METRICS, row[len(I.RUN_COLUMNS):]))) for row in cur]
        if not out:
            raise ConfigError(f"no series {key!r} in {self.directory} (`ccbench history list` "
                              "names them)", "SERIES")
        return out

    def analyse(self, key):
        """{metric: changepoints.Verdict} of one series, with its points."""
        pts = self.points(key)
        return pts, {m: C.detect([v[m] for _, v in pts]) for m in F.METRICS}

    def regressions(self, since=None, min_change=0.0, pattern=None):
        """Every change for the worse, beyond noise and at least `min_change`
        (relative: 0.05 is 5 %), starting at or after `since` (a datetime,
        or text as `parse_since` reads it: "7d", "2026-11-01"), in the
        series matching the glob `pattern`: one `Regression` per series and
        run where metrics moved.  A `pattern` that matches no series is a
        ConfigError (a misspelt gate must not pass)."""
        if since is not None and not isinstance(since, dt.datetime):
            since = parse_since(since)
        elif since is not None and since.tzinfo is None:
            since = since.replace(tzinfo=dt.timezone.utc)
        min_change = _check_min_change(min_change)
        if pattern is not None and not self.series(pattern):
            raise ConfigError(f"{pattern!r} matches no series of {self.directory} (`ccbench "
                              "history list` names them)", "--series")
        found = []
        for key in self._series_since(since, pattern):
            pts = self.points(key)
            starts = [_created(run["created"]) for run, _ in pts]
            first = next((i for i, t in enumerate(starts) if since is None
                          or (t is not None and t >= since)), len(pts))
            at = {}
            for metric, direction in F.METRICS.items():
                def wanted(index, change, direction=direction):
                    worse = change < 0 if direction == "lower" else change > 0
                    return (worse and abs(change) >= min_change
                            and (since is None or (starts[index] is not None
                                                   and starts[index] >= since)))
                values = [v[metric] for _, v in pts]
                if not _can_be_worse(values, first, direction, min_change):
                    continue
                verdict = C.detect(values, wanted)
                for ch in verdict.changes:
                    at.setdefault(ch.index, []).append((metric, ch.change, ch.evidence()))
            for index, changes in sorted(at.items()):
                run = pts[index][0]
                start = _created(run["created"])
                if since is not None and (start is None or start < since):
                    continue
                found.append(Regression(key, tuple(changes), index + 1, len(pts), run,
                                        tuple(facts_near(pts, index))))
        return found

    def _series_since(self, since, pattern):
        """The series keys (matching `pattern`) with a run at or after
        `since`: only these can hold a change that starts there, so the
        others are never searched."""
        keys = [key for key, _ in self.series(pattern)]
        if since is None:
            return keys
        recent = [run_id for run_id, created in self._con.execute("SELECT run_id, created FROM runs")
                  if _created(created) is not None and _created(created) >= since]
        with_recent = set()
        for at in range(0, len(recent), 500):  # SQLite's limit on bound parameters
            chunk = recent[at:at + 500]
            with_recent.update(r[0] for r in self._con.execute(
                "SELECT DISTINCT s.key FROM series s JOIN points p USING (series_id) "
                f"WHERE p.run_id IN ({','.join('?' * len(chunk))})", chunk))
        return [key for key in keys if key in with_recent]

    def newest(self):
        """The time of the newest run (None for an empty history)."""
        row = self._con.execute("SELECT max(created) FROM runs").fetchone()
        return _created(row[0]) if row and row[0] else None

    def last_healthy_doctor(self):
        """{node: run dict} of the newest doctor run with verdict "none"
        (nothing wrong) that each node took part in: the doctor's baseline."""
        best = {}
        for run in self.runs():
            if run["kind"] == "doctor" and run["verdict"] == "none":
                for host in run["hosts"]:
                    best[host] = run
        return best


def _can_be_worse(values, first, direction, min_change):
    """False when no change from run `first` on can be worse by
    `min_change` (changepoints.change_bounds): nothing to search."""
    least, most = C.change_bounds(values, first)
    slack = 1e-9  # the bounds and detect's change round differently
    if direction == "lower":  # lower is worse
        return least <= -min_change + slack
    return most >= min_change - slack


def facts_near(pts, index):
    """What changed at run `index` of a series, and (marked) one run either
    side, since a noisy change point may land one run off its cause."""
    out = []
    for at in (index, index - 1, index + 1):
        if 1 <= at < len(pts):
            changed = F.changed_facts(pts[at - 1][0], pts[at][0])
            tag = "" if at == index else f" (at run {at + 1})"
            out += [c + tag for c in changed]
    return out


def _run_dict(row):
    run = dict(zip(I.RUN_COLUMNS, row))
    run["hosts"] = json.loads(run["hosts"] or "[]")
    run["env"] = json.loads(run["env"] or "{}")
    run["collectives"] = json.loads(run["collectives"] or "[]")
    return run


def open(directory):  # noqa: A001 (ccb.history.open, like io.open)
    """The `History` at `directory` (its index brought up to date)."""
    return History(directory)
