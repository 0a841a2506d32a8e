"""`python -m msmonitor report DIR [-o report.html]`: one self-contained HTML page (inline SVG,
CSS and a tiny self-check script; no network) from the DB / JSONL files, Chrome trace-event JSON
files and plugin logs of a run. Aggregation happens in SQLite (GROUP BY) or while streaming JSONL;
drawn points are capped; partial data becomes a note in the page, never an exception.
Every string from the data is escaped (html.escape, or JSON with `<`, `>`, `&` escaped)."""
import concurrent.futures
import glob
import gzip
import html
import json
import math
import os
import re
import sqlite3
import sys
import time
import urllib.parse

MAX_POINTS = 2000        # per step-time series (bucket means beyond that)
MAX_SERIES = 64          # step-time lines drawn (slow ranks first)
TOP_N = 25               # kernels/ops listed
TIMELINE_CAP = 4000      # events drawn in the step timeline
TRACE_MAX_BYTES = 256 * 1024 * 1024   # on disk (a .gz may hold more)
LOG_TAIL_BYTES = 4 * 1024 * 1024

# Slow-rank rule: the one of `dyno steps` (src/contract/slowrank.c through the extension's
# slow_ranks(), docs/cluster.md §4) with its default parameters, on per-step samples built here
# the way the plugin's step summaries are (docs/report.md).
SLOW_RULE = {"threshold": 0.10, "mad_k": 3.0, "min_steps": 3, "min_ranks": 3}

MARKER_CONN_BASE = 4000000000
STEP_RE = re.compile(r"^(?:step |ProfilerStep#)(\d+)$")
DTYPE_BYTES = {0: 1, 1: 2, 2: 4, 3: 2, 4: 4, 5: 8, 6: 8, 7: 1, 8: 2, 9: 4, 10: 8, 11: 2, 12: 16,
               14: 1, 15: 1, 16: 1, 17: 1}
DTYPE_NAMES = {0: "INT8", 1: "INT16", 2: "INT32", 3: "FP16", 4: "FP32", 5: "INT64", 6: "UINT64",
               7: "UINT8", 8: "UINT16", 9: "UINT32", 10: "FP64", 11: "BFP16", 12: "INT128", 14: "HIF8",
               15: "FP8E4M3", 16: "FP8E5M2", 17: "FP8E8M0"}
DTYPE_BY_NAME = {v: k for k, v in DTYPE_NAMES.items()}
MEMCPY_KINDS = {0: "UNKNOWN", 1: "HTOH", 2: "HTOD", 3: "DTOH", 4: "DTOD", 5: "DEFAULT"}
API_TYPES = {10000: "API/NodeAPI", 20000: "AclAPI", 5000: "RuntimeAPI"}
FILE_RE = re.compile(r"^msmonitor_(\d+)_(\d+)_(-?\d+)\.(db|jsonl)$")
STATS_RE = re.compile(r"MsptiMonitor session stats: (.*)$")
FILTER_RE = re.compile(r"MsptiMonitor filter: '(.*)'$")
RANKID_RE = re.compile(r"rankid: (-?\d+)")
RING_RE = re.compile(r"RingBuffer full (\d+) times")
KINDS = ("compute", "communication", "memcpy", "idle")
KIND_COLORS = {"compute": "#4878d0", "communication": "#ee854a", "memcpy": "#6acc64", "idle": "#d0d0d0"}
PALETTE = ("#4878d0", "#6acc64", "#956cb4", "#8c613c", "#dc7ec0", "#797979", "#d5bb67", "#82c6e2",
           "#1f77b4", "#2ca02c", "#9467bd", "#17becf")
SLOW_COLOR = "#d62728"


class Rank:
    """Everything aggregated for one rank (all its files merged)."""

    def __init__(self, rank):
        self.rank = rank
        self.hosts = set()
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


def _kernel_add(d, name, count, total, lo, hi):
    cur = d.get(name)
    if cur is None:
        d[name] = [count, total, lo, hi]
    else:
        cur[0] += count
        cur[1] += total
        cur[2] = min(cur[2], lo)
        cur[3] = max(cur[3], hi)


class Report:
    """The files found under `root`, read into per-rank aggregates, plus the notes on what was
    missing or damaged. scan() reads; the other methods derive the verdicts the page draws."""

    def __init__(self, root, want_rank=None, want_step=None):
        self.root = root
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
        logs = []
        for p in paths:
            if not os.path.isfile(p):
                continue
            base = os.path.basename(p)
            m = FILE_RE.match(base)
            if m:
                pid, rank, ext = int(m.group(1)), int(m.group(3)), m.group(4)
                self.pid_rank[pid] = rank
                (self.db_paths if ext == "db" else self.jsonl_paths).setdefault(rank, []).append(p)
                self.rank(rank).pids.add(pid)
            elif base.endswith((".json", ".json.gz")):
                self._read_trace(p)
            elif base.endswith(".log"):
                logs.append(p)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(min(os.cpu_count() or 1, 4), 2)) as self.pool:
            for rank, ps in sorted(self.db_paths.items()):
                for p in ps:
                    self._read_db(p, self.rank(rank))
        for rank, ps in sorted(self.jsonl_paths.items()):
            for p in ps:
                self._read_jsonl(p, self.rank(rank))
            self._jsonl_steps(self.rank(rank))
        for p in logs:
            self._read_log(p)
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
        have_strings = "STRING_IDS" in tables
        fnote = "" if have_strings else "no STRING_IDS (killed rank or session not stopped)"
        self._file(path, "DB", fnote)
        s = dict(db.execute("SELECT id, value FROM STRING_IDS")) if have_strings else {}
        if not have_strings:
            self.note(f"{rel}: STRING_IDS is missing (the rank was killed or the session never stopped); "
                      "names are shown as '#<id>' and steps are numbered in marker order.")

        def name(i):
            v = s.get(i)
            return v if v is not None else f"#{i}"

        if "SESSION_TIME_INFO" not in tables:
            self.note(f"{rel}: no SESSION_TIME_INFO, so the session never stopped (the rank was killed, or it "
                      "is still running): only the batches committed so far are shown.")
        mstx = [i for i, v in s.items() if v == "MsTx"]
        mstx_id = mstx[0] if mstx else None
        if "HOST_INFO" in tables:
            for (hn,) in db.execute("SELECT hostName FROM HOST_INFO"):
                if hn:
                    rk.hosts.add(str(hn))
        if "SESSION_TIME_INFO" in tables:
            for st, en in db.execute("SELECT startTimeNs, endTimeNs FROM SESSION_TIME_INFO"):
                if st is not None and (rk.session[0] is None or st < rk.session[0]):
                    rk.session[0] = st
                if en is not None and (rk.session[1] is None or en > rk.session[1]):
                    rk.session[1] = en
        if "META_DATA" in tables:
            for k, v in db.execute("SELECT name, value FROM META_DATA"):
                if k is None or str(k).startswith("SCHEMA_VERSION"):
                    continue
                if k == "parallel_group_info":
                    self.parallel.add(str(v))
                    continue
                self.meta.setdefault(str(k), set()).add(str(v))
                if any(w in str(k).lower() for w in ("stat", "count", "kept", "drop", "filter", "cpu")):
                    rk.counters.setdefault(f"DB META_DATA ({rel})", {})[str(k)] = str(v)

        # The full-table aggregates (kernels, APIs) run on their own connections in worker threads (the
        # sqlite3 module releases the GIL while SQLite works) while this thread does the rest.
        bg = {}
        if "TASK" in tables and "COMPUTE_TASK_INFO" in tables:
            # Kernels are the TASK rows with a COMPUTE_TASK_INFO row: the per-name GROUP BY also
            # gives the compute total and the window (no second pass over TASK).
            bg["kern"] = self._bg(path, "SELECT c.name, COUNT(*), SUM(t.endNs - t.startNs), "
                                  "MIN(t.endNs - t.startNs), MAX(t.endNs - t.startNs), MIN(t.startNs), MAX(t.endNs) "
                                  "FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId "
                                  "GROUP BY c.name")
        elif "TASK" in tables:
            # No COMPUTE_TASK_INFO: one pass, no sort; kernels are the rows that are not markers.
            bg["task"] = self._bg(path, "SELECT SUM(CASE WHEN taskType IS ?1 THEN 0 ELSE endNs - startNs END), "
                                  "SUM(taskType IS NOT ?1), MIN(CASE WHEN taskType IS ?1 THEN NULL ELSE startNs END), "
                                  "MAX(CASE WHEN taskType IS ?1 THEN NULL ELSE endNs END) FROM TASK", (mstx_id,))
        if "CANN_API" in tables:
            bg["api"] = self._bg(path, "SELECT name, type, COUNT(*), SUM(endNs - startNs) FROM CANN_API GROUP BY 1, 2")

        # Device step markers: TASK rows of type MsTx, matched to host ranges by connectionId.
        dev_marker = {}
        if "TASK" in tables and mstx_id is not None:
            for conn, st, en in db.execute(
                    "SELECT connectionId, startNs, endNs FROM TASK WHERE taskType = ?", (mstx_id,)):
                dev_marker[conn] = (st, en)
            if dev_marker:
                rk.kinds.add("Marker")
        if "MSTX_EVENTS" in tables:
            if have_strings:
                rows = db.execute(
                    "SELECT message, startNs, endNs, connectionId FROM MSTX_EVENTS WHERE eventType = 2 AND "
                    "message IN (SELECT id FROM STRING_IDS WHERE value LIKE 'step %' "
                    "OR value LIKE 'ProfilerStep#%') ORDER BY startNs")
            else:
                rows = db.execute("SELECT NULL, startNs, endNs, connectionId FROM MSTX_EVENTS "
                                  "WHERE eventType = 2 ORDER BY startNs")
            order = 0
            for msg, st, en, conn in rows:
                order += 1
                if msg is None:
                    n = order
                else:
                    m = STEP_RE.match(s.get(msg, ""))
                    if not m:
                        continue
                    n = int(m.group(1))
                d = dev_marker.get(conn)
                rk.steps[n] = [en - st, (d[1] - d[0]) if d else None, st, en,
                               d[0] if d else None, d[1] if d else None]
            if db.execute("SELECT 1 FROM MSTX_EVENTS LIMIT 1").fetchone():
                rk.kinds.add("Marker")
            if rk.steps:
                try:
                    _db_step_samples(db, tables, mstx_id, rk)
                except sqlite3.Error as e:
                    self.note(f"{rel}: per-step compute / communication split failed ({e}); step time only.")
        if "COMMUNICATION_OP" in tables:
            for op, grp, dt, n, total, elems, lo, hi in db.execute(
                    "SELECT opType, groupName, dataType, COUNT(*), SUM(endNs - startNs), SUM(count), "
                    "MIN(startNs), MAX(endNs) FROM COMMUNICATION_OP GROUP BY 1, 2, 3"):
                elems = int(elems or 0)
                _add(rk.comm, (name(op), name(grp), DTYPE_NAMES.get(dt, "INVALID_TYPE")),
                     (n, total or 0, elems, elems * DTYPE_BYTES.get(dt, 0)))
                rk.busy["communication"] += total or 0
                rk.widen(lo, hi)
                rk.kinds.add("Communication")
        if "MSMONITOR_HCCL" in tables:
            hccl_total = 0
            for nm, cm, n, total, bw, lo, hi in db.execute(
                    "SELECT name, commName, COUNT(*), SUM(endNs - startNs), SUM(bandWidth), MIN(startNs), "
                    "MAX(endNs) FROM MSMONITOR_HCCL GROUP BY 1, 2"):
                _add(rk.hccl, (name(nm), name(cm)), (n, total or 0, bw or 0.0))
                hccl_total += total or 0
                rk.widen(lo, hi)
                rk.kinds.add("Hccl")
            if not rk.comm:      # Hccl and Communication describe the same collectives
                rk.busy["communication"] += hccl_total
        for table, label in (("MSMONITOR_MEMCPY", "MemCpy"), ("MSMONITOR_MEMSET", "MemSet")):
            if table not in tables:
                continue
            col = "copyKind" if label == "MemCpy" else "NULL"
            for kind, n, total, nbytes, lo, hi in db.execute(
                    f"SELECT {col}, COUNT(*), SUM(endNs - startNs), SUM(bytes), MIN(startNs), MAX(endNs) "
                    f"FROM {table} GROUP BY 1"):
                key = f"MemCpy {MEMCPY_KINDS.get(kind, kind)}" if label == "MemCpy" else "MemSet"
                _add(rk.copies, key, (n, total or 0, int(nbytes or 0)))
                rk.busy["memcpy"] += total or 0
                rk.widen(lo, hi)
                rk.kinds.add(label)
        if "MSMONITOR_MEMORY" in tables and db.execute("SELECT 1 FROM MSMONITOR_MEMORY LIMIT 1").fetchone():
            rk.kinds.add("Memory")
        for key, fut in bg.items():
            try:
                rows = fut.result()
            except sqlite3.Error as e:
                self.note(f"{rel}: an aggregate over {'CANN_API' if key == 'api' else 'TASK'} failed ({e}).")
                continue
            if key == "task":
                total, n, lo, hi = rows[0]
                if n:
                    rk.busy["compute"] += total or 0
                    rk.widen(lo, hi)
                    rk.kinds.add("Kernel")
            elif key == "kern":
                for nm, n, total, lo, hi, first, last in rows:
                    _kernel_add(rk.kernels, name(nm), n, total or 0, lo or 0, hi or 0)
                    rk.busy["compute"] += total or 0
                    rk.widen(first, last)
                    rk.kinds.add("Kernel")
            else:
                for nm, typ, n, total in rows:
                    _add(rk.api, (name(nm), API_TYPES.get(typ, str(typ))), (n, total or 0))
                    rk.kinds.add(API_TYPES.get(typ, "API"))

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
        m = FILE_RE.match(os.path.basename(path))
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
                d = devs.get(mid)
                rk.steps[n] = [en - st, (d[1] - d[0]) if d else None, st, en,
                               d[0] if d else None, d[1] if d else None]
        rk.jsonl_markers = {}

    def _jsonl_line(self, d, rk, host_marker, dev_marker):
        kind = d.get("kind")
        st, en = d.get("startNs"), d.get("endNs")
        dur = (en - st) if isinstance(st, int) and isinstance(en, int) else 0
        if kind == "Kernel":
            _kernel_add(rk.kernels, str(d["name"]), 1, dur, dur, dur)
            rk.busy["compute"] += dur
            rk.widen(st, en)
        elif kind == "Communication":
            dt = str(d.get("dataType", "INVALID_TYPE"))
            elems = int(d.get("count") or 0)
            _add(rk.comm, (str(d["name"]), str(d.get("commName", "")), dt),
                 (1, dur, elems, elems * DTYPE_BYTES.get(DTYPE_BY_NAME.get(dt, -1), 0)))
            rk.busy["communication"] += dur
            rk.widen(st, en)
        elif kind == "Hccl":
            _add(rk.hccl, (str(d["name"]), str(d.get("commName", ""))), (1, dur, float(d.get("bandWidth") or 0)))
            rk.widen(st, en)
        elif kind in ("MemCpy", "MemSet"):
            key = f"MemCpy {d.get('copyKind', 'UNKNOWN')}" if kind == "MemCpy" else "MemSet"
            _add(rk.copies, key, (1, dur, int(d.get("bytes") or 0)))
            rk.busy["memcpy"] += dur
            rk.widen(st, en)
        elif kind in ("API", "AclAPI", "NodeAPI", "RuntimeAPI"):
            _add(rk.api, (str(d["name"]), kind), (1, dur))
        elif kind == "Marker":
            m = STEP_RE.match(str(d.get("name", "")))
            if m:
                if d.get("sourceKind") == "Device":
                    dev_marker[d.get("id")] = (st, en)
                else:
                    host_marker[d.get("id")] = (int(m.group(1)), st, en)
        elif kind == "parallel_group_info":
            self.parallel.add(str(d.get("value")))
        elif kind == "rank_device_map":
            pass
        elif isinstance(kind, str) and ("stat" in kind.lower() or "counter" in kind.lower()):
            rk.counters.setdefault(f"JSONL {kind}", {}).update(
                {str(k): str(v) for k, v in d.items() if k != "kind"})
        if isinstance(kind, str) and kind not in ("parallel_group_info", "rank_device_map"):
            rk.kinds.add(kind)

    # ---------------------------------------------------------------- traces, logs
    def _read_trace(self, path):
        rel = os.path.relpath(path, self.root)
        try:
            size = os.path.getsize(path)
            if size > TRACE_MAX_BYTES:
                self._file(path, "trace", "too large, skipped")
                self.note(f"{rel}: trace larger than {TRACE_MAX_BYTES >> 20} MiB; not read.")
                return
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rb") as fh:
                data = json.load(fh)
        except (OSError, ValueError, EOFError) as e:
            self._file(path, "json", "not a readable JSON trace")
            self.note(f"{rel}: not readable as JSON ({type(e).__name__}); skipped.")
            return
        events = data.get("traceEvents") if isinstance(data, dict) else data
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

    def _read_log(self, path):
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if size > LOG_TAIL_BYTES:
                    fh.seek(size - LOG_TAIL_BYTES)
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            return
        if "MsptiMonitor" not in text:
            return
        m = re.search(r"\.(\d+)\.log$", path)
        rank = self.pid_rank.get(int(m.group(1))) if m else None
        if rank is None:
            mr = RANKID_RE.search(text)
            rank = int(mr.group(1)) if mr else None
        found = 0
        rel = os.path.relpath(path, self.root)
        rk = self.rank(rank if rank is not None else -1)
        for line in text.splitlines():
            mf = FILTER_RE.search(line)
            if mf:   # the plugin logs each filter it applies ("" = no filter)
                self.meta.setdefault("filter", set()).add(mf.group(1) or "(none)")
                continue
            ms = STATS_RE.search(line)
            if not ms:
                continue
            found += 1
            kv = dict(p.split("=", 1) for p in ms.group(1).split() if "=" in p)
            rk.counters[f"log {rel} #{found}"] = kv
        # Older plugins have no stats line, but log their drops.
        drops = {}
        ring = [int(x) for x in RING_RE.findall(text)]
        if ring:
            drops["jsonl_ring_full"] = str(sum(ring))
        exhausted = text.count("Buffer allocation exhausted")
        if exhausted:
            drops["buffer_exhausted_lines"] = str(exhausted)
        if drops:
            rk.counters[f"log {rel} drops"] = drops
        self._file(path, "plugin log", f"{found} session stats line(s)")

    # ---------------------------------------------------------------- analysis
    def step_basis(self):
        """'device' (the device span of the step marker: the work of the step, which a slow rank's
        peers do not inherit by waiting in the collective) when every step of every rank has one,
        else 'host' (the host marker range, as the framework's step() sees it)."""
        with_steps = [rk for rk in self.ranks.values() if rk.steps]
        # A step cut by the session stop may miss its device part: tolerate 10% (at least 1).
        for rk in with_steps:
            missing = sum(1 for v in rk.steps.values() if v[1] is None)
            if missing > max(1, len(rk.steps) // 10) or missing == len(rk.steps):
                return "host"
        return "device" if with_steps else "host"

    def step_value(self, v):
        return v[1] if self.basis == "device" else v[0]

    def points(self, rk):
        """[[step, ns]] in step order on the chosen basis (steps without a value left out)."""
        return [[n, self.step_value(rk.steps[n])] for n in sorted(rk.steps) if self.step_value(rk.steps[n]) is not None]

    def values(self, rk):
        return [p[1] for p in self.points(rk)]

    def slow_ranks(self):
        """(slow ranks, per-rank verdicts, result) by the shared rule; sets the step basis."""
        self.basis = self.step_basis()
        self.slow_result = None
        ranks = []
        for r, rk in sorted(self.ranks.items()):
            if r is None or not rk.steps:
                continue
            rows = []
            for n in sorted(rk.steps):
                smp = rk.samples.get(n)
                if smp is None:
                    v = rk.steps[n]
                    lo = min(x for x in (v[2], v[4]) if x is not None)
                    hi = max(x for x in (v[3], v[5]) if x is not None)
                    smp = (max(hi - lo, 0), 0, 0, 0, 0, 0, 0)   # JSONL: step time only (the wall rule)
                rows.append((n,) + tuple(int(x) for x in smp))
            ranks.append((int(r), rows))
        if not ranks:
            return [], {}, None
        from ._ipcmonitor_C import IPCMonitor_C  # pylint: disable=import-outside-toplevel
        if IPCMonitor_C is None or not hasattr(IPCMonitor_C, "slow_ranks"):
            self.note("the IPCMonitor_C extension is not available: no slow-rank verdict.")
            return [], {}, None
        res = IPCMonitor_C.slow_ranks(ranks, **SLOW_RULE)
        self.slow_result = res
        detail = {s["rank"]: s for s in res["slow"]}
        return sorted(detail), detail, res

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
        v = self.ranks[rank].steps[step]
        lo = min(x for x in (v[2], v[4]) if x is not None)
        hi = max(x for x in (v[3], v[5]) if x is not None)
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


def _db_step_samples(db, tables, mstx_id, rk):
    """Per step, what the plugin's step summary holds (docs/cluster.md §1): the span from the
    first to the last timestamp of the step range (host or device part), and the device
    activity starting inside it — kernels, Communication (whole op), Hccl (transfer), memcpy +
    memset — summed per class, wait = Communication − Hccl where both exist, host = the span
    not covered by any activity. One streaming pass over the tables in start order."""
    import heapq  # pylint: disable=import-outside-toplevel
    spans = []
    for n, v in rk.steps.items():
        lo = min(x for x in (v[2], v[4]) if x is not None)
        hi = max(x for x in (v[3], v[5]) if x is not None)
        if hi > lo:
            spans.append((lo, hi, n))
    spans.sort()
    if not spans:
        return
    first, last = spans[0][0], max(sp[1] for sp in spans)
    queries = []
    if "TASK" in tables and "COMPUTE_TASK_INFO" in tables:
        queries.append(("SELECT t.startNs, t.endNs, 0 FROM TASK t JOIN COMPUTE_TASK_INFO c ON "
                        "c.globalTaskId = t.globalTaskId WHERE t.startNs >= ? AND t.startNs < ? ORDER BY 1", ()))
    elif "TASK" in tables:
        queries.append(("SELECT startNs, endNs, 0 FROM TASK WHERE startNs >= ? AND startNs < ? AND taskType IS NOT ? "
                        "ORDER BY 1", (mstx_id,)))
    for table, cls in (("COMMUNICATION_OP", 1), ("MSMONITOR_MEMCPY", 2), ("MSMONITOR_MEMSET", 2),
                       ("MSMONITOR_HCCL", 3)):
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


def _median(xs):
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
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    s = dict(db.execute("SELECT id, value FROM STRING_IDS")) if "STRING_IDS" in tables else {}
    cap = TIMELINE_CAP + 1
    capped = False
    if "TASK" in tables:
        rows = db.execute("SELECT startNs, endNs, deviceId, streamId, globalTaskId, taskType FROM TASK "
                          "WHERE startNs < ? AND endNs > ? ORDER BY startNs LIMIT ?", (hi, lo, cap)).fetchall()
        capped |= len(rows) >= cap
        names = {}
        if rows and "COMPUTE_TASK_INFO" in tables:
            ids = sorted({r[4] for r in rows})
            for i in range(0, len(ids), 900):
                chunk = ids[i:i + 900]
                q = "SELECT globalTaskId, name FROM COMPUTE_TASK_INFO WHERE globalTaskId IN (%s)" % \
                    ",".join("?" * len(chunk))
                names.update(db.execute(q, chunk).fetchall())
        for st, en, dev, stream, gid, typ in rows:
            nm = s.get(names[gid], f"#{names[gid]}") if gid in names else s.get(typ, "task")
            if gid in names:
                events.append([_lane(lanes, f"device {dev} stream {stream}"), st, en - st, nm, "compute"])
            else:
                events.append([_lane(lanes, f"device {dev} markers"), st, en - st, nm, "marker"])
    if "COMMUNICATION_OP" in tables:
        rows = db.execute("SELECT startNs, endNs, deviceId, opType FROM COMMUNICATION_OP "
                          "WHERE startNs < ? AND endNs > ? ORDER BY startNs LIMIT ?", (hi, lo, cap)).fetchall()
        capped |= len(rows) >= cap
        for st, en, dev, op in rows:
            events.append([_lane(lanes, f"device {dev} communication"), st, en - st, s.get(op, f"#{op}"),
                           "communication"])
    for table, label in (("MSMONITOR_MEMCPY", "MemCpy"), ("MSMONITOR_MEMSET", "MemSet")):
        if table in tables:
            rows = db.execute(f"SELECT startNs, endNs, deviceId, streamId FROM {table} "
                              "WHERE startNs < ? AND endNs > ? ORDER BY startNs LIMIT ?", (hi, lo, cap)).fetchall()
            capped |= len(rows) >= cap
            for st, en, dev, stream in rows:
                events.append([_lane(lanes, f"device {dev} stream {stream}"), st, en - st, label, "memcpy"])
    if "CANN_API" in tables:
        rows = db.execute("SELECT startNs, endNs, globalTid, name FROM CANN_API "
                          "WHERE startNs < ? AND endNs > ? ORDER BY startNs LIMIT ?", (hi, lo, cap)).fetchall()
        capped |= len(rows) >= cap
        for st, en, gtid, nm in rows:
            events.append([_lane(lanes, f"host tid {gtid & 0xffffffff} API"), st, en - st, s.get(nm, f"#{nm}"), "api"])
    if "MSTX_EVENTS" in tables:
        rows = db.execute("SELECT startNs, endNs, globalTid, message FROM MSTX_EVENTS "
                          "WHERE startNs <= ? AND endNs >= ? ORDER BY startNs LIMIT ?", (hi, lo, cap)).fetchall()
        capped |= len(rows) >= cap
        for st, en, gtid, nm in rows:
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
            if kind in ("API", "AclAPI", "NodeAPI", "RuntimeAPI"):
                lane, cat = f"host tid {d.get('threadId')} API", "api"
            elif kind == "Marker" and d.get("sourceKind") != "Device":
                lane, cat = f"host tid {d.get('threadId')} markers", "marker"
            elif kind == "Communication":
                lane, cat = f"device {d.get('deviceId')} communication", "communication"
            else:
                cat = {"Kernel": "compute", "MemCpy": "memcpy", "MemSet": "memcpy", "Marker": "marker"}.get(kind)
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
            m = STEP_RE.match(str(e.get("name", "")))
            if m and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float)):
                steps[int(m.group(1))] = (e["ts"], e["ts"] + e["dur"])
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
        kind = ("marker" if STEP_RE.match(str(e.get("name", ""))) or "user_annotation" in cat.lower() else
                "communication" if ("comm" in low or "hccl" in low or "nccl" in low) else
                "memcpy" if "memcpy" in low or "memset" in low else
                "api" if ("api" in low or "cpu" in low or "runtime" in low or "host" in low) else "compute")
        out.append([_lane(lanes, label), int(round(ts * 1000)), int(round(dur * 1000)), str(e.get("name", "")), kind])
    out.sort(key=lambda x: x[1])
    return {"source": f"trace {rel}", "step": want_step, "window": [int(round(lo_us * 1000)), int(round(hi_us * 1000))],
            "lanes": _lane_list(lanes), "events": out, "capped": capped}


# -------------------------------------------------------------------- rendering
def esc(x):
    return html.escape(str(x), quote=True)


def _json_for_script(obj):
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _fmt_ns(ns):
    ns = float(ns or 0)
    if ns >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def _fmt_bytes(b):
    b = float(b or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if b < 1024 or unit == "TiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return ""


def _nice_ticks(lo, hi, n=5):
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    t = math.floor(lo / step) * step
    out = []
    while t <= hi + step * 1e-9:
        if t >= lo - step * 1e-9:
            out.append(t)
        t += step
    return out


def _downsample(points, cap):
    """Bucket means of consecutive points (x = bucket's first step, y = mean)."""
    if len(points) <= cap:
        return points, False
    size = math.ceil(len(points) / cap)
    out = []
    for i in range(0, len(points), size):
        b = points[i:i + size]
        out.append([b[0][0], sum(p[1] for p in b) / len(b)])
    return out, True


def svg_line_chart(series, width=920, height=320, ylabel="ms"):
    """series: [{label, points [[x, y_ns]], slow, color}]"""
    ml, mr, mt, mb = 64, 16, 12, 36
    xs = [p[0] for s in series for p in s["points"]]
    ys = [p[1] / 1e6 for s in series for p in s["points"]]
    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'role="img" aria-label="step time per rank">']
    if not xs:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no steps</text></svg>')
        return "".join(out)
    x0, x1 = min(xs), max(xs)
    y0, y1 = 0.0, max(ys) * 1.05 or 1.0
    if x1 == x0:
        x1 = x0 + 1
    pw, ph = width - ml - mr, height - mt - mb

    def X(x):
        return ml + (x - x0) / (x1 - x0) * pw

    def Y(y):
        return mt + ph - (y - y0) / (y1 - y0) * ph

    for t in _nice_ticks(y0, y1):
        out.append(f'<line class="grid" x1="{ml}" x2="{width - mr}" y1="{Y(t):.1f}" y2="{Y(t):.1f}"/>'
                   f'<text class="tick" x="{ml - 6}" y="{Y(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    for t in _nice_ticks(x0, x1, 8):
        out.append(f'<text class="tick" x="{X(t):.1f}" y="{height - mb + 16}" text-anchor="middle">{t:g}</text>')
    out.append(f'<line class="axis" x1="{ml}" x2="{ml}" y1="{mt}" y2="{mt + ph}"/>'
               f'<line class="axis" x1="{ml}" x2="{width - mr}" y1="{mt + ph}" y2="{mt + ph}"/>'
               f'<text class="tick" x="{ml + pw / 2}" y="{height - 4}" text-anchor="middle">step</text>'
               f'<text class="tick" x="12" y="{mt + ph / 2}" transform="rotate(-90 12 {mt + ph / 2})" '
               f'text-anchor="middle">{esc(ylabel)}</text>')
    for s in sorted(series, key=lambda s: s["slow"]):
        pts = " ".join(f"{X(p[0]):.1f},{Y(p[1] / 1e6):.1f}" for p in s["points"])
        w = 2.5 if s["slow"] else 1.2
        out.append(f'<polyline fill="none" stroke="{s["color"]}" stroke-width="{w}" points="{pts}">'
                   f'<title>{esc(s["label"])}</title></polyline>')
        if len(s["points"]) == 1:
            p = s["points"][0]
            out.append(f'<circle cx="{X(p[0]):.1f}" cy="{Y(p[1] / 1e6):.1f}" r="3" fill="{s["color"]}"/>')
    out.append("</svg>")
    return "".join(out)


def svg_bars(rows, width=920, bar_h=16, color="#4878d0"):
    """rows: [(label, value, text)] horizontal bars scaled to the largest value."""
    if not rows:
        return ""
    ml, mr = 300, 170
    height = len(rows) * (bar_h + 4) + 8
    vmax = max(r[1] for r in rows) or 1
    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    for i, (label, v, text) in enumerate(rows):
        y = 4 + i * (bar_h + 4)
        w = max((width - ml - mr) * v / vmax, 1)
        short = label if len(label) <= 44 else label[:42] + "…"
        out.append(f'<text class="lbl" x="{ml - 6}" y="{y + bar_h - 4}" text-anchor="end">{esc(short)}'
                   f'<title>{esc(label)}</title></text>'
                   f'<rect x="{ml}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}">'
                   f'<title>{esc(label)}: {esc(text)}</title></rect>'
                   f'<text class="val" x="{ml + w + 6:.1f}" y="{y + bar_h - 4}">{esc(text)}</text>')
    out.append("</svg>")
    return "".join(out)


def svg_shares(shares, width=920, bar_h=20):
    ranks = list(shares)            # drawn in the caller's order
    ml, mr = 90, 16
    height = len(ranks) * (bar_h + 6) + 30
    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    pw = width - ml - mr
    for i, r in enumerate(ranks):
        sh = shares[r]
        total = sum(sh[k + "_ns"] for k in KINDS) or 1
        y = 4 + i * (bar_h + 6)
        x = ml
        out.append(f'<text class="lbl" x="{ml - 6}" y="{y + bar_h - 5}" text-anchor="end">rank {esc(r)}</text>')
        for k in KINDS:
            w = pw * sh[k + "_ns"] / total
            if w <= 0:
                continue
            pct = 100.0 * sh[k + "_ns"] / total
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{KIND_COLORS[k]}">'
                       f'<title>rank {esc(r)} {k}: {pct:.1f}% ({esc(_fmt_ns(sh[k + "_ns"]))})</title></rect>')
            label = f"{k} {pct:.0f}%" if w > 130 else f"{pct:.0f}%" if w > 34 else ""
            if label:
                out.append(f'<text class="in" x="{x + 4:.1f}" y="{y + bar_h - 6}">{label}</text>')
            x += w
    ly = height - 12
    for j, k in enumerate(KINDS):
        out.append(f'<rect x="{ml + j * 140}" y="{ly - 10}" width="12" height="12" fill="{KIND_COLORS[k]}"/>'
                   f'<text class="tick" x="{ml + j * 140 + 16}" y="{ly}">{k}</text>')
    out.append("</svg>")
    return "".join(out)


TL_COLORS = {"compute": "#4878d0", "communication": "#ee854a", "memcpy": "#6acc64", "api": "#956cb4",
             "marker": "#bbbbbb"}


def svg_timeline(tl, width=1100, lane_h=18):
    lanes = tl["lanes"]
    ml, mr, mt = 230, 34, 22
    height = mt + len(lanes) * (lane_h + 4) + 8
    lo, hi = tl["window"]
    span = max(hi - lo, 1)
    pw = width - ml - mr
    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    for t in _nice_ticks(0, span / 1e6, 8):
        x = ml + t * 1e6 / span * pw
        out.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{mt - 4}" y2="{height - 4}"/>'
                   f'<text class="tick" x="{x:.1f}" y="{mt - 8}" text-anchor="middle">{t:g} ms</text>')
    for i, name in enumerate(lanes):
        y = mt + i * (lane_h + 4)
        out.append(f'<text class="lbl" x="{ml - 6}" y="{y + lane_h - 5}" text-anchor="end">{esc(name)}</text>')
    for lane, st, dur, name, cat in tl["events"]:
        a = max(st, lo)
        b = min(st + dur, hi)
        x = ml + (a - lo) / span * pw
        w = max((b - a) / span * pw, 0.5)
        y = mt + lane * (lane_h + 4)
        out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{lane_h}" fill="{TL_COLORS.get(cat, "#888")}">'
                   f'<title>{esc(name)} · {esc(_fmt_ns(dur))}</title></rect>')
    out.append("</svg>")
    return "".join(out)


CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1160px;
color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:6px 10px;margin:6px 0}
.muted{color:#777} .slow{color:#d62728;font-weight:600}
svg.chart{display:block;background:#fff;border:1px solid #eee;margin:6px 0}
svg .grid{stroke:#eee} svg .axis{stroke:#999} svg .tick{font-size:11px;fill:#555} svg .lbl{font-size:11px;fill:#333}
svg .val{font-size:11px;fill:#333} svg .in{font-size:11px;fill:#fff}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:18px;height:4px;vertical-align:middle;margin-right:4px}
#selfcheck{float:right;font-size:12px;padding:2px 8px;border-radius:4px;background:#eee}
"""

SELF_CHECK = """
(function(){
  var el=document.getElementById('selfcheck'), bad=[];
  try{
    var data=JSON.parse(document.getElementById('report-data').textContent);
    var svgs=document.querySelectorAll('svg');
    for(var i=0;i<svgs.length;i++){
      var r=svgs[i].getBoundingClientRect(); if(!(r.width>0&&r.height>0)) bad.push('svg#'+i);
    }
    if(svgs.length!==data.svg_count) bad.push('svg count '+svgs.length+'!='+data.svg_count);
  }catch(e){bad.push(String(e));}
  var ok=bad.length===0;
  document.documentElement.setAttribute('data-selfcheck', ok?'ok':'fail: '+bad.join(', '));
  if(el){
    el.textContent=ok?'self-check ok':'self-check FAILED: '+bad.join(', ');
    el.style.background=ok?'#dff0d8':'#f2dede';
  }
  if(ok) document.title='[ok] '+document.title;
})();
"""


def _table(headers, rows, numeric=()):
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f'<td class="n">{esc(c)}</td>' if i in numeric else f"<td>{esc(c)}</td>"
                                    for i, c in enumerate(r)) + "</tr>")
    out.append("</table>")
    return "".join(out)


class _Page:
    """What the sections build: HTML parts, the JSON blob of every drawn number, the SVG count
    the self-check expects, and the list of caps applied."""

    def __init__(self, rep):
        self.rep = rep
        self.data = {"version": 1, "notes": rep.notes, "caps": {"max_points": MAX_POINTS, "max_series": MAX_SERIES,
                                                                 "top_n": TOP_N, "timeline_events": TIMELINE_CAP}}
        self.parts = []
        self.svg_count = 0
        self.capped = []


def _section_header(pg):
    """What was collected: kinds, filter, duration, hosts, ranks, sources, files."""
    root = pg.rep.root
    all_kinds = sorted(set().union(*(rk.kinds for rk in pg.rep.ranks.values())) if pg.rep.ranks else [])
    hosts = sorted(set().union(*(rk.hosts for rk in pg.rep.ranks.values())) if pg.rep.ranks else [])
    sess = [rk.session for rk in pg.rep.ranks.values() if rk.session[0] is not None and rk.session[1] is not None]
    windows = [rk.window for rk in pg.rep.ranks.values() if rk.window[0] is not None]
    if sess:
        dur_ns = max(s[1] for s in sess) - min(s[0] for s in sess)
        dur_text = f"{_fmt_ns(dur_ns)} (SESSION_TIME_INFO, earliest start to latest stop)"
    elif windows:
        dur_ns = max(w[1] for w in windows) - min(w[0] for w in windows)
        dur_text = f"{_fmt_ns(dur_ns)} (first to last device record; no SESSION_TIME_INFO)"
    else:
        dur_ns, dur_text = None, "not recorded"
    filt = sorted(pg.rep.meta.get("filter", set()) | pg.rep.meta.get("FILTER", set()))
    pg.data["header"] = {"kinds": all_kinds, "hosts": hosts, "ranks": sorted(pg.rep.ranks), "duration_ns": dur_ns,
                         "files": [f[0] for f in pg.rep.files], "filter": filt or None}
    hdr = [("Directory", root), ("Kinds collected", ", ".join(all_kinds) or "none found"),
           ("Filter", ", ".join(filt) if filt else "not recorded (the DB/JSONL formats do not store it; the plugin logs it)"),
           ("Duration", dur_text), ("Hosts", ", ".join(hosts) or "not recorded (JSONL has no host table)"),
           ("Ranks", ", ".join(str(r) for r in sorted(pg.rep.ranks)) or "none"),
           ("Sources", ", ".join(sorted(set().union(*(rk.sources for rk in pg.rep.ranks.values()))))
            if pg.rep.ranks else "none" + (" (traces only)" if pg.rep.traces else "")),
           ("Files", f"{len(pg.rep.files)} (listed at the end)")]
    if pg.rep.parallel:
        hdr.append(("parallel_group_info", "; ".join(sorted(pg.rep.parallel))[:2000]))
    pg.parts.append(_table(["", ""], hdr))


def _section_steps(pg):
    """Step time per rank: the series (capped), the slow-rank verdict and its table."""
    slow, detail, res = pg.rep.slow_ranks()
    steps = {}
    series = []
    ranked = sorted((r for r, rk in pg.rep.ranks.items() if rk.steps), key=lambda r: (r not in slow, r))
    for i, r in enumerate(ranked):
        rk = pg.rep.ranks[r]
        pts = pg.rep.points(rk)
        drawn, cap = _downsample(pts, MAX_POINTS)
        host = [rk.steps[n][0] for n in rk.steps]
        dev = [rk.steps[n][1] for n in rk.steps if rk.steps[n][1] is not None]
        steps[str(r)] = {"n": len(pts), "points": drawn, "capped": cap, "median_ns": _median([p[1] for p in pts]),
                         "host_median_ns": _median(host), "device_median_ns": _median(dev) if dev else None,
                         "slow": r in slow, "drawn": i < MAX_SERIES}
        if cap:
            pg.capped.append(f"rank {r}: {len(pts)} steps drawn as {len(drawn)} bucket means")
        if i < MAX_SERIES:
            series.append({"label": f"rank {r}" + (" (slow)" if r in slow else ""), "points": drawn,
                           "slow": r in slow, "color": SLOW_COLOR if r in slow else PALETTE[i % len(PALETTE)]})
    if len(ranked) > MAX_SERIES:
        pg.capped.append(f"{len(ranked)} ranks have steps; {MAX_SERIES} lines drawn (slow ranks first)")
    pg.data["steps"] = steps
    pg.data["step_basis"] = pg.rep.basis
    pg.data["slow_ranks"] = slow
    pg.data["slow_rule"] = dict(SLOW_RULE, detail={str(r): v for r, v in detail.items()},
                                judged_steps=res["judged_steps"] if res else 0)

    pg.parts.append("<h2>Step time per rank</h2>")
    if series:
        pg.parts.append(svg_line_chart(series))
        pg.svg_count += 1
        leg = "".join(f'<span><i style="background:{s["color"]}"></i>{esc(s["label"])}</span>' for s in series)
        pg.parts.append(f'<div class="legend">{leg}</div>')
        rows = []
        for r in ranked:
            st = steps[str(r)]
            dm = st["device_median_ns"]
            d = detail.get(r)
            verdict = (f"{d['cause']} since step {d['since_step']}, costs the job {d['cost_ms']:.2f} ms/step"
                       if d else "—")
            rows.append((f"rank {r}" + (" — SLOW" if r in slow else ""), st["n"], _fmt_ns(st["host_median_ns"]),
                         _fmt_ns(dm) if dm is not None else "—", verdict))
        pg.parts.append(_table(["rank", "steps", "median step (host)", "median step (device)", "slow: cause"],
                               rows, numeric=(1, 2, 3)))
        basis = ("device span of the <code>step N</code> marker (device start to device end of the range)"
                 if pg.rep.basis == "device" else "host duration of the <code>step N</code> marker range "
                 "(not every step has a device part)")
        pg.parts.append(f'<p class="muted">Step time drawn = {basis}. '
                        f'Slow rule: the one of <code>dyno steps</code> (docs/cluster.md §4): per step judged '
                        f'when ≥ {SLOW_RULE["min_ranks"]} ranks have it, a rank\'s wall time, or its compute, '
                        f'host or transfer time, above the ranks\' median by more than '
                        f'{SLOW_RULE["threshold"]:.0%} of the step and {SLOW_RULE["mad_k"]:g}·1.4826·MAD, on the '
                        f'newest {SLOW_RULE["min_steps"]}+ consecutive judged steps, at a cost to the job.'
                        + (f' <span class="slow">Slow: {esc(", ".join("rank " + str(r) for r in slow))}.</span>'
                           if slow else " No slow rank.") + "</p>")
    else:
        pg.parts.append('<p class="note">No <code>step N</code> marker ranges found (collect the Marker kind and call '
                        'step() each iteration to get per-step times).</p>')


def _section_kernels(pg):
    """Top kernels by total device time over all ranks."""
    kern = {}
    for rk in pg.rep.ranks.values():
        for n, v in rk.kernels.items():
            _kernel_add(kern, n, *v)
    top = sorted(kern.items(), key=lambda kv: (-kv[1][1], kv[0]))[:TOP_N]
    pg.data["kernels"] = [{"name": n, "count": v[0], "total_ns": v[1], "avg_ns": v[1] / v[0] if v[0] else 0,
                           "min_ns": v[2], "max_ns": v[3]} for n, v in top]
    pg.data["kernels_distinct"] = len(kern)
    pg.parts.append("<h2>Top kernels by total device time (all ranks)</h2>")
    if top:
        pg.parts.append(svg_bars([(n, v[1], f"{_fmt_ns(v[1])} · {v[0]}×") for n, v in top]))
        pg.svg_count += 1
        pg.parts.append(_table(["kernel", "count", "total", "avg", "min", "max"],
                               [(n, v[0], _fmt_ns(v[1]), _fmt_ns(v[1] / v[0]), _fmt_ns(v[2]), _fmt_ns(v[3]))
                             for n, v in top], numeric=(1, 2, 3, 4, 5)))
        if len(kern) > TOP_N:
            pg.capped.append(f"kernels: top {TOP_N} of {len(kern)} distinct names shown")
    else:
        pg.parts.append('<p class="note">No kernel records (Kernel kind not collected, or filtered out).</p>')


def _section_comm(pg):
    """Communication ops with sizes, Hccl, memory copies, host APIs."""
    comm, hccl, copies = {}, {}, {}
    for rk in pg.rep.ranks.values():
        for k, v in rk.comm.items():
            _add(comm, k, v)
        for k, v in rk.hccl.items():
            _add(hccl, k, v)
        for k, v in rk.copies.items():
            _add(copies, k, v)
    crow = sorted(comm.items(), key=lambda kv: (-kv[1][1], kv[0]))
    pg.data["comm"] = [{"name": k[0], "group": k[1], "dataType": k[2], "count": v[0], "total_ns": v[1],
                        "elements": v[2], "bytes": v[3]} for k, v in crow]
    pg.data["hccl"] = [{"name": k[0], "comm": k[1], "count": v[0], "total_ns": v[1],
                        "avg_bandwidth": v[2] / v[0] if v[0] else 0} for k, v in sorted(hccl.items())]
    pg.data["copies"] = [{"name": k, "count": v[0], "total_ns": v[1], "bytes": v[2]} for k, v in sorted(copies.items())]
    pg.parts.append("<h2>Communication and memory copies</h2>")
    if crow:
        bars = [(f"{k[0]} [{k[1]}]", v[1], f"{_fmt_ns(v[1])} · {_fmt_bytes(v[3])}") for k, v in crow[:TOP_N]]
        pg.parts.append(svg_bars(bars, color=KIND_COLORS["communication"]))
        pg.svg_count += 1
        pg.parts.append(_table(["op", "group", "dataType", "count", "total", "avg", "elements", "bytes", "avg size"],
                               [(k[0], k[1], k[2], v[0], _fmt_ns(v[1]), _fmt_ns(v[1] / v[0]), v[2], v[3],
                              _fmt_bytes(v[3] / v[0])) for k, v in crow], numeric=(3, 4, 5, 6, 7, 8)))
    else:
        pg.parts.append('<p class="note">No Communication records.</p>')
    if hccl:
        pg.parts.append(_table(["Hccl op", "comm", "count", "total", "avg bandwidth"],
                               [(d["name"], d["comm"], d["count"], _fmt_ns(d["total_ns"]), f'{d["avg_bandwidth"]:.3f}')
                             for d in pg.data["hccl"]], numeric=(2, 3, 4)))
    if copies:
        pg.parts.append(_table(["copy", "count", "total", "bytes"],
                               [(d["name"], d["count"], _fmt_ns(d["total_ns"]), _fmt_bytes(d["bytes"]))
                                for d in pg.data["copies"]],
                               numeric=(1, 2, 3)))
    api = {}
    for rk in pg.rep.ranks.values():
        for k, v in rk.api.items():
            _add(api, k, v)
    if api:
        arow = sorted(api.items(), key=lambda kv: (-kv[1][1], kv[0]))[:TOP_N]
        pg.data["api"] = [{"name": k[0], "type": k[1], "count": v[0], "total_ns": v[1]} for k, v in arow]
        pg.parts.append("<h3>Top host APIs</h3>")
        pg.parts.append(_table(["API", "kind", "count", "total", "avg"],
                               [(k[0], k[1], v[0], _fmt_ns(v[1]), _fmt_ns(v[1] / v[0])) for k, v in arow],
                               numeric=(2, 3, 4)))


def _section_shares(pg):
    """Device time by kind (compute, communication, memcpy, idle) per rank."""
    shares = {}
    for r, rk in sorted(pg.rep.ranks.items()):
        if rk.window[0] is None:
            continue
        win = rk.window[1] - rk.window[0]
        busy = sum(rk.busy.values())
        shares[str(r)] = {"compute_ns": rk.busy["compute"], "communication_ns": rk.busy["communication"],
                          "memcpy_ns": rk.busy["memcpy"], "idle_ns": max(win - busy, 0), "window_ns": win}
    pg.data["shares"] = shares
    pg.parts.append("<h2>Device time by kind per rank</h2>")
    if shares:
        slow = set(pg.data.get("slow_ranks", []))
        drawn = sorted(shares, key=lambda r: (int(r) not in slow, int(r)))[:MAX_SERIES]
        if len(shares) > MAX_SERIES:
            pg.capped.append(f"device time by kind: {MAX_SERIES} of {len(shares)} ranks drawn (slow ranks first)")
        pg.parts.append(svg_shares({r: shares[r] for r in drawn}))
        pg.svg_count += 1
        pg.parts.append('<p class="muted">Window = first to last device record of the rank. Kind times are sums of '
                        'record durations over all streams; idle = window − their sum (0 when streams overlap by '
                        'more than the idle time).</p>')
    else:
        pg.parts.append('<p class="note">No device records (Kernel, Communication, MemCpy, MemSet) to split.</p>')


def _section_timeline(pg):
    """The timeline of one step of one rank (trace file, else DB/JSONL rows)."""
    rank, step = pg.rep.pick_rank_step()
    tl = pg.rep.timeline(rank, step)
    pg.parts.append("<h2>Timeline of one step</h2>")
    if tl and tl["events"]:
        if "step" in tl:
            step = tl["step"]
        pg.data["timeline"] = {"rank": rank, "step": step, "source": tl["source"], "window": tl["window"],
                               "lanes": tl["lanes"], "events": tl["events"], "capped": tl["capped"]}
        span = _fmt_ns(tl["window"][1] - tl["window"][0])
        pg.parts.append(f'<p>Rank {esc("unknown" if rank is None else rank)}, step {esc(step)} ({esc(span)}), '
                        f'from {esc(tl["source"])}; {len(tl["events"])} events. Use <code>--rank R --step N</code> '
                        f'to choose another (default: the median-length step of rank 0, or of the first rank).</p>')
        pg.parts.append(svg_timeline(tl))
        pg.svg_count += 1
        leg = "".join(f'<span><i style="background:{c}"></i>{k}</span>' for k, c in TL_COLORS.items())
        pg.parts.append(f'<div class="legend">{leg}</div>')
        zoom = _device_zoom(tl)
        if zoom:
            pg.data["timeline"]["zoom_window"] = zoom["window"]
            pg.parts.append(f'<p>Zoomed to the device activity of the step '
                            f'({esc(_fmt_ns(zoom["window"][1] - zoom["window"][0]))}, '
                            f'{len(zoom["events"])} events):</p>')
            pg.parts.append(svg_timeline(zoom))
            pg.svg_count += 1
        if tl["capped"]:
            pg.capped.append(f"timeline: first {TIMELINE_CAP} events of the step drawn")
    else:
        pg.data["timeline"] = None
        why = ("rank %s has no step %s" % (rank, step)) if rank is not None and step is not None else "no steps"
        pg.parts.append(f'<p class="note">No timeline: {esc(why)} (neither a trace file nor DB/JSONL rows for it).</p>')


def _device_zoom(tl):
    """The step's timeline cut to its device activity when that covers under 30 % of the step
    (a step mostly spent waiting on the host), else None."""
    dev = [e for e in tl["events"] if e[4] in ("compute", "communication", "memcpy")]
    if not dev:
        return None
    lo, hi = tl["window"]
    a = max(min(e[1] for e in dev), lo)
    b = min(max(e[1] + e[2] for e in dev), hi)
    if b <= a or (b - a) >= 0.3 * (hi - lo):
        return None
    pad = (b - a) // 50
    a, b = max(a - pad, lo), min(b + pad, hi)
    events = [e for e in tl["events"] if e[1] < b and e[1] + e[2] > a]
    used = sorted({e[0] for e in events})
    remap = {old: i for i, old in enumerate(used)}
    return {"window": [a, b], "lanes": [tl["lanes"][i] for i in used],
            "events": [[remap[e[0]]] + e[1:] for e in events]}


def _section_counters(pg):
    """The session counters, or a note that they were not recorded."""
    counters = {str(r): rk.counters for r, rk in sorted(pg.rep.ranks.items()) if rk.counters}
    pg.data["counters"] = counters
    pg.parts.append("<h2>Session counters</h2>")
    if counters:
        # The stop line's counters as columns (one row per session), anything else as text.
        stats = [(r, src, kv) for r, srcs in counters.items() for src, kv in srcs.items()
                 if "kept" in kv or "consumed" in kv]
        cols = [k for k in STATS_COLUMNS if any(k in kv for _, _, kv in stats)]
        cols += sorted({k for _, _, kv in stats for k in kv} - set(cols))
        if stats:
            pg.parts.append(_table(["rank", "source"] + [c.replace("_", " ") for c in cols],
                                   [(_rank_label(r), src, *(_fmt_counter(c, kv.get(c)) for c in cols))
                                    for r, src, kv in stats], numeric=tuple(range(2, 2 + len(cols)))))
        other = [(_rank_label(r), src, " ".join(f"{k}={v}" for k, v in kv.items()))
                 for r, srcs in counters.items() for src, kv in srcs.items()
                 if "kept" not in kv and "consumed" not in kv]
        if other:
            pg.parts.append(_table(["rank", "source", "counters"], other))
        pg.parts.append('<p class="muted">Records: consumed = read from msPTI; kept / filtered = passed / rejected '
                        'by the filter; before start = ended before the session started; dropped * = lost (queue '
                        'full, buffers declined, write failures); cpu ns = the consumer threads\' CPU time.</p>')
    else:
        pg.parts.append('<p class="note">Session counters (records kept, filtered, dropped, consumer CPU) were not '
                        'recorded: no <code>MsptiMonitor session stats</code> line in a plugin log under this '
                        'directory and no counters in the DB/JSONL files. Point MSMONITOR_LOG_PATH below the run '
                        'directory to include them.</p>')


def _rank_label(r):
    return "rank unknown" if str(r) == "-1" else f"rank {r}"


STATS_COLUMNS = ("consumed", "kept", "filtered", "before_start", "dropped_queue", "dropped_declined",
                 "dropped_write", "written", "bytes", "cpu_ns")


def _fmt_counter(key, v):
    if v is None:
        return "—"
    if key == "cpu_ns" and str(v).isdigit():
        return _fmt_ns(int(v))
    if key == "bytes" and str(v).isdigit():
        return _fmt_bytes(int(v))
    return v


def _section_files(pg):
    """The files read, each with its note."""
    pg.parts.append("<h2>Files</h2>")
    pg.parts.append(_table(["file", "type", "bytes", "note"], [(f[0], f[1], f[2], f[3]) for f in pg.rep.files],
                           numeric=(2,)) if pg.rep.files else '<p class="note">No files.</p>')


def build(root, want_rank=None, want_step=None):
    """Returns (html_text, data_dict)."""
    t0 = time.monotonic()
    rep = Report(root, want_rank, want_step)
    rep.scan()
    rep.slow_ranks()           # sets the step basis the header and sections use
    pg = _Page(rep)
    for section in (_section_header, _section_steps, _section_kernels, _section_comm, _section_shares,
                    _section_timeline, _section_counters, _section_files):
        section(pg)
    data, capped_notes = pg.data, pg.capped
    data["capped"] = capped_notes
    data["svg_count"] = pg.svg_count
    data["generated_s"] = round(time.monotonic() - t0, 3)
    notes_html = "".join(f'<p class="note">{esc(n)}</p>' for n in rep.notes)
    caps_html = ('<p class="muted">Capped for drawing: ' + esc("; ".join(capped_notes)) + ".</p>") if capped_notes \
        else '<p class="muted">Nothing was capped: every step and event is drawn.</p>'
    title = f"msmonitor report — {os.path.basename(os.path.abspath(root))}"
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f'<span id="selfcheck">self-check pending</span><h1>{esc(title)}</h1>'
            f'<p class="muted">Generated by <code>python -m msmonitor report</code> in {data["generated_s"]} s; '
            f'opens offline (no network).</p>'
            + notes_html + caps_html + "".join(pg.parts)
            + f'<script type="application/json" id="report-data">{_json_for_script(data)}</script>'
            + f"<script>{SELF_CHECK}</script></body></html>\n")
    return page, data


def write(root, out_path, want_rank=None, want_step=None):
    page, data = build(root, want_rank, want_step)
    tmp = out_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, out_path)
    return data


def main(args):
    if not os.path.isdir(args.dir):
        print(f"report: {args.dir}: not a directory (give the --log-file directory of the run)", file=sys.stderr)
        return 2
    out = args.output or os.path.join(args.dir, "report.html")
    try:
        data = write(args.dir, out, args.rank, args.step)
    except OSError as e:
        print(f"report: cannot write {out}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"report: {out} ({len(data['header']['ranks'])} rank(s), {len(data['header']['files'])} file(s), "
          f"{data['generated_s']} s)")
    for n in data["notes"]:
        print(f"report: note: {n}")
    return 0
