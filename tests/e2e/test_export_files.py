"""DB and JSONL export end to end: real dynolog and dyno, the simulator workload with
libmsmonitor.so; after a stop and after a duration expiry, the files hold exactly the
simulator's kernel and API records field by field (docs/design/outputs.md#db-schema, #jsonl), and
their session end carries the filter and counters that agree with those records
(docs/outputs.md#session-end)."""
import collections
import glob
import json
import os
import sqlite3
import stat
import tempfile

from conftest import run_dyno
from plugin_util import Workload, data_lines, wait_registered
from waits import wait_until

KINDS = "Kernel,API,AclAPI,NodeAPI,RuntimeAPI"
API_TYPE = {"API": 10000, "AclAPI": 20000, "NodeAPI": 10000, "RuntimeAPI": 5000}


def _truth(w):
    k, a = collections.Counter(), collections.Counter()
    for r in w.ground_truth():
        if r["kind"] == "Kernel":
            k[(r["correlationId"], r["start"], r["end"], r["deviceId"], r["streamId"], r["name"], r["type"])] += 1
        elif r["kind"] in API_TYPE:
            a[(r["kind"], r["correlationId"], r["start"], r["end"], r["processId"], r["threadId"], r["name"])] += 1
    return k, a


def _run(daemon, export, stop_by_duration):
    tmp = tempfile.mkdtemp(prefix="mmx")
    out = os.path.join(tmp, "out", "sub")
    w = Workload(daemon, tmp)
    try:
        wait_registered(daemon, w.p.pid)
        args = ["npu-monitor", "--npu-monitor-start", "--report-interval-s", "1",
                "--mspti-activity-kind", KINDS, "--log-file", out, "--export-type", export]
        if stop_by_duration:
            args += ["--duration", "3"]
        r = run_dyno(daemon, *args)
        assert r.returncode == 0, r.stderr + r.stdout
        w.wait_plugin_log("MsptiMonitor start successfully")
        if stop_by_duration:
            w.wait_plugin_log("expired", timeout=30)
        else:
            # a few report ticks write batches: wait for the daemon to have seen two of them
            wait_until(lambda: sum(1 for d in data_lines(daemon) if d.get("kind") == "PluginStats"
                                   and d.get("pid") == w.p.pid) >= 2, 60, "two report ticks",
                       diag=lambda: daemon.log()[-3000:], alive=w)
            r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop")
            assert r.returncode == 0, r.stderr + r.stdout
            w.wait_plugin_log("MsptiMonitor stop successfully")
    finally:
        w.stop()
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o750
    return w, out


def _check_db(w, out):
    files = glob.glob(os.path.join(out, f"msmonitor_{w.p.pid}_*_*.db"))
    assert len(files) == 1, os.listdir(out)
    assert stat.S_IMODE(os.stat(files[0]).st_mode) == 0o640
    db = sqlite3.connect(files[0])
    s = dict(db.execute("SELECT id, value FROM STRING_IDS"))
    kern = collections.Counter()
    for (corr, start, end, dev, stream, name, typ) in db.execute(
            "SELECT t.connectionId, t.startNs, t.endNs, t.deviceId, t.streamId, c.name, t.taskType "
            "FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"):
        kern[(corr, start, end, dev, stream, s[name], s[typ])] += 1
    api = collections.Counter()
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    rows = db.execute("SELECT connectionId, startNs, endNs, globalTid, name, type FROM CANN_API") \
        if "CANN_API" in tables else []
    for (corr, start, end, gtid, name, typ) in rows:
        api[(typ, corr, start, end, gtid >> 32, gtid & 0xffffffff, s[name])] += 1
    meta = dict(db.execute("SELECT name, value FROM META_DATA"))
    assert meta["SCHEMA_VERSION"] == "1.2.0"
    end = {"filter": meta["filter"], "stats": json.loads(meta["session_stats"])}
    assert db.execute("SELECT count(*) FROM SESSION_TIME_INFO").fetchone()[0] == 1
    db.close()
    tk, ta = _truth(w)
    ta = collections.Counter({(API_TYPE[k[0]],) + k[1:]: v for k, v in ta.items()})
    assert sum(tk.values()) > 0
    assert kern == tk
    assert api == ta
    _check_session_end(end, kern, api)


def _check_session_end(end, kern, api):
    """No filter was set; every record the files hold was kept, and nothing was dropped."""
    assert end["filter"] == ""
    st = end["stats"]
    assert list(st) == sorted(st) and "consumed" in st and "bytes_written" in st, st
    assert st["kept"] == sum(kern.values()) + sum(api.values()), st
    assert st["consumed"] >= st["kept"] and st["dropped_queue"] == st["dropped_write"] == 0, st


def _check_jsonl(w, out):
    files = sorted(glob.glob(os.path.join(out, f"msmonitor_{w.p.pid}_*_*.jsonl")))
    assert files, os.listdir(out)
    kern, api = collections.Counter(), collections.Counter()
    kinds, end = [], None
    for f in files:
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o640
        with open(f) as fh:
            for line in fh:
                d = json.loads(line)
                assert list(d.keys()) == sorted(d.keys())
                kinds.append(d["kind"])
                if d["kind"] == "session_stats":
                    end = d
                if d["kind"] == "Kernel":
                    kern[(d["correlationId"], d["startNs"], d["endNs"], d["deviceId"], d["streamId"],
                          d["name"], d["type"])] += 1
                elif d["kind"] in API_TYPE:
                    api[(d["kind"], d["correlationId"], d["startNs"], d["endNs"], d["processId"], d["threadId"],
                         d["name"])] += 1
    assert kinds[-1] == "rank_device_map" and kinds.count("session_stats") == 1
    tk, ta = _truth(w)
    assert sum(tk.values()) > 0
    assert kern == tk
    assert api == ta
    _check_session_end(end, kern, api)


def test_db_after_stop(daemon):
    w, out = _run(daemon, "DB", False)
    _check_db(w, out)


def test_db_after_duration_expiry(daemon):
    w, out = _run(daemon, "DB", True)
    _check_db(w, out)


def test_jsonl_after_stop(daemon):
    w, out = _run(daemon, "Jsonl", False)
    _check_jsonl(w, out)


def test_jsonl_after_duration_expiry(daemon):
    w, out = _run(daemon, "Jsonl", True)
    _check_jsonl(w, out)
