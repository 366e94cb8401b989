"""The index: an SQLite database of every filed run's facts and summaries.

SQLite (the standard library's sqlite3): no new dependency, one file, and a
reader that never blocks on a writer.  It runs in its rollback-journal mode,
not WAL: WAL needs shared memory between processes, so it is unsafe on a
shared file system, where two cron jobs on two hosts may file runs at once.
Writers take DIR/.lock (store.write_lock) first, so SQLite's own locks only
have to keep readers consistent.  The index is derived data: it is rebuilt
from the files when it is missing, of another schema version, or does not
list exactly the filed files.  A corrupt one is reported, not rewritten
(``ccbench history rebuild`` replaces it).
"""
import contextlib
import json
import os
import pathlib
import sqlite3

from .. import dataset
from ..errors import CCBenchError, ConfigError
from . import facts as F
from .store import filing_meta, stored_files, write_lock

INDEX = "index.sqlite"
INDEX_SCHEMA = "1"
_TABLES = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE runs (run_id TEXT PRIMARY KEY, file TEXT, name TEXT, filed TEXT, created TEXT,
  kind TEXT, verdict TEXT, backend TEXT, library TEXT, nccl_version TEXT, cuda_driver TEXT,
  kit_version TEXT, nranks INTEGER, nnodes INTEGER, hosts TEXT, env TEXT, config_digest TEXT,
  collectives TEXT);
CREATE TABLE series (series_id INTEGER PRIMARY KEY, key TEXT UNIQUE, collective TEXT,
  algorithm TEXT, placement TEXT, size INTEGER, dtype TEXT, nranks INTEGER, nnodes INTEGER,
  backend TEXT);
CREATE TABLE points (series_id INTEGER, run_id TEXT, busbw REAL, lat_p50 REAL, lat_p99 REAL,
  PRIMARY KEY (series_id, run_id)) WITHOUT ROWID;
CREATE INDEX runs_created ON runs (created, filed, run_id);
"""
RUN_COLUMNS = ("run_id", "file", "name", "filed", "created", "kind", "verdict", "backend",
               "library", "nccl_version", "cuda_driver", "kit_version", "nranks", "nnodes",
               "hosts", "env", "config_digest", "collectives")


class CorruptIndex(CCBenchError):
    """The index file is not a database this kit wrote."""


def series_key(collective, algorithm, placement, size, dtype, nranks, nnodes, backend):
    """The name of a series, as `list` prints it and `show` takes it."""
    return f"{collective}/{algorithm}/{placement}/{size}/{dtype}/{nranks}r{nnodes}n/{backend}"


def read_run(path):
    """(facts, summary rows) of one results file; ConfigError naming it when
    it is not a results file this kit can read."""
    try:
        parts = dataset.open_parts(str(path))
    except CCBenchError as e:
        raise ConfigError(str(e), str(path)) from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"not a results file ({type(e).__name__}: {str(e)[:120]})",
                          str(path)) from None
    if not parts:
        raise ConfigError("holds no results", str(path))
    try:
        return F.run_facts(parts), F.summary_rows(parts)
    except (KeyError, ValueError, TypeError) as e:
        raise ConfigError(f"not a results file this kit can summarize ({e})", str(path)) from None


def _insert(con, run_id, stored, directory, run_facts, rows):
    meta = filing_meta(stored)
    hosts = run_facts["hosts"]
    record = dict(run_facts, run_id=run_id, file=str(pathlib.Path(stored).relative_to(directory)),
                  name=meta.get("name", ""), filed=meta.get("filed", ""), nnodes=len(hosts) or 1,
                  hosts=json.dumps(hosts), env=json.dumps(run_facts["env"], sort_keys=True),
                  collectives=json.dumps(run_facts["collectives"]))
    con.execute(f"INSERT OR REPLACE INTO runs ({','.join(RUN_COLUMNS)}) VALUES "
                f"({','.join('?' * len(RUN_COLUMNS))})", [record[c] for c in RUN_COLUMNS])
    ids = {}
    for coll, alg, place, size, dtype, busbw, p50, p99 in rows:
        key = series_key(coll, alg, place, size, dtype, record["nranks"], record["nnodes"],
                         record["backend"])
        if key not in ids:
            con.execute("INSERT OR IGNORE INTO series (key, collective, algorithm, placement, "
                        "size, dtype, nranks, nnodes, backend) VALUES (?,?,?,?,?,?,?,?,?)",
                        (key, coll, alg, place, size, dtype, record["nranks"], record["nnodes"],
                         record["backend"]))
            ids[key] = con.execute("SELECT series_id FROM series WHERE key=?", (key,)).fetchone()[0]
        con.execute("INSERT OR REPLACE INTO points VALUES (?,?,?,?,?)",
                    (ids[key], run_id, busbw, p50, p99))


def _new_database(path):
    con = sqlite3.connect(path, timeout=60, isolation_level=None)
    con.executescript(_TABLES)
    con.execute("INSERT INTO meta VALUES ('schema', ?)", (INDEX_SCHEMA,))
    return con


def index_path(directory):
    """DIR/index.sqlite, refused (ConfigError) when it is a symbolic link
    (dangling or not: SQLite would write through it, outside the history)
    or not a regular file (a folder)."""
    path = pathlib.Path(directory) / INDEX
    if path.is_symlink():
        raise ConfigError(f"{path} is a symbolic link; the index lives inside the history: "
                          "remove the link and `ccbench history rebuild`", "--history")
    if path.exists() and not path.is_file():
        raise ConfigError(f"{path} is not a regular file; move it away and `ccbench history "
                          "rebuild`", "--history")
    return path


def check_usable(directory):
    """Refuse, before a run measures anything, a history whose index it could
    not file into: an index path that is not the history's own file
    (`index_path`) or a corrupt index (`CorruptIndex`).  Reads only."""
    path = index_path(directory)
    if path.exists():
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
        try:
            _schema_of(con, path)
        finally:
            con.close()


def build(directory, target):
    """Write a fresh index of every filed file of `directory` to `target`,
    each file's bytes checked against its name first."""
    files = stored_files(directory, verify=True)
    con = _new_database(target)
    con.execute("BEGIN")
    for run_id, stored in files.items():
        run_facts, rows = read_run(stored)
        _insert(con, run_id, stored, directory, run_facts, rows)
    con.execute("COMMIT")
    return con


def rebuild(directory):
    """Replace DIR/index.sqlite with one built from the files (atomically)."""
    with write_lock(directory):
        rebuild_unlocked(directory)


def _schema_of(con, path):
    try:
        row = con.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        con.execute("SELECT count(*) FROM points").fetchone()
    except sqlite3.DatabaseError as e:
        raise CorruptIndex(f"{path}: the index is corrupt ({e}); the filed runs are intact: "
                           "rebuild it with `ccbench history rebuild --history DIR`") from None
    return row[0] if row else None


def add_indexed(directory, run_id, stored, run_facts, rows):
    """Add one filed run to the index (the caller holds the write lock)."""
    path = index_path(directory)
    if not path.exists():
        build(directory, str(path)).close()
        return
    con = sqlite3.connect(str(path), timeout=60, isolation_level=None)
    try:
        if _schema_of(con, path) != INDEX_SCHEMA:
            con.close()
            rebuild_unlocked(directory)
            return
        con.execute("BEGIN IMMEDIATE")
        _insert(con, run_id, stored, directory, run_facts, rows)
        con.execute("COMMIT")
    finally:
        con.close()


def rebuild_unlocked(directory):
    directory = pathlib.Path(directory)
    index_path(directory)
    tmp = directory / f".index-{os.getpid()}.sqlite"
    with contextlib.suppress(OSError):
        tmp.unlink()
    try:
        build(directory, str(tmp)).close()
        os.replace(tmp, directory / INDEX)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def connect(directory):
    """A connection to an index that lists exactly the filed files.

    Missing, of an older schema, or behind the files (a writer stopped
    between filing and indexing, a file removed by hand): it is brought up to
    date under the write lock; on a read-only DIR, a fresh index is built in
    memory instead.  A corrupt one raises `CorruptIndex`."""
    directory = pathlib.Path(directory)
    path = index_path(directory)
    files = stored_files(directory)
    writable = os.access(directory, os.W_OK) and _really_writable(directory)
    if path.exists():
        uri = f"file:{path}?mode={'rw' if writable else 'ro'}"
        con = sqlite3.connect(uri, uri=True, timeout=60, isolation_level=None)
        schema = _schema_of(con, path)
        if schema == INDEX_SCHEMA:
            listed = {r[0] for r in con.execute("SELECT run_id FROM runs")}
            if listed == set(files):
                return con
        con.close()
        if schema not in (INDEX_SCHEMA, None) and schema.isdigit() and int(schema) > int(INDEX_SCHEMA):
            raise ConfigError(f"{path} was written by a newer ccbench_kit (index schema "
                              f"{schema}); upgrade to read it", "--history")
    if not writable:
        return build(directory, ":memory:")
    rebuild(directory)
    return sqlite3.connect(str(path), timeout=60, isolation_level=None)


def _really_writable(directory):
    probe = pathlib.Path(directory) / f".probe-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
        return True
    except OSError:
        return False
