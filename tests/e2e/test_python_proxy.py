"""PyDynamicMonitorProxy against the real daemon, in the calling orders of torch_npu (string
dict with is_valid, update_profiler_status, finalize_dyno) and MindSpore (is_valid removed,
no Ready state) — docs/design/session.md#python-surface, docs/design/ipc.md#status-tracking, #shared-memory-handoff."""
import json
import os

import pytest

from conftest import Proc, run_dyno
from python_util import PYTHON, py_env, require_packages
from waits import wait_polling, wait_until

FRAMEWORK = r"""
import json, sys, time
from IPCMonitor import PyDynamicMonitorProxy as P
mode = sys.argv[1]
print("init", P.init_dyno(0), flush=True)
applied = 0
while True:
    res = P.poll_dyno()
    cfg = {}
    for line in res.split("\n"):
        parts = line.split("=")
        if len(parts) == 2:
            cfg[parts[0].strip()] = parts[1].strip()
    if cfg:
        if mode == "torch":
            cfg["is_valid"] = True
            cfg = {k: str(v) for k, v in cfg.items()}
        P.enable_dyno_npu_monitor(cfg)
        applied += 1
        if mode == "torch":
            P.update_profiler_status({"profiler_status": "0", "current_step": str(10 * applied),
                                      "start_step": "-1", "stop_step": "-1"})
        print("applied", applied, json.dumps(cfg, sort_keys=True), flush=True)
        if cfg.get("NPU_MONITOR_STOP", "").lower() == "true":
            break
    time.sleep(0.05)
P.finalize_dyno()
if mode == "torch":
    P.update_profiler_status({"profiler_status": "-1", "current_step": "-1", "start_step": "-1", "stop_step": "-1"})
print("finalized", flush=True)
"""


def status(daemon):
    r = run_dyno(daemon, "status")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout[r.stdout.index("{"):])


def proc_entry(st, pid):
    return [p for p in st["processes"] if p["pid"] == pid]


@pytest.mark.parametrize("mode", ["torch", "mindspore"])
def test_proxy_calling_order_against_daemon(make_daemon, tmp_path, mode):
    require_packages()
    daemon = make_daemon()
    out = tmp_path / "out"
    proc = Proc([PYTHON, "-c", FRAMEWORK, mode], env=py_env(daemon.client_env()), logname="fw",
                tmpdir=str(tmp_path))
    try:
        proc.wait_log("init True")
        daemon.wait_log("Registered process")
        wait_polling(daemon, run_dyno)
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel,Marker",
                     "--report-interval-s", "1", "--log-file", str(out), "--export-type", "Jsonl")
        assert r.returncode == 0, r.stdout + r.stderr
        assert '"commandStatus":"effective"' in r.stdout
        log = proc.wait_log("applied 1")
        cfg = json.loads(log.split("applied 1 ", 1)[1].splitlines()[0])
        assert cfg["NPU_MONITOR_START"] == "true" and cfg["MSPTI_ACTIVITY_KIND"] == "Kernel,Marker"
        assert ("is_valid" in cfg) == (mode == "torch")
        # The rank reported its session as running (npuMonitorStatus{1}).
        mine = wait_until(lambda: (lambda mine: mine if mine and mine[0]["npumonitor"] == "Running" else None)(
            proc_entry(status(daemon), proc.p.pid)), 30, "the rank's session Running",
            diag=lambda: repr(status(daemon)))
        if mode == "torch":
            assert mine[0]["current_step"] == 10
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop")
        assert r.returncode == 0, r.stdout + r.stderr
        proc.wait_log("finalized")
        assert proc.p.wait(10) == 0
        logs = "".join(p.read_text() for p in (tmp_path / "msmonitor_log").glob("*.log"))
        assert "MsptiMonitor start successfully" in logs
        assert "MsptiMonitor stop successfully" in logs
        assert os.path.isdir(out)
    finally:
        proc.stop()
