"""`python -m msmonitor report` end to end: simulator runs (3 ranks, one slowed down) exported as
DB and as JSONL through the real dynolog/dyno/plugin, with and without a Chrome trace file; the
numbers behind the page's charts (its JSON blob) must equal aggregates computed here
independently with SQL / by reading the JSONL lines. Also partial data (empty, killed-rank,
truncated, garbage) and hostile names."""
import collections
import glob
import gzip
import json
import os
import re
import sqlite3
import subprocess
import tempfile

from conftest import BUILD, run_dyno
from plugin_util import Workload, data_lines, wait_registered
from waits import wait_until

KINDS = "Marker,Kernel,AclAPI,Communication,MemCpy,MemSet"
SLOW_RANK = 2


def _report(d, *extra):
    out = os.path.join(d, "report.html")
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python", "pkg"))
    r = subprocess.run(["/usr/bin/python3", "-m", "msmonitor", "report", d, "-o", out] + list(extra),
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(out, encoding="utf-8") as f:
        page = f.read()
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert m, page[:2000]
    return page, json.loads(m.group(1))


def _run(daemon, export, tmp, extra=()):
    """Three mssim-train ranks at 20 steps/s (rank 2 at 4x durations), one session."""
    out = os.path.join(tmp, "run")
    ws = []
    try:
        for r in range(3):
            wd = os.path.join(tmp, f"w{r}")
            os.makedirs(wd)
            scale = "4" if r == SLOW_RANK else "1"
            env = {"RANK": str(r), "LOCAL_RANK": str(r), "MSSIM_CHECK_PRELOAD": "0"}   # MemCpy without preload
            ws.append(Workload(daemon, wd, extra_env=env, args=["--rate", "20", "--scale", scale, "--layers", "2"]))
        for w in ws:
            wait_registered(daemon, w.p.pid)
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
                     "--mspti-activity-kind", KINDS, "--log-file", out, "--export-type", export, *extra)
        assert r.returncode == 0, r.stderr + r.stdout
        for w in ws:
            w.wait_plugin_log("MsptiMonitor start successfully")
        # two report ticks of every rank at the daemon: each has steps and batches behind it
        for w in ws:
            wait_until(lambda: sum(1 for d in data_lines(daemon) if d.get("kind") == "PluginStats"
                                   and d.get("pid") == w.p.pid) >= 2, 60, f"two report ticks of pid {w.p.pid}",
                       diag=lambda: daemon.log()[-3000:], alive=w)
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop")
        assert r.returncode == 0, r.stderr + r.stdout
        for w in ws:
            w.wait_plugin_log("MsptiMonitor stop successfully")
    finally:
        for w in ws:
            w.stop()
    return out


def _session_ends(out, ext):
    """rank -> (filter, counters) of each file's session end, read here independently of the
    report: META_DATA rows of the DB, the session_stats line of the JSONL."""
    ends = {}
    for p in glob.glob(os.path.join(out, "**", f"*.{ext}"), recursive=True):
        rank = int(re.search(rf"_(-?\d+)\.{ext}$", p).group(1))
        if ext == "db":
            db = sqlite3.connect(p)
            meta = dict(db.execute("SELECT name, value FROM META_DATA"))
            db.close()
            if "session_stats" in meta:
                ends[rank] = (meta["filter"], json.loads(meta["session_stats"]))
            continue
        with open(p) as fh:
            for line in fh:
                d = json.loads(line)
                if d.get("kind") == "session_stats":
                    ends[rank] = (d["filter"], d["stats"])
    return ends


def _check_counters(data, out, ext):
    """Every rank's counters and filter come from its file's session end (not from a log)."""
    ends = _session_ends(out, ext)
    assert sorted(ends) == [0, 1, 2], ends
    assert data["header"]["filter"] == ["(none)"]
    for r, (filt, st) in ends.items():
        assert filt == "" and st["kept"] > 0, st
        (src, kv), = data["counters"][str(r)].items()
        assert ext.upper() in src.upper(), src
        assert kv["consumed"] == str(st["consumed"]) and kv["kept"] == str(st["kept"]), (kv, st)
        assert kv["bytes"] == str(st["bytes_written"]), (kv, st)


def _db_truth(out):
    """Independent aggregates per rank from the DB files, with SQL."""
    steps, kernels, comm, compute = {}, collections.defaultdict(lambda: [0, 0]), {}, {}
    for p in glob.glob(os.path.join(out, "**", "*.db"), recursive=True):
        rank = int(re.search(r"_(-?\d+)\.db$", p).group(1))
        db = sqlite3.connect(p)
        # Step time = the device span of the step marker (TASK row of type MsTx, same connectionId).
        steps[rank] = {int(v[5:]): en - st for v, st, en in db.execute(
            "SELECT s.value, t.startNs, t.endNs FROM MSTX_EVENTS m JOIN STRING_IDS s ON s.id = m.message "
            "JOIN TASK t ON t.connectionId = m.connectionId AND t.taskType = "
            "(SELECT id FROM STRING_IDS WHERE value = 'MsTx') WHERE m.eventType = 2 AND s.value LIKE 'step %'")}
        for name, n, total in db.execute(
                "SELECT s.value, COUNT(*), SUM(t.endNs - t.startNs) FROM TASK t JOIN COMPUTE_TASK_INFO c "
                "ON c.globalTaskId = t.globalTaskId JOIN STRING_IDS s ON s.id = c.name GROUP BY s.value"):
            kernels[name][0] += n
            kernels[name][1] += total
        compute[rank] = db.execute(
            "SELECT SUM(endNs - startNs) FROM TASK WHERE taskType NOT IN "
            "(SELECT id FROM STRING_IDS WHERE value = 'MsTx')").fetchone()[0]
        for name, n, total, elems in db.execute(
                "SELECT s.value, COUNT(*), SUM(c.endNs - c.startNs), SUM(c.count) FROM COMMUNICATION_OP c "
                "JOIN STRING_IDS s ON s.id = c.opType GROUP BY s.value"):
            a = comm.setdefault(name, [0, 0, 0])
            a[0] += n
            a[1] += total
            a[2] += int(elems)
        db.close()
    return steps, dict(kernels), comm, compute


def _jsonl_truth(out):
    steps, kernels, comm, compute = {}, collections.defaultdict(lambda: [0, 0]), {}, collections.Counter()
    for p in glob.glob(os.path.join(out, "**", "*.jsonl"), recursive=True):
        rank = int(re.search(r"_(-?\d+)\.jsonl$", p).group(1))
        with open(p) as f:
            for line in f:
                d = json.loads(line)
                if d["kind"] == "Kernel":
                    kernels[d["name"]][0] += 1
                    kernels[d["name"]][1] += d["endNs"] - d["startNs"]
                    compute[rank] += d["endNs"] - d["startNs"]
                elif d["kind"] == "Marker" and d["sourceKind"] == "Device" and d["name"].startswith("step "):
                    steps.setdefault(rank, {})[int(d["name"][5:])] = d["endNs"] - d["startNs"]
                elif d["kind"] == "Communication":
                    a = comm.setdefault(d["name"], [0, 0, 0])
                    a[0] += 1
                    a[1] += d["endNs"] - d["startNs"]
                    a[2] += d["count"]
    return steps, dict(kernels), comm, dict(compute)


def _check(data, truth):
    steps, kernels, comm, compute = truth
    assert sorted(int(r) for r in data["steps"]) == sorted(steps) == [0, 1, 2]
    for r, st in steps.items():
        got = data["steps"][str(r)]
        assert not got["capped"]
        assert got["points"] == [[n, st[n]] for n in sorted(st)]
        assert len(st) >= 5
    # The 4x rank is the slow one, and only it.
    assert data["step_basis"] == "device"
    assert data["slow_ranks"] == [SLOW_RANK]
    top = sorted(kernels.items(), key=lambda kv: (-kv[1][1], kv[0]))[:len(data["kernels"])]
    assert [(k["name"], k["count"], k["total_ns"]) for k in data["kernels"]] == [(n, v[0], v[1]) for n, v in top]
    got_comm = collections.defaultdict(lambda: [0, 0, 0])
    for c in data["comm"]:
        a = got_comm[c["name"]]
        a[0] += c["count"]
        a[1] += c["total_ns"]
        a[2] += c["elements"]
        assert c["bytes"] == c["elements"] * 4          # FP32
    assert dict(got_comm) == comm and comm
    for r, ns in compute.items():
        assert data["shares"][str(r)]["compute_ns"] == ns
        sh = data["shares"][str(r)]
        assert sh["communication_ns"] > 0 and sh["memcpy_ns"] > 0
    assert data["timeline"] and data["timeline"]["rank"] == 0
    # The default step is the median-length step of rank 0.
    st0 = steps[0]
    order = sorted(st0, key=lambda n: (st0[n], n))
    assert data["timeline"]["step"] == order[(len(order) - 1) // 2]
    cats = {e[4] for e in data["timeline"]["events"]}
    assert {"compute", "communication", "marker", "api", "memcpy"} <= cats, cats
    assert sorted(data["header"]["ranks"]) == [0, 1, 2]
    assert {"Kernel", "Marker", "Communication"} <= set(data["header"]["kinds"])


def _write_trace(path, rank):
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "rank0 host"}},
          {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "python <main>"}},
          {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "NPU 0"}}]
    t = 1000.0
    for step in (1, 2, 3):
        dur = 500.0 if step != 2 else 800.0
        ev.append({"ph": "X", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 7, "ts": t, "dur": dur,
                   "cat": "user_annotation"})
        for i in range(4):
            ev.append({"ph": "X", "name": f"aclnnMatMul_{step}_{i}", "pid": 1, "tid": 7, "ts": t + 10 + i * 50,
                       "dur": 20.0, "cat": "cpu_op"})
            ev.append({"ph": "X", "name": f"MatMul_{step}_{i}", "pid": 2, "tid": 0, "ts": t + 40 + i * 50,
                       "dur": 45.5, "cat": "kernel"})
        ev.append({"ph": "X", "name": "hcom_allReduce_", "pid": 2, "tid": 1, "ts": t + 300, "dur": 100.0,
                   "cat": "hccl"})
        t += dur + 100
    with open(path, "w") as f:
        json.dump({"traceEvents": ev, "distributedInfo": {"rank": rank}}, f)


def test_report_db_run(daemon):
    tmp = tempfile.mkdtemp(prefix="mmrep")
    out = _run(daemon, "DB", tmp)
    page, data = _report(out)
    truth = _db_truth(out)
    _check(data, truth)
    assert data["timeline"]["source"] == "DB rows"
    assert data["header"]["hosts"]
    assert data["header"]["duration_ns"] > 0
    _check_counters(data, out, "db")
    assert "Session counters" in page and "were not" not in page
    assert 'id="selfcheck"' in page and "https://" not in page and "http://" not in page
    # Another rank and step by option.
    s1 = sorted(truth[0][1])[1]
    _, d2 = _report(out, "--rank", "1", "--step", str(s1))
    assert d2["timeline"]["rank"] == 1 and d2["timeline"]["step"] == s1
    # With a trace for rank 0 the timeline of a step it holds comes from it.
    _write_trace(os.path.join(out, "trace_rank0.json"), 0)
    _, d3 = _report(out, "--step", "2")
    tl = d3["timeline"]
    assert tl["source"] == "trace trace_rank0.json" and tl["step"] == 2
    assert tl["window"] == [1600000, 2400000]
    names = sorted(e[3] for e in tl["events"])
    assert names == sorted(["ProfilerStep#2", "hcom_allReduce_"] + [f"aclnnMatMul_2_{i}" for i in range(4)]
                           + [f"MatMul_2_{i}" for i in range(4)])
    assert "NPU 0 / 0" in tl["lanes"] and "rank0 host / python <main>" in tl["lanes"]
    assert {e[4] for e in tl["events"]} == {"marker", "api", "compute", "communication"}
    assert [e[2] for e in tl["events"] if e[3] == "MatMul_2_0"] == [45500]
    # Without --step the trace's own median-length step is drawn (#1 and #3 last 500 us, #2 800 us).
    _, d4 = _report(out)
    assert d4["timeline"]["source"] == "trace trace_rank0.json" and d4["timeline"]["step"] == 3
    # A step the trace does not hold comes from the DB rows.
    _, d5 = _report(out, "--step", str(sorted(truth[0][0])[2]))
    assert d5["timeline"]["source"] == "DB rows"
    # The other charts still come from the DB.
    _check(d3 | {"timeline": data["timeline"]}, truth)


def test_report_jsonl_run(daemon):
    tmp = tempfile.mkdtemp(prefix="mmrep")
    # Rotated every 500 lines: a step's host and device marker lines land in different files.
    out = _run(daemon, "Jsonl", tmp, ["--json-rotate-log-lines", "500"])
    assert len(glob.glob(os.path.join(out, "*_0.jsonl"))) > 3
    _, data = _report(out)
    _check(data, _jsonl_truth(out))
    assert data["timeline"]["source"] == "JSONL lines"
    _check_counters(data, out, "jsonl")
    # A truncated last line (a killed writer) becomes a note, the rest is still reported.
    f = sorted(glob.glob(os.path.join(out, "*_1.jsonl")))[-1]
    with open(f, "a") as fh:
        fh.write('{"kind":"Kernel","name":"trunc')
    _, d2 = _report(out)
    assert any("could not be parsed" in n for n in d2["notes"])
    assert d2["kernels"] == data["kernels"]


def _db_with_end(path, rows):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE STRING_IDS (id INTEGER, value TEXT)")
    db.execute("CREATE TABLE META_DATA (name TEXT, value TEXT)")
    db.executemany("INSERT INTO META_DATA VALUES (?, ?)", [("SCHEMA_VERSION", "1.2.0")] + rows)
    db.commit()
    db.close()


def test_report_counters_from_session_end(tmp_path):
    """The counters come from the session end of the files, keyed by the stats line's labels;
    a plugin log next to them is not read."""
    st = {"bytes_written": 4096, "consumed": 10, "cpu_ns": 12345, "filtered": 3, "kept": 7}
    _db_with_end(str(tmp_path / "msmonitor_4242_20260101000000000_5.db"), [("session_stats", json.dumps(st))])
    with open(tmp_path / "msmonitor_4243_20260101000000000_6.jsonl", "w") as f:
        f.write(json.dumps({"filter": "", "kind": "session_stats", "stats": dict(st, kept=8)}) + "\n")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "msmonitor_20260101-000000.4242.log").write_text(
        "I1201 20:07:09.1 1 pipeline.c:278] MsptiMonitor session stats: consumed=99 kept=99\n")
    _, data = _report(str(tmp_path))
    (src, kv), = data["counters"]["5"].items()
    assert src.startswith("DB META_DATA")
    assert kv == {"consumed": "10", "kept": "7", "filtered": "3", "bytes": "4096", "cpu_ns": "12345"}
    (src, kv), = data["counters"]["6"].items()
    assert src == "JSONL session_stats" and kv["kept"] == "8"
    assert data["header"]["filter"] == ["(none)"]
    # A damaged counters value is a note, not an error.
    _db_with_end(str(tmp_path / "msmonitor_4244_20260101000000000_7.db"), [("session_stats", "{not json")])
    _, data = _report(str(tmp_path))
    assert "7" not in data["counters"] and any("session_stats is not a JSON object" in n for n in data["notes"])


def test_report_filter_from_session_end(tmp_path):
    """The filter at stop is a META_DATA row of the DB (a key of the JSONL session end)."""
    _db_with_end(str(tmp_path / "msmonitor_4242_20260101000000000_0.db"),
                 [("filter", "Kernel:MatMul;Communication:AllReduce")])
    page, data = _report(str(tmp_path))
    assert data["header"]["filter"] == ["Kernel:MatMul;Communication:AllReduce"]
    assert "Kernel:MatMul;Communication:AllReduce" in page


def test_report_partial_and_hostile_data(tmp_path):
    d = str(tmp_path)
    # Empty directory: a page with a note, not an error.
    page, data = _report(d)
    assert any("No msmonitor_" in n for n in data["notes"]) and data["timeline"] is None
    assert "not recorded" in page
    # An empty DB file, a garbage DB, a DB without STRING_IDS (killed rank), hostile JSONL names.
    open(os.path.join(d, "msmonitor_1_20260101000000000_0.db"), "wb").close()
    with open(os.path.join(d, "msmonitor_2_20260101000000000_1.db"), "wb") as f:
        f.write(b"this is not sqlite" * 100)
    db = sqlite3.connect(os.path.join(d, "msmonitor_3_20260101000000000_2.db"))
    db.execute("CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, "
               "globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, "
               "taskId INTEGER, modelId INTEGER)")
    db.execute("CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER, blockNum INTEGER, "
               "mixBlockNum INTEGER, taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, "
               "inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER, outputShapes INTEGER, "
               "attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER)")
    db.executemany("INSERT INTO TASK VALUES (?,?,0,?,?,1,1,0,0,0,0)", [(i * 10, i * 10 + 5, i, i) for i in range(50)])
    db.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,0,0,1,0,0,0,0,0,0,0,0,0,0)",
                   [(i % 3, i) for i in range(50)])
    db.commit()
    db.close()
    evil = '</script><script>alert(1)</script><img src=x onerror=alert(2)>'
    with open(os.path.join(d, "msmonitor_4_20260101000000000_3.jsonl"), "w") as f:
        for i in range(6):
            f.write(json.dumps({"kind": "Marker", "sourceKind": "Host", "id": i, "name": f"step {i + 1}",
                                "domain": "default", "startNs": 1000 * i, "endNs": 1000 * i + 900,
                                "processId": 1, "threadId": 1}) + "\n")
            f.write(json.dumps({"kind": "Kernel", "name": evil, "type": evil, "deviceId": 0, "streamId": 0,
                                "correlationId": i, "startNs": 1000 * i + 10, "endNs": 1000 * i + 500}) + "\n")
        f.write('{"kind": "Kern')
    page, data = _report(d)
    assert "<script>alert" not in page and "<img src=x" not in page
    assert page.count("<script") == 2          # the JSON blob and the self-check, nothing else
    assert any("empty" in n for n in data["notes"])
    assert any("could not be opened" in n for n in data["notes"])
    assert any("STRING_IDS is missing" in n for n in data["notes"])
    assert any("could not be parsed" in n for n in data["notes"])
    names = {k["name"]: k for k in data["kernels"]}
    assert names[evil]["count"] == 6 and names["#0"]["count"] == 17
    assert data["timeline"]["rank"] == 3        # rank 3 is the only one with steps
    assert "counters" in data and "not recorded" in page
    # Not a directory / an unwritable output: one line and a non-zero status, no traceback.
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python", "pkg"))
    for argv, rc, text in ((["/nonexistent-run"], 2, "not a directory"),
                           ([d, "-o", "/nonexistent-dir/r.html"], 1, "cannot write")):
        r = subprocess.run(["/usr/bin/python3", "-m", "msmonitor", "report"] + argv, env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == rc and text in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_report_caps_long_runs(tmp_path):
    """30000 steps on one rank: at most 2000 points drawn, and the page says so."""
    p = tmp_path / "msmonitor_9_20260101000000000_0.jsonl"
    with open(p, "w") as f:
        for i in range(30000):
            f.write('{"domain":"default","endNs":%d,"id":%d,"kind":"Marker","name":"step %d","processId":1,'
                    '"sourceKind":"Host","startNs":%d,"threadId":1}\n' % (i * 1000 + 700 + i % 7, i, i + 1, i * 1000))
    page, data = _report(str(tmp_path))
    st = data["steps"]["0"]
    assert st["n"] == 30000 and st["capped"] and len(st["points"]) <= 2000
    assert any("bucket means" in c for c in data["capped"]) and "Capped for drawing" in page


def _committed(out):
    """The session's DB holds committed kernel rows and step markers (read-only, while written)."""
    files = glob.glob(os.path.join(out, "*.db"))
    if not files:
        return False
    try:
        db = sqlite3.connect(f"file:{files[0]}?mode=ro", uri=True)
        try:
            k = db.execute("SELECT count(*) FROM TASK t JOIN COMPUTE_TASK_INFO c "
                           "ON c.globalTaskId = t.globalTaskId").fetchone()[0]
            m = db.execute("SELECT count(*) FROM MSTX_EVENTS").fetchone()[0]
            return k > 0 and m >= 4
        finally:
            db.close()
    except sqlite3.Error:
        return False


def test_report_killed_rank_db(daemon):
    """kill -9 during a DB session: what the plugin committed before the kill (WAL batches; the
    string pool only if the writer keeps it current) is reported, missing parts become notes."""
    import signal
    tmp = tempfile.mkdtemp(prefix="mmrepk")
    out = os.path.join(tmp, "run")
    w = Workload(daemon, tmp, extra_env={"RANK": "0"}, args=["--rate", "20", "--layers", "1"])
    try:
        wait_registered(daemon, w.p.pid)
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
                     "--mspti-activity-kind", "Marker,Kernel", "--log-file", out, "--export-type", "DB")
        assert r.returncode == 0, r.stderr + r.stdout
        w.wait_plugin_log("MsptiMonitor start successfully")
        # killed only once the writer has committed kernels and step markers
        wait_until(lambda: _committed(out), 60, "committed kernel and marker rows",
                   diag=lambda: w.plugin_log()[-3000:], alive=w)
    finally:
        w.stop(signal.SIGKILL)
    (db_path,) = glob.glob(os.path.join(out, "*.db"))
    db = sqlite3.connect(db_path)
    tables = {t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "TASK" in tables and "SESSION_TIME_INFO" not in tables
    n_kernels = db.execute("SELECT count(*) FROM TASK t JOIN COMPUTE_TASK_INFO c "
                           "ON c.globalTaskId = t.globalTaskId").fetchone()[0]
    db.close()
    page, data = _report(out)
    assert data["kernels_distinct"] <= 25 and sum(k["count"] for k in data["kernels"]) == n_kernels > 0
    assert data["steps"]["0"]["n"] > 0 and data["timeline"] and data["timeline"]["events"]
    assert "no SESSION_TIME_INFO" in page and any("session never stopped" in n for n in data["notes"])
    if "STRING_IDS" in tables:
        assert "MatMul" in {k["name"] for k in data["kernels"]}
    else:
        assert any("STRING_IDS is missing" in n for n in data["notes"])
        assert all(k["name"].startswith("#") for k in data["kernels"])
        assert data["step_basis"] == "host"


def _synthetic_ranks(d, n, slow, factor, steps=8):
    for r in range(n):
        with open(d / f"msmonitor_{100 + r}_20260101000000000_{r}.jsonl", "w") as f:
            for i in range(steps):
                dur = int(1000 * (factor if r == slow else 1)) + (r * 7 + i * 13) % 40   # ±2 % jitter
                t = i * 10000
                f.write(json.dumps({"kind": "Marker", "sourceKind": "Host", "id": i, "name": f"step {i + 1}",
                                    "domain": "default", "startNs": t, "endNs": t + dur, "processId": 1,
                                    "threadId": 1}) + "\n")


def test_report_slow_rule_small_runs(tmp_path):
    """The rule of dyno steps: 3 ranks: 1.3x is slow, 1.05x is not (the 10 % floor); 4 even ranks:
    none; 2 slow steps: too few (3 consecutive needed); 2 ranks: no step is judged (3 needed)."""
    cases = [(3, 1.3, 8, [1]), (3, 1.05, 8, []), (4, 1.0, 8, []), (3, 2.0, 2, []), (2, 2.0, 8, [])]
    for i, (n, factor, steps, want) in enumerate(cases):
        d = tmp_path / f"c{i}"
        d.mkdir()
        _synthetic_ranks(d, n, 1, factor, steps=steps)
        _, data = _report(str(d))
        assert data["slow_ranks"] == want, (n, factor, steps, data["slow_rule"])


def test_report_many_ranks(tmp_path):
    """80 ranks, rank 57 at 1.5x: the rule flags exactly it, at most 64 lines and share bars are
    drawn (slow ranks first), and the page says so."""
    for r in range(80):
        with open(tmp_path / f"msmonitor_{100 + r}_20260101000000000_{r}.jsonl", "w") as f:
            for i in range(8):
                dur = (1500 if r == 57 else 1000) + (r * 7 + i * 13) % 40   # ±2 % jitter
                t = i * 10000
                f.write(json.dumps({"kind": "Marker", "sourceKind": "Host", "id": i, "name": f"step {i + 1}",
                                    "domain": "default", "startNs": t, "endNs": t + dur, "processId": 1,
                                    "threadId": 1}) + "\n")
                f.write(json.dumps({"kind": "Kernel", "name": "MatMul", "type": "KERNEL_AICORE", "deviceId": r % 8,
                                    "streamId": 0, "correlationId": i, "startNs": t + 5, "endNs": t + dur - 5}) + "\n")
    page, data = _report(str(tmp_path))
    assert data["slow_ranks"] == [57]
    assert sum(1 for s in data["steps"].values() if s["drawn"]) == 64 and data["steps"]["57"]["drawn"]
    assert any("64 lines drawn" in c for c in data["capped"])
    assert any("64 of 80 ranks drawn" in c for c in data["capped"])
    assert len(data["shares"]) == 80
    assert page.count("<polyline") == 64


def test_report_trace_only(tmp_path):
    """Only trace files (as nputrace will write): the timeline comes from the trace, a broken or
    unrelated JSON file is a note or ignored."""
    _write_trace(str(tmp_path / "trace_rank0.json"), 0)
    (tmp_path / "config.json").write_text('{"a": 1}')
    (tmp_path / "broken.json").write_text('{"traceEvents": [')
    page, data = _report(str(tmp_path))
    assert data["timeline"]["source"] == "trace trace_rank0.json" and data["timeline"]["step"] == 3
    assert any("broken.json: not readable" in n for n in data["notes"])
    assert data["steps"] == {} and "No <code>step N</code> marker ranges" in page
    # Compressed traces too; --rank picks the trace of that rank.
    _write_trace(str(tmp_path / "t.json"), 1)
    with open(tmp_path / "t.json", "rb") as src, gzip.open(tmp_path / "trace_rank1.json.gz", "wb") as dst:
        dst.write(src.read())
    os.unlink(tmp_path / "t.json")
    _, data = _report(str(tmp_path), "--rank", "1")
    assert data["timeline"]["source"] == "trace trace_rank1.json.gz" and data["timeline"]["rank"] == 1
