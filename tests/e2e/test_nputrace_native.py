"""nputrace for a program without a step call (issue 14): the unmodified mssim-cuda-app gets
libmsmonitor.so injected through CUDA_INJECTION64_PATH on the simulated CUPTI, polls a real
daemon natively, and `dyno nputrace --start-step S --iterations K` traces exactly its steps
[S, S+K), delimited by the app's own NVTX `step <N>` ranges. Ground truth: MSSIM_CUPTI_DUMP
(each kernel belongs to the last `step <N>` range started before it in program order). The
app holds before chosen steps (--hold N:FILE), so each status is observed while it holds.
The same window on the simulated msPTI: mssim-train's mstx `step <n>` ranges."""
import collections
import json
import os
import subprocess

from conftest import BUILD, SOURCE, Proc, binpath, run_dyno
from dyn_util import plugin_log
from plugin_util import wait_registered
from trace_util import check_schema, load_trace, ns, trace_files
from waits import wait_until

SIMDIR = os.path.join(BUILD, "src", "sim", "cupti")
STEPS, START, ITERS = 12, 4, 3


def status_of(daemon, pid):
    o = run_dyno(daemon, "status").stdout
    st = json.loads(o[o.index("{"):]) if "{" in o else {}
    return next((p for p in st.get("processes", []) if p["pid"] == pid), {})


def truth_window(dump, start, stop):
    """(name, start, end) of the kernels the app launched inside `step start` .. `step stop-1`."""
    step, out = None, []
    with open(dump) as f:
        for line in f:
            d = json.loads(line)
            if d["kind"] == "MARKER" and d["name"].startswith("step "):
                step = int(d["name"][5:])
            elif d["kind"] == "CONCURRENT_KERNEL" and step is not None and start <= step < stop:
                out.append((d["name"], d["start"], d["end"]))
    return sorted(out)


def test_injected_program_traced_by_its_nvtx_steps(make_daemon, tmp_path):
    daemon = make_daemon()
    out, dump = tmp_path / "traces", str(tmp_path / "dump.jsonl")
    files = {n: str(tmp_path / n) for n in ("ready", "go", "hold_running", "hold_exit")}
    env = daemon.client_env()
    env.pop("MSMONITOR_BACKEND", None)
    env.update(CUDA_INJECTION64_PATH=binpath("libmsmonitor.so"), MSMONITOR_USE_DAEMON="1",
               MSMONITOR_NATIVE_POLL="1", MSMONITOR_CUPTI_LIB=os.path.join(SIMDIR, "libcupti.so"),
               MSMONITOR_LOG_PATH=str(tmp_path), MSSIM_CUPTI_DUMP=dump)
    # holds: inside the window (before step START+ITERS-1) and after the last step
    argv = [os.path.join(SIMDIR, "mssim-cuda-app"), "--steps", str(STEPS), "--rate", "50",
            "--ready-file", files["ready"], "--go-file", files["go"],
            "--hold", f"{START + ITERS - 1}:{files['hold_running']}", "--hold", f"{STEPS + 1}:{files['hold_exit']}"]
    app = Proc(argv, env=env, logname="cudaapp", tmpdir=str(tmp_path))
    try:
        wait_until(lambda: os.path.exists(files["ready"]), 20, "cuda app ready", app.log)
        pid = app.p.pid
        wait_registered(daemon, pid)
        r = run_dyno(daemon, "nputrace", "--start-step", str(START), "--iterations", str(ITERS),
                     "--log-file", str(out), "--activities", "NPU")
        assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        wait_until(lambda: status_of(daemon, pid).get("nputrace") == "Ready", 30, "status Ready",
                   lambda: app.log() + str(status_of(daemon, pid)))
        open(files["go"], "w").close()
        wait_until(lambda: status_of(daemon, pid).get("nputrace") == "Running", 30, "status Running",
                   lambda: app.log() + str(status_of(daemon, pid)))
        assert not trace_files(out, pid)  # still inside the window
        open(files["hold_running"], "w").close()
        wait_until(lambda: trace_files(out, pid), 30, "the trace file", app.log)
        wait_until(lambda: status_of(daemon, pid).get("nputrace") == "Idle", 30, "status Idle",
                   lambda: app.log() + str(status_of(daemon, pid)))
        open(files["hold_exit"], "w").close()
        assert app.p.wait(30) == 0, app.log()
    finally:
        app.stop()
    [path] = trace_files(out, pid)
    assert path.endswith(f"_rank0_step{START}-{START + ITERS}.json"), path
    tr = load_trace(path)
    xs = check_schema(tr)
    assert tr["msmonitor"]["activityBackend"] == "cupti"
    assert (tr["msmonitor"]["startStep"], tr["msmonitor"]["stopStep"]) == (START, START + ITERS)
    want = truth_window(dump, START, START + ITERS)
    assert len(want) == 4 * ITERS
    # every kernel of the window (the NCCL one too: it is also a Communication event)
    got = sorted((e["name"], ns(tr, e["ts"]), ns(tr, e["ts"]) + int(e["dur"] * 1000))
                 for e in xs if e["args"]["kind"] == "Kernel")
    assert got == want
    assert sum(e["args"]["kind"] == "Communication" and e["name"] == "AllReduce" for e in xs) == ITERS
    assert sum(e["args"]["kind"] == "MemCpy" for e in xs) == ITERS
    steps = sorted(e["name"] for e in xs if e["args"]["kind"] == "Marker" and e["name"].startswith("step "))
    assert steps == [f"step {s}" for s in range(START, START + ITERS)]
    # gpu-check.sh's trace check (the GPU run uses it on its own program) passes on this
    # trace, and names what is wrong when the expected counts are not there
    script = os.path.join(SOURCE, "scripts", "gpu-check.sh")
    names = collections.Counter(n for n, _, _ in want)
    spec = ",".join(f"{n}={c}" for n, c in sorted(names.items()))
    r = subprocess.run(["bash", script, "--check-trace", str(out), str(START), str(START + ITERS), spec, str(ITERS)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "SUMMARY: 5 passed, 0 failed", r.stdout + r.stderr
    r = subprocess.run(["bash", script, "--check-trace", str(out), str(START), str(START + ITERS), "gemm_fwd=99",
                        str(ITERS)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "FAIL nputrace kernels: " in r.stdout, r.stdout
    assert r.stdout.splitlines()[-1] == "SUMMARY: 4 passed, 1 failed", r.stdout
    log = plugin_log(tmp_path)
    assert "delimited by the program's `step <N>` marker ranges" in log, log[-3000:]
    assert f"`step {START + ITERS}` began: window [{START}, {START + ITERS}) closed" in log, log[-3000:]


def test_start_step_already_passed_is_refused(make_daemon, tmp_path):
    """A start step the program has passed when the window is armed traces nothing."""
    daemon = make_daemon()
    out = tmp_path / "traces"
    files = {n: str(tmp_path / n) for n in ("ready", "hold", "hold_exit")}
    env = daemon.client_env()
    env.pop("MSMONITOR_BACKEND", None)
    env.update(CUDA_INJECTION64_PATH=binpath("libmsmonitor.so"), MSMONITOR_USE_DAEMON="1",
               MSMONITOR_NATIVE_POLL="1", MSMONITOR_CUPTI_LIB=os.path.join(SIMDIR, "libcupti.so"),
               MSMONITOR_LOG_PATH=str(tmp_path))
    argv = [os.path.join(SIMDIR, "mssim-cuda-app"), "--steps", "8", "--rate", "50", "--ready-file", files["ready"],
            "--hold", f"5:{files['hold']}", "--hold", f"9:{files['hold_exit']}"]
    app = Proc(argv, env=env, logname="cudaapp", tmpdir=str(tmp_path))
    try:
        wait_until(lambda: os.path.exists(files["ready"]), 20, "cuda app ready", app.log)
        pid = app.p.pid
        wait_registered(daemon, pid)
        r = run_dyno(daemon, "nputrace", "--start-step", "2", "--iterations", "2", "--log-file", str(out),
                     "--activities", "NPU")
        assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        wait_until(lambda: status_of(daemon, pid).get("nputrace") == "Ready", 30, "status Ready", app.log)
        open(files["hold"], "w").close()  # the first step seen is 5
        wait_until(lambda: status_of(daemon, pid).get("nputrace") == "Idle", 30, "status Idle", app.log)
        open(files["hold_exit"], "w").close()
        assert app.p.wait(30) == 0, app.log()
    finally:
        app.stop()
    assert not trace_files(out, pid)
    assert "start step 2 already passed (now at step 5)" in plugin_log(tmp_path)


def test_native_mspti_program_traced_by_its_mstx_steps(make_daemon, tmp_path):
    """The same on the simulated msPTI: mssim-train (native poller, mstx `step <n>` ranges, no
    step call) traces the first 3 steps that begin after the window is armed (start -1); the
    trace holds exactly the simulator's kernels that start from the start of `step S` until
    the start of `step S+3` (MSSIM_DUMP, host marker timestamps)."""
    from plugin_util import Workload
    daemon = make_daemon()
    out = tmp_path / "traces"
    wl = Workload(daemon, str(tmp_path), args=["--rate", "20"])
    try:
        pid = wl.p.pid
        wait_registered(daemon, pid)
        r = run_dyno(daemon, "nputrace", "--start-step", "-1", "--iterations", "3", "--log-file", str(out),
                     "--activities", "NPU")
        assert '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        wait_until(lambda: trace_files(out, pid), 60, "the trace file", lambda: plugin_log(tmp_path)[-3000:])
    finally:
        wl.stop()
    [path] = trace_files(out, pid)
    tr = load_trace(path)
    xs = check_schema(tr)
    s, e = tr["msmonitor"]["startStep"], tr["msmonitor"]["stopStep"]
    assert e == s + 3 and path.endswith(f"_step{s}-{e}.json"), path
    assert tr["msmonitor"]["activityBackend"] == "mspti"
    starts = {}
    for d in wl.ground_truth():
        if d["kind"] == "Marker" and d.get("sourceKind") == 0 and d["name"].startswith("step "):
            starts.setdefault(int(d["name"][5:]), d["timestamp"])
    lo, hi = starts[s], starts[e]
    want = sorted((d["name"], d["start"], d["end"]) for d in wl.ground_truth()
                  if d["kind"] == "Kernel" and lo <= d["start"] < hi)
    got = sorted((x["name"], ns(tr, x["ts"]), ns(tr, x["ts"]) + int(x["dur"] * 1000))
                 for x in xs if x["args"]["kind"] == "Kernel")
    assert want and got == want
    steps = sorted(x["name"] for x in xs if x["args"]["kind"] == "Marker" and x["name"].startswith("step ")
                   and x["cat"] == "user_annotation")
    assert steps == sorted(f"step {n}" for n in range(s, e))
