"""Issue 22 on Debian's real PyTorch (1.13): step sources beyond the optimizer. A forward-only
inference loop with the forward hook (MSMONITOR_STEP_HOOK=forward) produces `step <N>` markers,
one per outermost forward; vLLM >= 0.11 (a fake `vllm` package on sys.path) turns the forward
hook on by itself; a custom optimizer not derived from torch.optim.Optimizer gets the "no step"
mark in `dyno status` and a failed check in `dyno doctor`. Skipped only when torch cannot be
imported."""
import json
import signal
import subprocess
import time

import pytest

from conftest import Proc, run_dyno
from daemon_util import rpc_json
from plugin_util import data_lines
from python_util import PYTHON, py_env, require_packages

FAIL = "\u2718"

INFER = r"""
import os, sys, time
import torch
from msmonitor import dynamic_profile, step_hook

stop, ready = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()
assert dynamic_profile.init(), "dyno mode not active"
print(f"forward hook {step_hook.forward_installed()}", flush=True)
x = torch.randn(8, 16)
calls, t_end = 0, time.monotonic() + 90
with torch.no_grad():
    while not os.path.exists(stop) and time.monotonic() < t_end:
        model(x)                                    # nested Linear/ReLU forwards count once
        calls += 1
        if calls == 20:
            open(ready, "w").close()
        time.sleep(0.005)
step = dynamic_profile._STATE.info()["step"]
print(f"forward calls {calls} step {step}", flush=True)
assert step == calls + 1, (step, calls)            # the step counter starts at 1
"""

CUSTOM_OPT = r"""
import os, sys, time
import torch
from msmonitor import dynamic_profile

class PlainSGD:                                    # not a torch.optim.Optimizer
    def __init__(self, params, lr):
        self.params, self.lr = list(params), lr
    def zero_grad(self):
        for p in self.params:
            p.grad = None
    @torch.no_grad()
    def step(self):
        for p in self.params:
            p -= self.lr * p.grad

stop, ready = sys.argv[1], sys.argv[2]
model = torch.nn.Linear(16, 1)
opt = PlainSGD(model.parameters(), 0.01)
assert dynamic_profile.init(), "dyno mode not active"
x, y = torch.randn(32, 16), torch.randn(32, 1)
steps, t_end = 0, time.monotonic() + 90
while not os.path.exists(stop) and time.monotonic() < t_end:
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
        pytest.skip(f"torch cannot be imported by {PYTHON}: {r.stderr.strip()[-300:]}")


def wait_until(pred, timeout, what, diag=None):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timeout waiting for {what}" + (f":\n{diag()}" if diag else ""))
        time.sleep(0.1)


def health(daemon, pid):
    for p in (rpc_json(daemon.port, {"fn": "getStatus"}) or {}).get("processes", []):
        if p["pid"] == pid:
            return p.get("health", {})
    return {}


def step_markers(daemon):
    return [d["name"] for d in data_lines(daemon)
            if d.get("kind") == "Marker" and str(d.get("name", "")).startswith("step ")]


class Job(Proc):
    def __init__(self, daemon, tmp_path, script, pythonpath=None, **env_extra):
        shm = tmp_path / "shm"
        shm.mkdir()
        self.stopfile, self.readyfile = tmp_path / "stop", tmp_path / "ready"
        path = tmp_path / "job.py"
        path.write_text(script)
        env = py_env(daemon.client_env(), MSMONITOR_USE_DAEMON=1, MSMONITOR_POLL_INTERVAL_S=0.3,
                     MSMONITOR_SHM_DIR=shm, **env_extra)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath + ":" + env["PYTHONPATH"]
        env.pop("MSMONITOR_STEP_HOOK", None) if "MSMONITOR_STEP_HOOK" not in env_extra else None
        super().__init__([PYTHON, str(path), str(self.stopfile), str(self.readyfile)], env=env, logname="job",
                         tmpdir=str(tmp_path))
        self.wait_log("Init dynolog success !", timeout=60)
        wait_until(self.readyfile.exists, 60, "20 iterations", self.log)

    def finish(self):
        self.stopfile.touch()
        try:
            self.p.wait(60)
        finally:
            self.stop(signal.SIGTERM, timeout=30)
        return self.log()


def start_monitor(daemon, kinds):
    t0 = int(time.time())   # a config is read once its whole second has passed
    wait_until(lambda: int(time.time()) > t0, 5, "the next whole second")
    r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", kinds,
                 "--report-interval-s", "1")
    assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr


def test_forward_only_inference_steps_with_the_forward_hook(daemon, tmp_path):
    job = Job(daemon, tmp_path, INFER, MSMONITOR_STEP_HOOK="forward")
    try:
        assert "forward hook True" in job.log()
        wait_until(lambda: health(daemon, job.p.pid).get("steps", 0) > 0, 30, "steps in the health report")
        start_monitor(daemon, "Marker")
        wait_until(lambda: step_markers(daemon), 30, "step markers at the daemon")
        assert "no_step" not in {m["code"] for m in health(daemon, job.p.pid).get("marks", [])}
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-stop")
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        out = job.finish()
    assert job.p.returncode == 0, out[-4000:]
    assert "forward calls " in out


def test_vllm_turns_the_forward_hook_on(daemon, tmp_path):
    """No MSMONITOR_STEP_HOOK: an importable vLLM >= 0.11 (here a fake package) chooses the
    forward hook, as upstream steps vLLM workers from forward."""
    fake = tmp_path / "fakevllm" / "vllm"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('__version__ = "0.11.0"\n')
    job = Job(daemon, tmp_path, INFER, pythonpath=str(fake.parent))
    try:
        log = job.log()
        assert "forward hook True" in log and "vLLM 0.11 found" in log, log
        wait_until(lambda: health(daemon, job.p.pid).get("steps", 0) > 20, 30, "steps in the health report")
    finally:
        out = job.finish()
    assert job.p.returncode == 0, out[-4000:]


def test_custom_optimizer_shows_no_step(daemon, tmp_path):
    job = Job(daemon, tmp_path, CUSTOM_OPT)
    try:
        start_monitor(daemon, "Kernel")
        text = wait_until(lambda: {m["code"]: m["text"] for m in health(daemon, job.p.pid).get("marks", [])}
                          .get("no_step"), 60, "the no_step mark", lambda: json.dumps(health(daemon, job.p.pid)))
        assert "torch.optim.Optimizer" in text and "forward hook" in text
        r = run_dyno(daemon, "status")
        assert any(ln.startswith(f"! pid {job.p.pid}") and ": no_step: " in ln for ln in r.stderr.splitlines()), \
            r.stdout + r.stderr
        r = run_dyno(daemon, "doctor")
        assert r.returncode != 0 and any(ln.startswith(FAIL) and f"pid {job.p.pid}: no step since the config" in ln
                                         for ln in r.stdout.splitlines()), r.stdout
    finally:
        out = job.finish()
    assert job.p.returncode == 0, out[-4000:]
