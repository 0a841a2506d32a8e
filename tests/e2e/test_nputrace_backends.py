"""nputrace timelines on both activity backends (issue 14: the same suite on the simulated
msPTI and the simulated CUPTI): two Python ranks in dyno mode (tests/e2e/trace_rank.py) trace
one aligned window; each trace holds exactly the simulator's kernels of the window's steps
(ground truth: MSSIM_DUMP / MSSIM_CUPTI_DUMP, and the step number in each kernel's name), the
ac2g flows link them to their launch calls, and the header names the backend."""
import json
import os
import re
import signal
import time

import pytest

from conftest import Proc, run_dyno
from dyn_util import plugin_log
from python_util import PYTHON, py_env, require_packages
from trace_util import check_schema, in_window, load_trace, ns, trace_files
from waits import wait_polling, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
CUPTI_LIB = os.path.join(os.environ.get("MSMON_BUILD_DIR", ""), "src", "sim", "cupti", "libcupti.so")


def rank_env(daemon, backend, tmp_path, r):
    logdir = tmp_path / f"rank{r}"
    logdir.mkdir()
    env = py_env(daemon.client_env(), MSMONITOR_USE_DAEMON=1, MSMONITOR_SHM_DIR=str(tmp_path / "shm"),
                 MSMONITOR_POLL_INTERVAL_S="0.3", MSMONITOR_LOG_PATH=str(logdir), RANK=r, WORLD_SIZE=2,
                 MSSIM_CHECK_PRELOAD=0)
    env.pop("MSMONITOR_NATIVE_POLL", None)
    if backend == "cupti":
        env.update(MSMONITOR_BACKEND="cupti", MSMONITOR_CUPTI_LIB=CUPTI_LIB,
                   MSSIM_CUPTI_DUMP=str(logdir / "dump.jsonl"))
    else:
        env.update(MSMONITOR_BACKEND="mspti", MSSIM_DUMP=str(logdir / "dump.jsonl"))
    return env, logdir


def truth_kernels(path):
    out = []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if d["kind"] in ("Kernel", "CONCURRENT_KERNEL"):
                out.append((d["name"], d["start"], d["end"]))
    return sorted(out)


@pytest.mark.parametrize("backend", ["mspti", "cupti"])
def test_trace_window_on_backend(make_daemon, tmp_path, backend):
    require_packages()
    if backend == "cupti" and not os.path.exists(CUPTI_LIB):
        pytest.skip(f"{CUPTI_LIB} not built")
    daemon = make_daemon()
    (tmp_path / "shm").mkdir()
    out = tmp_path / "traces"
    ranks = []
    try:
        for r in (0, 1):
            env, logdir = rank_env(daemon, backend, tmp_path, r)
            ranks.append((Proc([PYTHON, os.path.join(HERE, "trace_rank.py"), backend], env=env, logname=f"rank{r}",
                               tmpdir=str(logdir)), logdir))
        for p, _ in ranks:
            p.wait_log("init True", timeout=60)
        t_init = int(time.time())
        wait_polling(daemon, run_dyno)
        wait_until(lambda: int(time.time()) > t_init, 2, "the next second")
        r = run_dyno(daemon, "nputrace", "--start-step", "-1", "--iterations", "3", "--log-file", str(out),
                     "--activities", "NPU")
        assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        wait_until(lambda: all(trace_files(out, p.p.pid) for p, _ in ranks), 60, "both traces",
                   lambda: "\n".join(plugin_log(d)[-2000:] + p.log()[-1000:] for p, d in ranks))
    finally:
        rcs = [p.stop(signal.SIGTERM, timeout=30) for p, _ in ranks]
    assert rcs == [0, 0], [p.log() for p, _ in ranks]
    windows = set()
    for p, d in ranks:
        files = trace_files(out, p.p.pid)
        assert len(files) == 1, files
        tr = load_trace(files[0])
        check_schema(tr)
        m = tr["msmonitor"]
        assert m["activityBackend"] == backend
        assert tr["distributedInfo"]["backend"] == ("nccl" if backend == "cupti" else "hccl")
        windows.add((m["startStep"], m["stopStep"]))
        kern = sorted((e["name"], ns(tr, e["ts"]), ns(tr, e["ts"]) + int(e["dur"] * 1000))
                      for e in tr["traceEvents"] if e["ph"] == "X" and e["args"]["kind"] == "Kernel")
        end = m["windowEndNanoseconds"]
        assert kern == [k for k in truth_kernels(str(d / "dump.jsonl")) if k[1] < end]
        steps = {int(re.match(r"k_s(\d+)_\d+$", k[0]).group(1)) for k in kern}
        assert steps == set(range(m["startStep"], m["stopStep"])), (steps, m)
        assert len(kern) == 3 * (m["stopStep"] - m["startStep"])
        flows = {e["id"] for e in tr["traceEvents"] if e["ph"] == "f"}
        kcorr = {e["args"]["correlation"] for e in tr["traceEvents"] if e["ph"] == "X" and e["args"]["kind"] == "Kernel"}
        assert kcorr and kcorr <= flows
    assert len(windows) == 1 and windows.pop()[1] - 3 >= 1
