"""nputrace with Debian's python3-torch (CPU): a small training loop in dyno mode (the step hook
calls dynamic_profile.step() after each optimizer step) traced for 2 steps with the default
--activities CPU,NPU, --record-shapes, --analyse and --async-mode: torch.profiler's trace lies
next to ours with the same rank/step naming and holds the model's operators; the analysis of
both traces is written by a child process (not the rank), torch.profiler's export runs on the
window's worker thread (not the stepping thread), and the rank exits with no child left behind."""
import json
import os
import re
import signal
import time

import pytest

from conftest import Proc, run_dyno
from dyn_util import plugin_log
from python_util import PYTHON, py_env, require_packages
from waits import wait_polling, wait_until
from trace_util import check_schema, load_trace, trace_files

LOOP = r"""
import os, signal, sys, threading, time
import torch
import torch.profiler as tp
from msmonitor import dynamic_profile
_export = tp.profile.export_chrome_trace
def _export_seen(self, path):  # which thread writes torch.profiler's trace
    print(f"torch_rank: export on {threading.current_thread().name}", flush=True)
    return _export(self, path)
tp.profile.export_chrome_trace = _export_seen
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
print(f"torch_rank: pid {os.getpid()} init {dynamic_profile.init()}", flush=True)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
while not stop:
    x = torch.randn(8, 16)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.05)
dynamic_profile.finalize()
print("torch_rank: done", flush=True)
"""


def test_torch_profiler_window_with_async_analysis(make_daemon, tmp_path):
    require_packages()
    pytest.importorskip("torch")
    daemon = make_daemon()
    (tmp_path / "shm").mkdir()
    out = tmp_path / "traces"
    logdir = tmp_path / "rank0"
    logdir.mkdir()
    env = py_env(daemon.client_env(), MSMONITOR_USE_DAEMON=1, MSMONITOR_SHM_DIR=str(tmp_path / "shm"),
                 MSMONITOR_POLL_INTERVAL_S="0.3", MSMONITOR_LOG_PATH=str(logdir), RANK=0)
    env.pop("MSMONITOR_NATIVE_POLL", None)
    p = Proc([PYTHON, "-c", LOOP], env=env, logname="torch", tmpdir=str(logdir))
    try:
        p.wait_log("init True", timeout=120)
        t_init = int(time.time())
        wait_polling(daemon, run_dyno)
        wait_until(lambda: int(time.time()) > t_init, 2, "the next second")
        r = run_dyno(daemon, "nputrace", "--start-step", "-1", "--iterations", "2", "--log-file", str(out),
                     "--record-shapes", "--analyse", "--async-mode")
        assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr

        def analysed():
            return len([f for f in os.listdir(out) if f.endswith("_analysis.json")]) == 2 if out.exists() else False
        wait_until(analysed, 120, "both analyses", lambda: p.log()[-3000:] + plugin_log(logdir)[-2000:])
    finally:
        rc = p.stop(signal.SIGTERM, timeout=60)
    assert rc == 0, p.log()
    log = p.log()
    m = re.search(r"analysis of 2 trace\(s\) running in child process (\d+)", log)
    assert m and int(m.group(1)) != p.p.pid, log[-3000:]
    # --async-mode: the step (the optimizer hook, on the main thread) leaves torch.profiler's
    # export and the analysis hand-off to the window's worker thread
    assert "torch_rank: export on msmonitor-nputrace" in log and "export on MainThread" not in log, log[-3000:]
    ours = trace_files(out, p.p.pid)
    assert len(ours) == 1
    tr = load_trace(ours[0])
    check_schema(tr)
    s, e = tr["msmonitor"]["startStep"], tr["msmonitor"]["stopStep"]
    assert e - s == 2
    torch_path = os.path.join(str(out), f"msmonitor_torch_{p.p.pid}_rank0_step{s}-{e}.json")
    with open(torch_path) as f:
        tt = json.load(f)
    events = tt["traceEvents"] if isinstance(tt, dict) else tt  # torch without Kineto writes a bare list
    names = {ev.get("name") for ev in events}
    assert {"aten::linear", "aten::relu"} <= names or {"aten::addmm", "aten::relu"} <= names, sorted(names)[:50]
    assert f"torch.profiler started for steps [{s}, {e}) (record_shapes=True, profile_memory=False" in log
    with open(torch_path[:-5] + "_analysis.json") as f:
        a = json.load(f)
    assert a["top_ops_by_total"] and any(r["name"].startswith("aten::") for r in a["top_ops_by_total"])
    with open(ours[0][:-5] + "_analysis.json") as f:
        a = json.load(f)
    assert [x["step"] for x in a["steps"]] == [s, s + 1]
    assert os.path.exists(ours[0][:-5] + "_analysis.txt")
