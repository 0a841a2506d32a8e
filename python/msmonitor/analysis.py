"""msmonitor.analysis: the one reader and analysis of a run's exported data, under every view
(the HTML report, scripts/demo_summary.py, the nputrace analysis; docs/design/analysis.md).
It reads the DB and JSONL exports and Chrome trace files of a run (never log text) into
per-rank aggregates, applies the one step rule (facts.step_number), builds the per-step samples
the plugin's step summaries hold, and asks the shared slow-rank rule (src/contract/slowrank.c,
through IPCMonitor_C.slow_ranks) for its verdict. Partial data becomes a note, never an
exception. Contract facts (table names, dtypes, markers) come from msmonitor.facts only."""
import concurrent.futures
import glob
import gzip
import heapq
import json
import os
import re
import sqlite3
import urllib.parse

from . import facts as F

TIMELINE_CAP = 4000      # events drawn in the step timeline
TRACE_MAX_BYTES = 256 * 1024 * 1024   # on disk (a .gz may hold more)


def _add_pod(rk, d):
    """The pod of a META_DATA row / JSONL line ({"name","namespace",...}) as "namespace/name"."""
    if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not d["name"]:
        return
    ns = d.get("namespace")
    rk.pods.add(f"{ns}/{d['name']}" if isinstance(ns, str) and ns else d["name"])


class Rank:
    """Everything aggregated for one rank (all its files merged)."""

    def __init__(self, rank):
        self.rank = rank
        self.hosts = set()
        self.pods = set()         # "namespace/name" the rank reported (docs/deploy.md#attribution)
        self.pids = set()
        self.files = []
        self.steps = {}           # step -> [host_ns, device_ns|None, start, end, dev_start, dev_end]
        self.samples = {}         # step -> (wall, compute, comm, memcpy, host, wait, transfer) ns (DB only)
        self.kernels = {}         # name -> [count, total, min, max]
        self.comm = {}            # (name, group, dtype) -> [count, total, elements, bytes]
        self.hccl = {}            # (name, comm) -> [count, total, bandwidth_sum]
        self.copies = {}          # "MemCpy HTOD" / "MemSet" -> [count, total, bytes]
        self.api = {}             # (name, type) -> [count, total]
        self.busy = {"compute": 0, "communication": 0, "memcpy": 0}
        self.window = [None, None]
        self.session = [None, None]
        self.kinds = set()
        self.counters = {}        # source -> {key: value}
        self.sources = set()      # "DB" / "JSONL"
        self.jsonl_markers = {}   # "host"/"device" -> pid -> marker id -> times (while reading)

    def widen(self, lo, hi):
        if lo is None or hi is None:
            return
        if self.window[0] is None or lo < self.window[0]:
            self.window[0] = lo
        if self.window[1] is None or hi > self.window[1]:
            self.window[1] = hi


def _add(d, key, vals):
    cur = d.get(key)
    if cur is None:
        d[key] = list(vals)
    else:
        for i, v in enumerate(vals):
            cur[i] += v


def merge(ranks, attr):
    """One of a Rank's aggregates (kernels, comm, hccl, copies, api) summed over `ranks`."""
    out = {}
    for rk in ranks:
        for k, v in getattr(rk, attr).items():
            if attr == "kernels":
                _kernel_add(out, k, *v)
            else:
                _add(out, k, v)
    return out


def _kernel_add(d, name, count, total, lo, hi):
    cur = d.get(name)
    if cur is None:
        d[name] = [count, total, lo, hi]
    else:
        cur[0] += count
        cur[1] += total
        cur[2] = min(cur[2], lo)
        cur[3] = max(cur[3], hi)


class Run:
    """The files found under `root`, read into per-rank aggregates, plus the notes on what was
    missing or damaged. scan() reads; the other methods derive the verdicts the views show.
    `sources` limits what is read ("db", "jsonl", "trace"); with `need_strings` a DB
    without its string table (a killed rank) is skipped rather than shown with '#<id>' names."""

    def __init__(self, root, want_rank=None, want_step=None, sources=("db", "jsonl", "trace"),
                 need_strings=False):
        self.root = root
        self.sources = frozenset(sources)
        self.need_strings = need_strings
        self.want_rank = want_rank
        self.want_step = want_step
        self.ranks = {}
        self.notes = []
        self.files = []           # (relpath, type, size, note)
        self.traces = []          # (path, rank|None, data)
        self.meta = {}            # META_DATA extras: key -> set(values)
        self.parallel = set()
        self.db_paths = {}        # rank -> [paths]
        self.jsonl_paths = {}
        self.pid_rank = {}
        self.basis = "host"

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    def rank(self, r):
        if r not in self.ranks:
            self.ranks[r] = Rank(r)
        return self.ranks[r]

    # ---------------------------------------------------------------- discovery
    def scan(self):
        if not os.path.isdir(self.root):
            self.note(f"{self.root} is not a directory: nothing to report.")
            return
        paths = sorted(glob.glob(os.path.join(glob.escape(self.root), "**", "*"), recursive=True))
        for p in paths:
            if not os.path.isfile(p):
                continue
            base = os.path.basename(p)
            m = F.EXPORT_FILE_RE.match(base)
            if m:
                pid, rank, ext = int(m.group(1)), int(m.group(3)), m.group(4)
                if ext not in self.sources:
                    continue
                self.pid_rank[pid] = rank
                (self.db_paths if ext == "db" else self.jsonl_paths).setdefault(rank, []).append(p)
                self.rank(rank).pids.add(pid)
            elif base.endswith((".json", ".json.gz")) and "trace" in self.sources:
                self._read_trace(p)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(min(os.cpu_count() or 1, 4), 2)) as self.pool:
            for rank, ps in sorted(self.db_paths.items()):
                for p in ps:
                    self._read_db(p, self.rank(rank))
        for rank, ps in sorted(self.jsonl_paths.items()):
            for p in ps:
                self._read_jsonl(p, self.rank(rank))
            self._jsonl_steps(self.rank(rank))
        self.basis = step_basis(self.ranks.values())
        if not self.db_paths and not self.jsonl_paths and not self.traces:
            self.note("No msmonitor_*.db, msmonitor_*.jsonl or trace *.json files were found under this "
                      "directory (did the session run with --log-file and stop?).")

    def _file(self, path, ftype, note=""):
        try:
            size = os.path.getsize(path)
        except OSError:
            size = 0
        self.files.append((os.path.relpath(path, self.root), ftype, size, note))

    # ---------------------------------------------------------------- DB
    def _open_db(self, path):
        """Read-only; `immutable=1` as a fallback for a directory we cannot write the -shm into."""
        url = "file:" + urllib.parse.quote(os.path.abspath(path))
        for uri in (url + "?mode=ro", url + "?immutable=1"):
            try:
                db = sqlite3.connect(uri, uri=True)
                db.execute("PRAGMA query_only=1")
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return db
            except sqlite3.Error:
                continue
        return None

    def _read_db(self, path, rk):
        rel = os.path.relpath(path, self.root)
        db = self._open_db(path)
        if db is None:
            self._file(path, "DB", "unreadable (not an SQLite database?)")
            self.note(f"{rel}: could not be opened as SQLite; skipped.")
            return
        try:
            self._read_db_tables(db, path, rel, rk)
        except sqlite3.Error as e:
            self.note(f"{rel}: read stopped early ({e}); what was read is shown.")
        finally:
            db.close()

    def _read_db_tables(self, db, path, rel, rk):
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        rk.files.append(rel)
        rk.sources.add("DB")
        if not tables:
            self._file(path, "DB", "empty (no tables)")
            self.note(f"{rel}: the database is empty (created, nothing written yet).")
            return
        have_strings = F.T_STRINGS in tables
        if not have_strings and self.need_strings:
            self._file(path, "DB", f"no {F.T_STRINGS}: skipped")
            self.note(f"{rel}: {F.T_STRINGS} is missing (the rank was killed or the session never stopped); skipped.")
            return
        fnote = "" if have_strings else f"no {F.T_STRINGS} (killed rank or session not stopped)"
        self._file(path, "DB", fnote)
        s = dict(db.execute(f"SELECT id, value FROM {F.T_STRINGS}")) if have_strings else {}
        if not have_strings:
            self.note(f"{rel}: {F.T_STRINGS} is missing (the rank was killed or the session never stopped); "
                      "names are shown as '#<id>' and steps are numbered in marker order.")

        def name(i):
            v = s.get(i)
            return v if v is not None else f"#{i}"

        if F.T_SESSION not in tables:
            self.note(f"{rel}: no {F.T_SESSION}, so the session never stopped (the rank was killed, or it "
                      "is still running): only the batches committed so far are shown.")
        mstx = [i for i, v in s.items() if v == F.MSTX_TASK_TYPE]
        mstx_id = mstx[0] if mstx else None
        if F.T_HOST in tables:
            for (hn,) in db.execute(f"SELECT hostName FROM {F.T_HOST}"):
                if hn:
                    rk.hosts.add(str(hn))
        if F.T_SESSION in tables:
            for st, en in db.execute(f"SELECT startTimeNs, endTimeNs FROM {F.T_SESSION}"):
                if st is not None and (rk.session[0] is None or st < rk.session[0]):
                    rk.session[0] = st
                if en is not None and (rk.session[1] is None or en > rk.session[1]):
                    rk.session[1] = en
        if F.T_META in tables:
            for k, v in db.execute(f"SELECT name, value FROM {F.T_META}"):
                if k is None or str(k).startswith(F.META_SCHEMA_PREFIX):
                    continue
                if k == F.META_PARALLEL:
                    self.parallel.add(str(v))
                    continue
                if k == F.META_POD:
                    try:
                        _add_pod(rk, json.loads(v))
                    except (TypeError, ValueError):
                        self.note(f"{rel}: META_DATA {F.META_POD} is not JSON; the rank's pod is not shown.")
                    continue
                if k in (F.META_FILTER, F.META_STATS):
                    self._session_end(rk, f"DB {F.T_META} ({rel})", k, v)
                    continue
                self.meta.setdefault(str(k), set()).add(str(v))
                if any(w in str(k).lower() for w in ("stat", "count", "kept", "drop", "filter", "cpu")):
                    rk.counters.setdefault(f"DB {F.T_META} ({rel})", {})[str(k)] = str(v)

        # The full-table aggregates (kernels, APIs) run on their own connections in worker threads (the
        # sqlite3 module releases the GIL while SQLite works) while this thread does the rest.
        bg = {}
        if F.T_TASK in tables and F.T_COMPUTE in tables:
            # Kernels are the TASK rows with a COMPUTE_TASK_INFO row: the per-name GROUP BY also
            # gives the compute total and the window (no second pass over TASK).
            bg["kern"] = self._bg(path, "SELECT c.name, COUNT(*), SUM(t.endNs - t.startNs), "
                                  "MIN(t.endNs - t.startNs), MAX(t.endNs - t.startNs), MIN(t.startNs), MAX(t.endNs) "
                                  f"FROM {F.T_TASK} t JOIN {F.T_COMPUTE} c ON c.globalTaskId = t.globalTaskId "
                                  "GROUP BY c.name")
        elif F.T_TASK in tables:
            # No COMPUTE_TASK_INFO: one pass, no sort; kernels are the rows that are not markers.
            bg["task"] = self._bg(path, "SELECT SUM(CASE WHEN taskType IS ?1 THEN 0 ELSE endNs - startNs END), "
                                  "SUM(taskType IS NOT ?1), MIN(CASE WHEN taskType IS ?1 THEN NULL ELSE startNs END), "
                                  f"MAX(CASE WHEN taskType IS ?1 THEN NULL ELSE endNs END) FROM {F.T_TASK}", (mstx_id,))
        if F.T_API in tables:
            bg["api"] = self._bg(path, "SELECT name, type, COUNT(*), SUM(endNs - startNs) "
                                 f"FROM {F.T_API} GROUP BY 1, 2")

        # Device step markers: TASK rows of type MsTx, matched to host ranges by connectionId.
        dev_marker = {}
        if F.T_TASK in tables and mstx_id is not None:
            for conn, st, en in db.execute(
                    f"SELECT connectionId, startNs, endNs FROM {F.T_TASK} WHERE taskType = ?", (mstx_id,)):
                dev_marker[conn] = (st, en)
            if dev_marker:
                rk.kinds.add(F.K_MARKER)
        if F.T_MSTX in tables:
            if have_strings:
                like = " OR ".join("value LIKE ?" for _ in F.STEP_PREFIXES)
                rows = db.execute(
                    f"SELECT message, startNs, endNs, connectionId FROM {F.T_MSTX} WHERE eventType = ? AND "
                    f"message IN (SELECT id FROM {F.T_STRINGS} WHERE {like}) ORDER BY startNs",
                    (F.MSTX_RANGE,) + tuple(p + "%" for p in F.STEP_PREFIXES))
            else:
                rows = db.execute(f"SELECT NULL, startNs, endNs, connectionId FROM {F.T_MSTX} "
                                  "WHERE eventType = ? ORDER BY startNs", (F.MSTX_RANGE,))
            order = 0
            for msg, st, en, conn in rows:
                order += 1
                n = order if msg is None else F.step_number(s.get(msg, ""))
                if n is not None:
                    rk.steps[n] = step_entry(st, en, dev_marker.get(conn))
            if db.execute(f"SELECT 1 FROM {F.T_MSTX} LIMIT 1").fetchone():
                rk.kinds.add(F.K_MARKER)
            if rk.steps:
                try:
                    _db_step_samples(db, tables, mstx_id, rk)
                except sqlite3.Error as e:
                    self.note(f"{rel}: per-step compute / communication split failed ({e}); step time only.")
        if F.T_COMM in tables:
            for op, grp, dt, n, total, elems, lo, hi in db.execute(
                    "SELECT opType, groupName, dataType, COUNT(*), SUM(endNs - startNs), SUM(count), "
                    f"MIN(startNs), MAX(endNs) FROM {F.T_COMM} GROUP BY 1, 2, 3"):
                elems = int(elems or 0)
                _add(rk.comm, (name(op), name(grp), F.dtype_name(dt)),
                     (n, total or 0, elems, elems * F.dtype_bytes(dt)))
                rk.busy["communication"] += total or 0
                rk.widen(lo, hi)
                rk.kinds.add(F.K_COMM)
        if F.T_HCCL in tables:
            hccl_total = 0
            for nm, cm, n, total, bw, lo, hi in db.execute(
                    "SELECT name, commName, COUNT(*), SUM(endNs - startNs), SUM(bandWidth), MIN(startNs), "
                    f"MAX(endNs) FROM {F.T_HCCL} GROUP BY 1, 2"):
                _add(rk.hccl, (name(nm), name(cm)), (n, total or 0, bw or 0.0))
                hccl_total += total or 0
                rk.widen(lo, hi)
                rk.kinds.add(F.K_HCCL)
            if not rk.comm:      # Hccl and Communication describe the same collectives
                rk.busy["communication"] += hccl_total
        for table, label in ((F.T_MEMCPY, F.K_MEMCPY), (F.T_MEMSET, F.K_MEMSET)):
            if table not in tables:
                continue
            col = "copyKind" if label == F.K_MEMCPY else "NULL"
            for kind, n, total, nbytes, lo, hi in db.execute(
                    f"SELECT {col}, COUNT(*), SUM(endNs - startNs), SUM(bytes), MIN(startNs), MAX(endNs) "
                    f"FROM {table} GROUP BY 1"):
                key = f"MemCpy {F.MEMCPY_KINDS.get(kind, kind)}" if label == F.K_MEMCPY else F.K_MEMSET
                _add(rk.copies, key, (n, total or 0, int(nbytes or 0)))
                rk.busy["memcpy"] += total or 0
                rk.widen(lo, hi)
                rk.kinds.add(label)
        if F.T_MEMORY in tables and db.execute(f"SELECT 1 FROM {F.T_MEMORY} LIMIT 1").fetchone():
            rk.kinds.add("Memory")
        for key, fut in bg.items():
            try:
                rows = fut.result()
            except sqlite3.Error as e:
                self.note(f"{rel}: an aggregate over {F.T_API if key == 'api' else F.T_TASK} failed ({e}).")
                continue
            if key == "task":
                total, n, lo, hi = rows[0]
                if n:
                    rk.busy["compute"] += total or 0
                    rk.widen(lo, hi)
                    rk.kinds.add(F.K_KERNEL)
            elif key == "kern":
                for nm, n, total, lo, hi, first, last in rows:
                    _kernel_add(rk.kernels, name(nm), n, total or 0, lo or 0, hi or 0)
                    rk.busy["compute"] += total or 0
                    rk.widen(first, last)
                    rk.kinds.add(F.K_KERNEL)
            else:
                for nm, typ, n, total in rows:
                    _add(rk.api, (name(nm), F.API_TYPES.get(typ, str(typ))), (n, total or 0))
                    rk.kinds.add(F.API_TYPES.get(typ, "API"))

    def _bg(self, path, sql, params=()):
        def run():
            db = self._open_db(path)
            if db is None:
                raise sqlite3.OperationalError("cannot reopen the database")
            try:
                return db.execute(sql, params).fetchall()
            finally:
                db.close()
        return self.pool.submit(run)

    # ---------------------------------------------------------------- JSONL
    def _read_jsonl(self, path, rk):
        rel = os.path.relpath(path, self.root)
        rk.files.append(rel)
        rk.sources.add("JSONL")
        bad = lines = 0
        m = F.EXPORT_FILE_RE.match(os.path.basename(path))
        pid = int(m.group(1)) if m else 0
        # Step markers pair across the rotated files of one process: keyed by (pid, marker id).
        host_marker = rk.jsonl_markers.setdefault("host", {}).setdefault(pid, {})
        dev_marker = rk.jsonl_markers.setdefault("device", {}).setdefault(pid, {})
        try:
            fh = open(path, "r", encoding="utf-8", errors="replace")
        except OSError as e:
            self._file(path, "JSONL", f"unreadable: {e.strerror}")
            return
        with fh:
            for raw in fh:
                lines += 1
                try:
                    d = json.loads(raw)
                    if not isinstance(d, dict):
                        raise ValueError
                    self._jsonl_line(d, rk, host_marker, dev_marker)
                except (ValueError, TypeError, KeyError):
                    bad += 1
        self._file(path, "JSONL", f"{bad} unreadable line(s)" if bad else "")
        if bad:
            self.note(f"{rel}: {bad} of {lines} line(s) could not be parsed (truncated by a kill?); skipped.")

    @staticmethod
    def _jsonl_steps(rk):
        """Host step ranges with their device spans, once all files of the rank are read."""
        for pid, hosts in rk.jsonl_markers.get("host", {}).items():
            devs = rk.jsonl_markers["device"].get(pid, {})
            for mid, (n, st, en) in hosts.items():
                rk.steps[n] = step_entry(st, en, devs.get(mid))
        rk.jsonl_markers = {}

    def _jsonl_line(self, d, rk, host_marker, dev_marker):
        kind = d.get("kind")
        st, en = d.get("startNs"), d.get("endNs")
        dur = (en - st) if isinstance(st, int) and isinstance(en, int) else 0
        if kind == F.K_KERNEL:
            _kernel_add(rk.kernels, str(d["name"]), 1, dur, dur, dur)
            rk.busy["compute"] += dur
            rk.widen(st, en)
        elif kind == F.K_COMM:
            dt = str(d.get("dataType", F.DTYPE_INVALID))
            elems = int(d.get("count") or 0)
            _add(rk.comm, (str(d["name"]), str(d.get("commName", "")), dt),
                 (1, dur, elems, elems * F.dtype_bytes(name=dt)))
            rk.busy["communication"] += dur
            rk.widen(st, en)
        elif kind == F.K_HCCL:
            _add(rk.hccl, (str(d["name"]), str(d.get("commName", ""))), (1, dur, float(d.get("bandWidth") or 0)))
            rk.widen(st, en)
        elif kind in (F.K_MEMCPY, F.K_MEMSET):
            key = f"MemCpy {d.get('copyKind', F.MEMCPY_KINDS[0])}" if kind == F.K_MEMCPY else F.K_MEMSET
            _add(rk.copies, key, (1, dur, int(d.get("bytes") or 0)))
            rk.busy["memcpy"] += dur
            rk.widen(st, en)
        elif kind in F.API_KINDS:
            _add(rk.api, (str(d["name"]), kind), (1, dur))
        elif kind == F.K_MARKER:
            n = F.step_number(d.get("name", ""))
            if n is not None:
                if d.get("sourceKind") == F.SOURCE_DEVICE:
                    dev_marker[d.get("id")] = (st, en)
                else:
                    host_marker[d.get("id")] = (n, st, en)
        elif kind == F.META_PARALLEL:
            self.parallel.add(str(d.get("value")))
        elif kind == F.META_POD:
            _add_pod(rk, d)
        elif kind == F.META_STATS:
            self._session_end(rk, f"JSONL {kind}", F.META_FILTER, d.get(F.META_FILTER))
            self._session_end(rk, f"JSONL {kind}", F.META_STATS, d.get("stats"))
        elif kind in F.JSONL_META_KINDS:
            pass
        elif isinstance(kind, str) and ("stat" in kind.lower() or "counter" in kind.lower()):
            rk.counters.setdefault(f"JSONL {kind}", {}).update(
                {str(k): str(v) for k, v in d.items() if k != "kind"})
        if isinstance(kind, str) and kind not in F.JSONL_META_KINDS:
            rk.kinds.add(kind)

    # ---------------------------------------------------------------- traces
    def _read_trace(self, path):
        rel = os.path.relpath(path, self.root)
        try:
            size = os.path.getsize(path)
            if size > TRACE_MAX_BYTES:
                self._file(path, "trace", "too large, skipped")
                self.note(f"{rel}: trace larger than {TRACE_MAX_BYTES >> 20} MiB; not read.")
                return
            data = load_trace(path)
        except (OSError, ValueError, EOFError) as e:
            self._file(path, "json", "not a readable JSON trace")
            self.note(f"{rel}: not readable as JSON ({type(e).__name__}); skipped.")
            return
        events = trace_events(data)
        if not isinstance(events, list):
            self._file(path, "json", "no traceEvents; ignored")
            return
        rank = None
        if isinstance(data, dict) and isinstance(data.get("distributedInfo"), dict):
            r = data["distributedInfo"].get("rank")
            rank = r if isinstance(r, int) else None
        if rank is None:
            m = re.search(r"rank[_-]?(\d+)", os.path.basename(path)) or \
                re.search(r"_(\d+)\.json(?:\.gz)?$", os.path.basename(path))
            rank = int(m.group(1)) if m else None
        self._file(path, "trace", f"{len(events)} events" + (f", rank {rank}" if rank is not None else ""))
        self.traces.append((rel, rank, events))

    def _session_end(self, rk, source, name, value):
        """The filter and the counters at stop from the session end of a DB or JSONL file
        (docs/outputs.md#session-end): the counters shown by their stats-line labels."""
        if name == F.META_FILTER:
            if isinstance(value, str):
                self.meta.setdefault("filter", set()).add(value or "(none)")
            return
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                self.note(f"{source}: {F.META_STATS} is not a JSON object; counters not shown.")
                return
        if not isinstance(value, dict):
            self.note(f"{source}: {F.META_STATS} is not a JSON object; counters not shown.")
            return
        rk.counters.setdefault(source, {}).update(
            {F.STATS_LABELS.get(str(k), str(k)): str(v) for k, v in value.items()})

    # ---------------------------------------------------------------- analysis
    def step_value(self, v):
        return v[1] if self.basis == "device" else v[0]

    def points(self, rk):
        """[[step, ns]] in step order on the chosen basis (steps without a value left out)."""
        return [[n, self.step_value(rk.steps[n])] for n in sorted(rk.steps) if self.step_value(rk.steps[n]) is not None]

    def values(self, rk):
        return [p[1] for p in self.points(rk)]

    def slow_ranks(self):
        """(slow ranks, per-rank verdicts, result) by the shared rule (slow_ranks below)."""
        self.basis = step_basis(self.ranks.values())
        self.slow_result, why = slow_ranks(self.ranks)
        if why:
            self.note(why)
        if self.slow_result is None:
            return [], {}, None
        detail = {s["rank"]: s for s in self.slow_result["slow"]}
        return sorted(detail), detail, self.slow_result

    def pick_rank_step(self):
        ranks = sorted(r for r, rk in self.ranks.items() if rk.steps)
        rank = self.want_rank
        if rank is None:
            rank = 0 if 0 in ranks else (ranks[0] if ranks else None)
        step = self.want_step
        if step is None and rank in self.ranks and self.ranks[rank].steps:
            pts = self.points(self.ranks[rank])
            order = sorted(pts, key=lambda p: (p[1], p[0]))
            step = order[(len(order) - 1) // 2][0] if order else None
        return rank, step

    def timeline(self, rank, step):
        """(source, window, lanes, events, capped, note)."""
        for rel, trank, events in self.traces:
            if trank is not None and rank is not None and trank != rank:
                continue
            # A step asked for by --step must be in the trace; by default the trace's own median
            # step is drawn (a trace covers a few steps, the DB the whole session).
            tl = _trace_timeline(rel, events, step, strict=self.want_step is not None)
            if tl:
                return tl
        if rank is None or step is None or rank not in self.ranks or step not in self.ranks[rank].steps:
            return None
        lo, hi = step_span(self.ranks[rank].steps[step])
        lanes, events = {}, []
        capped = False
        for p in self.db_paths.get(rank, []):
            db = self._open_db(p)
            if db is None:
                continue
            try:
                capped |= _db_timeline(db, lo, hi, lanes, events)
            except sqlite3.Error as e:
                self.note(f"timeline: {os.path.relpath(p, self.root)}: {e}")
            finally:
                db.close()
        for p in self.jsonl_paths.get(rank, []):
            capped |= _jsonl_timeline(p, lo, hi, lanes, events)
        events.sort(key=lambda e: e[1])
        if len(events) > TIMELINE_CAP:
            events, capped = events[:TIMELINE_CAP], True
        src = "DB rows" if self.db_paths.get(rank) else "JSONL lines"
        return {"source": src, "window": [lo, hi], "lanes": _lane_list(lanes), "events": events, "capped": capped}


# -------------------------------------------------------------------- traces
def load_trace(path):
    """The parsed JSON of a Chrome trace file (.json, or .json.gz)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fh:
        return json.load(fh)


def trace_events(data):
    """The event list of a parsed trace (the object form's traceEvents, or torch's legacy
    list form); None when there is none."""
    return data.get("traceEvents") if isinstance(data, dict) else data


# -------------------------------------------------------------------- steps
def step_entry(st, en, dev):
    """One step from its host marker range and the device span paired with it (or None):
    [host ns, device ns|None, host start, host end, device start|None, device end|None]."""
    return [en - st, (dev[1] - dev[0]) if dev else None, st, en,
            dev[0] if dev else None, dev[1] if dev else None]


def step_span(v):
    """First to last timestamp of a step (host or device part)."""
    return (min(x for x in (v[2], v[4]) if x is not None), max(x for x in (v[3], v[5]) if x is not None))


def step_basis(ranks):
    """'device' (the device span of the step marker: the work of the step, which a slow rank's
    peers do not inherit by waiting in the collective) when every step of every rank has one,
    else 'host' (the host marker range, as the framework's step() sees it)."""
    with_steps = [rk for rk in ranks if rk.steps]
    # A step cut by the session stop may miss its device part: tolerate 10% (at least 1).
    for rk in with_steps:
        missing = sum(1 for v in rk.steps.values() if v[1] is None)
        if missing > max(1, len(rk.steps) // 10) or missing == len(rk.steps):
            return "host"
    return "device" if with_steps else "host"


def slow_ranks(ranks):
    """(result, note) of the shared slow-rank rule over {rank: Rank}: src/contract/slowrank.c
    through the extension, with the parameters of `dyno steps` (its defaults; the result's
    "rule" names them; docs/cluster.md). Per-step samples as the plugin's step summaries hold
    them (DB), or the step span alone (JSONL: the wall rule). result is None when no rank has
    steps or the extension is missing (note says so)."""
    rows_by_rank = []
    for r, rk in sorted(ranks.items(), key=lambda kv: kv[0]):
        if r is None or not rk.steps:
            continue
        rows = []
        for n in sorted(rk.steps):
            smp = rk.samples.get(n)
            if smp is None:
                lo, hi = step_span(rk.steps[n])
                smp = (max(hi - lo, 0), 0, 0, 0, 0, 0, 0)
            rows.append((n,) + tuple(int(x) for x in smp))
        rows_by_rank.append((int(r), rows))
    if not rows_by_rank:
        return None, None
    ext = _extension()
    if ext is None:
        return None, "the IPCMonitor_C extension is not available: no slow-rank verdict."
    return ext.slow_ranks(rows_by_rank), None


def slow_rule():
    """The parameters of the shared rule ({threshold, mad_k, min_steps, min_ranks}), or {}."""
    ext = _extension()
    return dict(ext.slow_ranks([])["rule"]) if ext is not None else {}


def _extension():
    from ._ipcmonitor_C import IPCMonitor_C  # pylint: disable=import-outside-toplevel
    return IPCMonitor_C if IPCMonitor_C is not None and hasattr(IPCMonitor_C, "slow_ranks") else None


def _db_step_samples(db, tables, mstx_id, rk):
    """Per step, what the plugin's step summary holds (docs/cluster.md §1): the span from the
    first to the last timestamp of the step range (host or device part), and the device
    activity starting inside it — kernels, Communication (whole op), Hccl (transfer), memcpy +
    memset — summed per class, wait = Communication − Hccl where both exist, host = the span
    not covered by any activity. One streaming pass over the tables in start order."""
    spans = []
    for n, v in rk.steps.items():
        lo, hi = step_span(v)
        if hi > lo:
            spans.append((lo, hi, n))
    spans.sort()
    if not spans:
        return
    first, last = spans[0][0], max(sp[1] for sp in spans)
    queries = []
    if F.T_TASK in tables and F.T_COMPUTE in tables:
        queries.append((f"SELECT t.startNs, t.endNs, 0 FROM {F.T_TASK} t JOIN {F.T_COMPUTE} c ON "
                        "c.globalTaskId = t.globalTaskId WHERE t.startNs >= ? AND t.startNs < ? ORDER BY 1", ()))
    elif F.T_TASK in tables:
        queries.append((f"SELECT startNs, endNs, 0 FROM {F.T_TASK} WHERE startNs >= ? AND startNs < ? "
                        "AND taskType IS NOT ? "
                        "ORDER BY 1", (mstx_id,)))
    for table, cls in ((F.T_COMM, 1), (F.T_MEMCPY, 2), (F.T_MEMSET, 2),
                       (F.T_HCCL, 3)):
        if table in tables:
            queries.append((f"SELECT startNs, endNs, {cls} FROM {table} WHERE startNs >= ? AND startNs < ? "
                            "ORDER BY 1", ()))
    streams = [db.execute(q, (first, last) + extra) for q, extra in queries]
    acc = {}
    i = 0
    for a, b, cls in heapq.merge(*streams):
        while i < len(spans) and spans[i][1] <= a:
            i += 1
        if i == len(spans):
            break
        lo, hi, n = spans[i]
        if a < lo or b is None:
            continue
        b = min(b, hi)
        if b <= a:
            continue
        st = acc.setdefault(n, [0, 0, 0, 0, 0, None, None])   # 4 class sums, covered, open union
        st[cls] += b - a
        if st[5] is not None and a <= st[6]:
            st[6] = max(st[6], b)
        else:
            if st[5] is not None:
                st[4] += st[6] - st[5]
            st[5], st[6] = a, b
    for lo, hi, n in spans:
        st = acc.get(n, [0, 0, 0, 0, 0, None, None])
        covered = st[4] + (st[6] - st[5] if st[5] is not None else 0)
        comm = st[1] or st[3]
        transfer = st[3] if st[1] and st[3] and st[3] < st[1] else comm
        rk.samples[n] = (hi - lo, st[0], comm, st[2], max(hi - lo - covered, 0), comm - transfer, transfer)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    if not n:
        return 0
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _lane_list(lanes):
    # lanes: key -> index; device lanes first, host after
    return [k for k, _ in sorted(lanes.items(), key=lambda kv: kv[1])]


def _lane(lanes, key):
    if key not in lanes:
        lanes[key] = len(lanes)
    return lanes[key]


def _db_timeline(db, lo, hi, lanes, events):
    """The rows of every device and host table overlapping [lo, hi] as timeline events (each
    table capped at TIMELINE_CAP + 1 rows); returns whether a cap was hit."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    s = dict(db.execute(f"SELECT id, value FROM {F.T_STRINGS}")) if F.T_STRINGS in tables else {}
    cap = TIMELINE_CAP + 1
    capped = False

    def rows(table, cols, closed=False):
        nonlocal capped
        if table not in tables:
            return []
        cmp = ("<=", ">=") if closed else ("<", ">")
        got = db.execute(f"SELECT startNs, endNs, {cols} FROM {table} WHERE startNs {cmp[0]} ? AND endNs {cmp[1]} ? "
                         "ORDER BY startNs LIMIT ?", (hi, lo, cap)).fetchall()
        capped |= len(got) >= cap
        return got

    task = rows(F.T_TASK, "deviceId, streamId, globalTaskId, taskType")
    names = {}
    if task and F.T_COMPUTE in tables:
        ids = sorted({r[4] for r in task})
        for i in range(0, len(ids), 900):
            chunk = ids[i:i + 900]
            q = f"SELECT globalTaskId, name FROM {F.T_COMPUTE} WHERE globalTaskId IN (%s)" % ",".join("?" * len(chunk))
            names.update(db.execute(q, chunk).fetchall())
    for st, en, dev, stream, gid, typ in task:
        if gid in names:
            nm = s.get(names[gid], f"#{names[gid]}")
            events.append([_lane(lanes, f"device {dev} stream {stream}"), st, en - st, nm, "compute"])
        else:
            events.append([_lane(lanes, f"device {dev} markers"), st, en - st, s.get(typ, "task"), "marker"])
    for st, en, dev, op in rows(F.T_COMM, "deviceId, opType"):
        events.append([_lane(lanes, f"device {dev} communication"), st, en - st, s.get(op, f"#{op}"),
                       "communication"])
    for table, label in ((F.T_MEMCPY, F.K_MEMCPY), (F.T_MEMSET, F.K_MEMSET)):
        for st, en, dev, stream in rows(table, "deviceId, streamId"):
            events.append([_lane(lanes, f"device {dev} stream {stream}"), st, en - st, label, "memcpy"])
    for st, en, gtid, nm in rows(F.T_API, "globalTid, name"):
        events.append([_lane(lanes, f"host tid {gtid & 0xffffffff} API"), st, en - st, s.get(nm, f"#{nm}"), "api"])
    for st, en, gtid, nm in rows(F.T_MSTX, "globalTid, message", closed=True):
        events.append([_lane(lanes, f"host tid {(gtid or 0) & 0xffffffff} markers"), st, en - st,
                       s.get(nm, f"#{nm}"), "marker"])
    return capped


def _jsonl_timeline(path, lo, hi, lanes, events):
    capped = False
    try:
        fh = open(path, "r", encoding="utf-8", errors="replace")
    except OSError:
        return False
    with fh:
        for raw in fh:
            try:
                d = json.loads(raw)
                st, en, kind = d["startNs"], d["endNs"], d["kind"]
            except (ValueError, TypeError, KeyError):
                continue
            if not (isinstance(st, int) and isinstance(en, int)) or st > hi or en < lo:
                continue
            if len(events) > TIMELINE_CAP:
                capped = True
                break
            if kind in F.API_KINDS:
                lane, cat = f"host tid {d.get('threadId')} API", "api"
            elif kind == F.K_MARKER and d.get("sourceKind") != F.SOURCE_DEVICE:
                lane, cat = f"host tid {d.get('threadId')} markers", "marker"
            elif kind == F.K_COMM:
                lane, cat = f"device {d.get('deviceId')} communication", "communication"
            else:
                cat = {F.K_KERNEL: "compute", F.K_MEMCPY: "memcpy", F.K_MEMSET: "memcpy",
                       F.K_MARKER: "marker"}.get(kind)
                if cat is None:
                    continue
                where = "markers" if cat == "marker" else f"stream {d.get('streamId')}"
                lane = f"device {d.get('deviceId')} {where}"
            events.append([_lane(lanes, lane), st, en - st, str(d.get("name") or kind), cat])
    return capped


def _trace_timeline(rel, events, want_step, strict=False):
    steps = {}
    pnames, tnames = {}, {}
    for e in events:
        if not isinstance(e, dict):
            continue
        if e.get("ph") == "M" and isinstance(e.get("args"), dict):
            if e.get("name") == "process_name":
                pnames[e.get("pid")] = str(e["args"].get("name"))
            elif e.get("name") == "thread_name":
                tnames[(e.get("pid"), e.get("tid"))] = str(e["args"].get("name"))
        elif e.get("ph") == "X":
            n = F.step_number(e.get("name", ""))
            if n is not None and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float)):
                steps[n] = (e["ts"], e["ts"] + e["dur"])
    if not steps or (strict and want_step not in steps):
        return None
    if want_step not in steps:
        order = sorted(steps, key=lambda n: (steps[n][1] - steps[n][0], n))
        want_step = order[(len(order) - 1) // 2]
    lo_us, hi_us = steps[want_step]
    lanes, out = {}, []
    capped = False
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        ts, dur = e.get("ts"), e.get("dur")
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)):
            continue
        if ts > hi_us or ts + dur < lo_us:
            continue
        if len(out) >= TIMELINE_CAP:
            capped = True
            break
        pid, tid = e.get("pid"), e.get("tid")
        label = f"{pnames.get(pid, pid)} / {tnames.get((pid, tid), tid)}"
        cat = str(e.get("cat") or "")
        low = (cat + " " + label).lower()
        kind = ("marker" if F.step_number(e.get("name", "")) is not None or F.TRACE_ANNOTATION in cat.lower() else
                "communication" if ("comm" in low or "hccl" in low or "nccl" in low) else
                "memcpy" if "memcpy" in low or "memset" in low else
                "api" if ("api" in low or "cpu" in low or "runtime" in low or "host" in low) else "compute")
        out.append([_lane(lanes, label), int(round(ts * 1000)), int(round(dur * 1000)), str(e.get("name", "")), kind])
    out.sort(key=lambda x: x[1])
    return {"source": f"trace {rel}", "step": want_step, "window": [int(round(lo_us * 1000)), int(round(hi_us * 1000))],
            "lanes": _lane_list(lanes), "events": out, "capped": capped}


