"""The nputrace analysis (python/msmonitor/nputrace.py) on hand-built traces, through
`python -m msmonitor analyse`: per-step wall time, kernels and ops by total and self time,
communication and memcpy shares as unions per stream (overlapping records of one op count
once), idle gaps per device stream, torch's legacy list form, and directory scans that skip
analysis outputs."""
import gzip
import json
import os
import subprocess

from python_util import PYTHON, PKG, py_env


def x(name, cat, pid, tid, ts, dur, kind=None):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": {"kind": kind} if kind else {}}


def run_analyse(*paths):
    r = subprocess.run([PYTHON, "-m", "msmonitor", "analyse", *map(str, paths)], env=py_env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_summary_numbers(tmp_path):
    ev = [
        x("step 5", "user_annotation", 7, 7, 0.0, 100.0, "Marker"),
        x("step 6", "user_annotation", 7, 7, 100.0, 50.0, "Marker"),
        x("aclnnMatMul", "cuda_runtime", 7, 7, 10.0, 20.0, "AclAPI"),
        x("aclrtLaunchKernel", "cuda_runtime", 7, 7, 15.0, 5.0, "RuntimeAPI"),   # nested: self of MatMul 15
        x("MatMul", "kernel", 0, 1, 20.0, 30.0, "Kernel"),
        x("MatMul", "kernel", 0, 1, 60.0, 10.0, "Kernel"),
        x("AllReduce", "kernel", 0, 2, 30.0, 40.0, "Hccl"),
        x("AllReduce", "kernel", 0, 2, 30.0, 40.0, "Communication"),            # same op: counted once
        x("Memcpy HTOD", "gpu_memcpy", 0, 1, 80.0, 10.0, "MemCpy"),
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 7, "tid": 7, "ts": 15.0},
    ]
    path = tmp_path / "msmonitor_trace_7_rank0_step5-7.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    assert "written to" in run_analyse(tmp_path)
    a = json.loads((tmp_path / "msmonitor_trace_7_rank0_step5-7_analysis.json").read_text())
    assert a["steps"] == [{"step": 5, "wall_us": 100.0}, {"step": 6, "wall_us": 50.0}]
    k = {r["name"]: r for r in a["top_kernels_by_total"]}
    assert k["MatMul"] == {"name": "MatMul", "count": 2, "total_us": 40.0, "self_us": 40.0}
    ops = {r["name"]: r for r in a["top_ops_by_total"]}
    assert ops["aclnnMatMul"]["total_us"] == 20.0 and ops["aclnnMatMul"]["self_us"] == 15.0
    assert a["device_busy_us"] == 90.0                      # stream 1: 30+10+10, stream 2: 40 (once)
    assert a["communication_share"] == 0.4444 and a["memcpy_share"] == 0.1111
    gaps = {(g["device"], g["stream"]): g for g in a["idle_gaps"]}
    assert gaps[(0, 1)]["gaps"] == 2 and gaps[(0, 1)]["idle_us"] == 20.0 and gaps[(0, 1)]["max_gap_us"] == 10.0
    assert gaps[(0, 2)]["gaps"] == 0
    txt = (tmp_path / "msmonitor_trace_7_rank0_step5-7_analysis.txt").read_text()
    assert "top kernels by total time" in txt and "communication 44.4 %" in txt
    # A second scan analyses the trace again but never the analysis outputs themselves.
    run_analyse(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["msmonitor_trace_7_rank0_step5-7.json",
                                            "msmonitor_trace_7_rank0_step5-7_analysis.json",
                                            "msmonitor_trace_7_rank0_step5-7_analysis.txt"]


def test_torch_legacy_list_and_gzip(tmp_path):
    ev = [{"name": "ProfilerStep#3", "ph": "X", "ts": 0, "dur": 90, "pid": "CPU functions", "tid": 1, "args": {}},
          {"name": "aten::linear", "ph": "X", "ts": 5, "dur": 40, "pid": "CPU functions", "tid": 1, "args": {}},
          {"name": "aten::addmm", "ph": "X", "ts": 10, "dur": 30, "pid": "CPU functions", "tid": 1, "args": {}}]
    p = tmp_path / "msmonitor_torch_9_rank1_step3-4.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump(ev, f)
    run_analyse(p)
    a = json.loads((tmp_path / "msmonitor_torch_9_rank1_step3-4_analysis.json").read_text())
    assert a["steps"] == [{"step": 3, "wall_us": 90.0}]
    ops = {r["name"]: r for r in a["top_ops_by_self"]}
    assert ops["aten::linear"]["self_us"] == 10.0 and ops["aten::addmm"]["self_us"] == 30.0
    assert PKG  # the build-tree package is what ran


def test_bad_file_is_one_line(tmp_path):
    p = tmp_path / "msmonitor_trace_1_rank0_step1-2.json"
    p.write_text("{not json")
    r = subprocess.run([PYTHON, "-m", "msmonitor", "analyse", str(p)], env=py_env(), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [f"[ERROR] cannot analyse {p}: " + r.stderr.split(": ", 1)[1].strip()]
