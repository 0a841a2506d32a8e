"""msmonitor.analysis under its views (docs/design/analysis.md): the report, scripts/demo_summary.py
and the nputrace analysis apply one step rule and one reader, and the report's slow-rank rule is
the one `dyno steps` runs, with the same parameters."""
import json
import os
import re
import sqlite3
import subprocess

from conftest import SOURCE, run_dyno
from python_util import PYTHON, py_env, require_packages

# The marker names the step rule must accept (N) or refuse (None).
NAMES = [("step 3", 3), ("ProfilerStep#4", 4), ("step 0", 0), ("step 2147483647", 2147483647),
         ("step 2147483648", None), ("step -1", None), ("steps 5", None), ("step 7x", None), ("Step 8", None),
         ("step  9", None)]


def _report(d):
    out = os.path.join(d, "report.html")
    r = subprocess.run([PYTHON, "-m", "msmonitor", "report", d, "-o", out], env=py_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(out, encoding="utf-8") as f:
        page = f.read()
    return page, json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                                      re.S).group(1))


def test_step_rule_is_one(tmp_path):
    """JSONL markers, trace events: the report's steps and the nputrace analysis's steps are
    exactly the names the rule accepts."""
    require_packages()
    want = sorted(n for _, n in NAMES if n is not None)
    with open(tmp_path / "msmonitor_7_20260101000000000_0.jsonl", "w") as f:
        for i, (name, _) in enumerate(NAMES):
            f.write(json.dumps({"kind": "Marker", "sourceKind": "Host", "id": i, "name": name, "domain": "default",
                                "startNs": i * 1000, "endNs": i * 1000 + 500, "processId": 1, "threadId": 1}) + "\n")
    _, data = _report(str(tmp_path))
    assert [p[0] for p in data["steps"]["0"]["points"]] == want
    tdir = tmp_path / "trace"
    tdir.mkdir()
    trace = tdir / "msmonitor_trace_7_rank0_step0-9.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": i * 10.0, "dur": 5.0}
        for i, (name, _) in enumerate(NAMES)]}))
    r = subprocess.run([PYTHON, "-m", "msmonitor", "analyse", str(trace)], env=py_env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(tdir / "msmonitor_trace_7_rank0_step0-9_analysis.json") as f:
        assert [s["step"] for s in json.load(f)["steps"]] == want


def test_facts_from_contract():
    """msmonitor.facts restates nothing the generated _contract holds: the step rules, dtype names
    and sizes, memcpy-kind names, kind names, DB table names and our trace categories are the
    contract's, and every contract dtype has a size."""
    require_packages()
    r = subprocess.run([PYTHON, "-c", """
import json
from msmonitor import facts as F, _contract as C
print(json.dumps({
    "dtypes": {i: n for i, (n, _) in F.DTYPES.items()} == C.DTYPE_NAMES,
    "sized": all(size > 0 for _, size in F.DTYPES.values()),
    "invalid": F.dtype_name(13) == C.DTYPE_INVALID,
    "memcpy": F.MEMCPY_KINDS == C.MEMCPY_KIND_NAMES,
    "step": F.STEP_PREFIXES[0] == C.STEP_PREFIX and F.STEP_MAX == C.STEP_MAX,
    "rule": all(F.step_number(n) == C.step_of(n) for n in ("step 1", "step 2147483648", "step x", "step ")),
    "kinds": set(F.API_KINDS + F.COMM_KINDS + (F.K_KERNEL, F.K_MEMCPY, F.K_MEMSET, F.K_MARKER)) <= set(C.KIND_VALUES),
    "end": (F.META_FILTER, F.META_STATS) == (C.META_FILTER, C.META_STATS),
    "torch": F.STEP_PREFIXES[1] == C.TORCH_STEP_PREFIX == "ProfilerStep#",
    "sizes": F.DTYPE_SIZES == C.DTYPE_SIZES and F.dtype_bytes(4) == 4 and F.dtype_bytes(name="INT128") == 16,
    "tables": {F.T_TASK, F.T_COMPUTE, F.T_MSTX, F.T_COMM, F.T_HCCL, F.T_MEMCPY, F.T_MEMSET, F.T_MEMORY,
               F.T_API} == set(C.DB_TABLES) and
              {F.T_STRINGS, F.T_SESSION, F.T_HOST, F.T_META} <= set(C.DB_FIXED_TABLES),
    "names": (F.T_STRINGS, F.T_COMPUTE, F.MSTX_TASK_TYPE) == ("STRING_IDS", "COMPUTE_TASK_INFO", "MsTx"),
    "api": F.API_TYPES == {10000: "API/NodeAPI", 20000: "AclAPI", 5000: "RuntimeAPI"},
    "bits": (F.TRACE_CPU, F.TRACE_WITH_MODULES, F.TRACE_EXPORT_DB) == (1, 0x100, 0x200),
    "files": F.EXPORT_FILE_RE.match("msmonitor_12_20250101120000123_-1.jsonl").groups()
             == ("12", "20250101120000123", "-1", "jsonl") and not F.EXPORT_FILE_RE.match("msmonitor_1_2_3.csv")
             and F.NPUTRACE_FILE_RE.match(F.NPUTRACE_TORCH_NAME.format(pid=1, rank=0, start=2, stop=3) + ".gz")
             and F.NPUTRACE_FILE_RE.match("msmonitor_trace_7_rank1_step5-7.json")
             and F.NPUTRACE_WINDOW_TAG.format(start=5, stop=7) in "msmonitor_trace_7_rank1_step5-7.json",
    "states": (F.TRACE_IDLE, F.TRACE_RUNNING, F.TRACE_READY) == (0, 1, 2)
              and C.STATUS_NAMES[F.TRACE_READY] == "Ready",
    "cats": {C.TRACE_CAT_KERNEL, C.TRACE_CAT_MEMCPY, C.TRACE_CAT_MEMSET, C.TRACE_CAT_MEMORY}
            <= set(F.TRACE_DEVICE_CATS) and F.TRACE_DEVICE_ANNOTATION == C.TRACE_CAT_DEVICE_ANNOTATION
            and C.TRACE_CAT_RUNTIME in F.TRACE_HOST_OP_CATS and C.TRACE_CAT_KERNEL == "kernel",
}))
"""], env=py_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert all(got.values()), got
    with open(os.path.join(SOURCE, "python", "msmonitor", "facts.py")) as f:
        src = f.read()
    for copy in ("2 ** 31", "HTOD", '"step "', "MsptiMonitor",   # once hand-written copies / log lines
                 '"ProfilerStep#"', '"STRING_IDS"', '"MSTX_EVENTS"', '"FP16"', '"MsTx"', '"gpu_memcpy"',
                 '"kernel"', '"parallel_group_info"', "20000", "0x200", '"msmonitor_', '"_step', "0, 1, 2"):
        assert copy not in src, copy
    with open(os.path.join(SOURCE, "python", "msmonitor", "dynamic_monitor_proxy.py")) as f:
        assert '"NPU_MONITOR_STOP"' not in f.read()     # the key and its boolean rule are the contract's


def _plugin_db(path, kernels, steps, comm, strings=True):
    """A DB with the plugin's tables (docs/design/outputs.md#db-schema): kernels [(name, ns)],
    steps [(n, host ns, device ns)], comm [(op, elements, ns)]."""
    db = sqlite3.connect(path)
    ids = {}

    def sid(v):
        return ids.setdefault(v, len(ids) + 1)

    db.execute("CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, "
               "globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, "
               "taskId INTEGER, modelId INTEGER)")
    db.execute("CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER)")
    db.execute("CREATE TABLE MSTX_EVENTS (startNs INTEGER, endNs INTEGER, eventType INTEGER, rangeId INTEGER, "
               "category INTEGER, message INTEGER, globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER, "
               "connectionId INTEGER)")
    db.execute("CREATE TABLE COMMUNICATION_OP (opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER, "
               "groupName INTEGER, opId INTEGER, relay INTEGER, retry INTEGER, dataType INTEGER, algType INTEGER, "
               "count NUMERIC, opType INTEGER, deviceId INTEGER)")
    t = 1000
    for gid, (name, ns) in enumerate(kernels):
        db.execute("INSERT INTO TASK VALUES (?,?,0,0,?,1,?,0,0,0,0)", (t, t + ns, gid, sid("KERNEL_AICORE")))
        db.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?)", (sid(name), gid))
        t += ns + 10
    for n, host, dev in steps:
        conn = 4000000000 + n
        db.execute("INSERT INTO MSTX_EVENTS VALUES (?,?,2,0,0,?,1,1,0,?)", (t, t + host, sid(f"step {n}"), conn))
        db.execute("INSERT INTO TASK VALUES (?,?,0,?,?,1,?,0,0,0,0)",
                   (t + 5, t + 5 + dev, conn, 100000 + n, sid("MsTx")))
        t += host + 10
    for op, elems, ns in comm:
        db.execute("INSERT INTO COMMUNICATION_OP VALUES (?,?,?,0,?,0,0,0,4,0,?,?,0)",
                   (sid(op), t, t + ns, sid("group0"), elems, sid(op)))
        t += ns + 10
    if strings:
        db.execute("CREATE TABLE STRING_IDS (id INTEGER, value TEXT)")
        db.executemany("INSERT INTO STRING_IDS VALUES (?,?)", [(i, v) for v, i in ids.items()])
    db.commit()
    db.close()


def test_demo_summary_is_a_view(tmp_path):
    """The demo summary prints what the report's reader found: the same kernel calls and totals,
    steps and communication; a DB without its string table is left out with a note."""
    require_packages()
    _plugin_db(str(tmp_path / "msmonitor_11_20260101000000000_0.db"),
               [("MatMul", 3000), ("Add", 600), ("MatMul", 2000)],
               [(1, 9000, 7000), (2, 11000, 8000), (3, 10000, 9000)], [("HcclAllReduce", 1024, 4000)])
    _plugin_db(str(tmp_path / "msmonitor_12_20260101000000000_1.db"), [("MatMul", 1000)],
               [(1, 8000, 6000), (2, 12000, 7000)], [("HcclAllReduce", 2048, 3000)])
    _plugin_db(str(tmp_path / "msmonitor_13_20260101000000000_2.db"), [("Lost", 1000)], [(1, 1, 1)], [],
               strings=False)
    r = subprocess.run([PYTHON, os.path.join(SOURCE, "scripts", "demo_summary.py"), str(tmp_path)], env=py_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(3 DB file(s))" in r.stdout
    assert "msmonitor_13_20260101000000000_2.db: STRING_IDS is missing" in r.stderr and "Lost" not in r.stdout
    rows = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines()}
    assert rows["MatMul"][:2] == ["3", "0.006"] and rows["Add"][:2] == ["1", "0.001"]
    assert rows["HcclAllReduce"] == ["2", "0.007", "3072"]
    steps = r.stdout.split("-- step time per rank")[1].split("-- communication --")[0].strip().splitlines()[2:]
    # rank, steps, median, p99, max, device median (ms), then the slowest steps
    assert [ln.split()[:6] for ln in steps] == [["0", "3", "0.010", "0.011", "0.011", "0.008"],
                                               ["1", "2", "0.008", "0.012", "0.012", "0.006"]]
    # the report over the same files: the same numbers from the same reader
    os.unlink(tmp_path / "msmonitor_13_20260101000000000_2.db")
    _, data = _report(str(tmp_path))
    assert {k["name"]: (k["count"], k["total_ns"]) for k in data["kernels"]} == {"MatMul": (3, 6000), "Add": (1, 600)}
    assert data["steps"]["0"]["points"] == [[1, 7000], [2, 8000], [3, 9000]]


def test_report_rule_is_dyno_steps(daemon, tmp_path):
    """The parameters the report judges by are those `dyno steps` prints as its rule."""
    require_packages()
    r = run_dyno(daemon, "steps", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    view = json.loads(r.stdout.strip().splitlines()[-1])   # after the root warning, if any
    rule = view["rule"]
    for rk in range(3):
        with open(tmp_path / f"msmonitor_{100 + rk}_20260101000000000_{rk}.jsonl", "w") as f:
            for i in range(6):
                f.write(json.dumps({"kind": "Marker", "sourceKind": "Host", "id": i, "name": f"step {i + 1}",
                                    "domain": "default", "startNs": i * 10000, "endNs": i * 10000 + 1000 + rk,
                                    "processId": 1, "threadId": 1}) + "\n")
    page, data = _report(str(tmp_path))
    got = {k: data["slow_rule"][k] for k in ("threshold", "mad_k", "min_steps", "min_ranks")}
    assert got == rule, (got, rule)
    assert f'when ≥ {rule["min_ranks"]} ranks have it' in page and f'{rule["threshold"]:.0%} of the step' in page
