"""A plain PyTorch loop (tiny nn.Linear, SGD then Adam) that calls only
msmonitor.dynamic_profile.init() and optimizer.step() is monitored by the real daemon on
whatever torch is installed (Debian 12: 1.13.1, which has no global optimizer hook API):
`step <N>` markers reach dynolog and `dyno status` shows its current step advancing.
Skipped only when torch cannot be imported."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import Proc, run_dyno
from plugin_util import data_lines
from python_util import PYTHON, py_env, require_packages
from waits import wait_polling, wait_until

LOOP = r"""
import os, sys, time
import torch
from msmonitor import dynamic_profile, step_hook

stop, ready = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)   # built before init(): still hooked
assert dynamic_profile.init(), "dyno mode not active"
x, y = torch.randn(32, 16), torch.randn(32, 1)
print(f"torch {torch.__version__} hook {step_hook.mode()} impl {type(step_hook._state['c']).__name__}", flush=True)
steps, t_end = 0, time.monotonic() + 90
while not os.path.exists(stop) and time.monotonic() < t_end:
    if steps == 100:                                  # a new optimizer takes over the count
        opt = torch.optim.Adam(model.parameters(), lr=0.001)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    steps += 1
    if steps == 20:
        open(ready, "w").close()
    time.sleep(0.005)
print(f"loop done after {steps} steps", flush=True)
"""


@pytest.fixture(autouse=True)
def _built():
    require_packages()
    r = subprocess.run([PYTHON, "-c", "import torch"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        pytest.skip(f"torch cannot be imported by {PYTHON} (Debian: apt-get install python3-torch): "
                    f"{r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")


def status_steps(daemon):
    r = run_dyno(daemon, "status")
    st = json.loads(r.stdout[r.stdout.index("{"):])
    return [p.get("current_step", -1) for p in st.get("processes", [])]


def step_markers(daemon):
    return [d["name"] for d in data_lines(daemon)
            if d.get("kind") == "Marker" and str(d.get("name", "")).startswith("step ")]


def test_plain_torch_loop_is_monitored(daemon, tmp_path):
    shm = tmp_path / "shm"
    shm.mkdir()
    stop, ready = tmp_path / "stop", tmp_path / "ready"
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    env = py_env(daemon.client_env(), MSMONITOR_USE_DAEMON=1, MSMONITOR_POLL_INTERVAL_S=0.3,
                 MSMONITOR_SHM_DIR=shm)
    job = Proc([PYTHON, str(script), str(stop), str(ready)], env=env, logname="loop",
               tmpdir=str(tmp_path))
    try:
        job.wait_log("Init dynolog success !", timeout=60)
        wait_until(ready.exists, 60, "20 training steps")
        log = job.log()
        assert " hook wrap" in log or " hook post_hook" in log, log
        assert " impl Hook" in log, log      # init() installs the C hook (IPCMonitor_C.optstep)
        assert "optimizer step hook not installed" not in log, log
        wait_polling(daemon, run_dyno)
        # A config acts only after the whole second the rank started in (docs/design/ipc.md#ranks).
        t0 = int(time.time())
        wait_until(lambda: int(time.time()) > t0, 5, "the next whole second")
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Marker",
                     "--report-interval-s", "1")
        assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        markers = wait_until(lambda: step_markers(daemon), 30, "step markers at the daemon")
        first = wait_until(lambda: max(status_steps(daemon), default=-1) > 0 and status_steps(daemon),
                           15, "current_step > 0 in dyno status")
        later = wait_until(lambda: max(status_steps(daemon), default=-1) > max(first) and status_steps(daemon),
                           15, "current_step advancing")
        assert max(later) > max(first) > 0
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop")
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        stop.touch()
        try:
            job.p.wait(60)
        finally:
            job.stop(signal.SIGTERM, timeout=30)
    out = job.log()
    assert job.p.returncode == 0, out[-4000:]
    assert "loop done after" in out
    steps = int(out.rsplit("loop done after ", 1)[1].split()[0])
    assert steps >= 100
    # One `step <N>` host range per N, never past the loop's own count (+1: the range open at
    # exit): one optimizer counts (SGD, then Adam from step 100), each step once.
    host = [int(d["name"].split()[1]) for d in data_lines(daemon)
            if d.get("kind") == "Marker" and str(d.get("name", "")).startswith("step ")
            and int(d.get("deviceId", 0)) == 4294967295]
    assert markers and host, markers
    assert len(host) == len(set(host)), host
    assert all(0 <= n <= steps + 1 for n in host), (steps, min(host), max(host), len(host))
    assert os.listdir(shm) == []
