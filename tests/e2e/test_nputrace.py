"""dyno nputrace end to end (docs/nputrace.md, issue 11): two C ranks in dyno mode
(tests/unit/plugin/control/dyn_rank over the msPTI simulator) and a real dynolog. The window
with --start-step -1 is aligned by the shm creator, both ranks trace the same steps, each
trace holds exactly the simulator's ground truth of its window (MSSIM_DUMP: only the window's
session subscribes), passes the schema check, and dyno status walks Ready -> Running -> Idle
with the steps. Refusals: npu-monitor while tracing, a second nputrace, a symlinked or
non-directory --log-file, a start step already passed; the job leaving mid-window leaves a
valid partial trace."""
import json
import os
import re
import signal
import time

from conftest import Proc, run_dyno
from dyn_util import dyn_rank, plugin_log, rank_env
from python_util import read_dump
from trace_util import check_schema, event_keys, in_window, load_trace, step_ranges, trace_files, truth_keys
from waits import wait_polling, wait_until


def status(daemon):
    o = run_dyno(daemon, "status").stdout
    return json.loads(o[o.index("{"):]) if "{" in o else {}


def start_ranks(daemon, tmp_path, n=2, rate=20, **extra):
    shm = tmp_path / "shm"
    shm.mkdir(exist_ok=True)
    ranks = []
    for r in range(n):
        logdir = tmp_path / f"rank{r}"
        logdir.mkdir()
        env = rank_env(daemon.client_env(), shm, logdir, r, MSSIM_WL_RATE=rate, WORLD_SIZE=n,
                       MSSIM_CHECK_PRELOAD=0, MSSIM_DUMP=str(logdir / "dump.jsonl"), **extra)
        ranks.append((Proc([dyn_rank()], env=env, logname=f"rank{r}", tmpdir=str(logdir)), logdir))
    for p, _ in ranks:
        p.wait_log("init 0", timeout=30)
    t_init = int(time.time())
    creator = [p for p, d in ranks if "as creator" in plugin_log(d)][0]
    wait_polling(daemon, run_dyno)
    # A rank acts on a segment time strictly greater than its init second (docs/design/ipc.md#ranks).
    wait_until(lambda: int(time.time()) > t_init, 2, "the next second")
    return ranks, creator


def stop_ranks(ranks):
    rcs = [p.stop(signal.SIGTERM, timeout=30) for p, _ in ranks]
    assert rcs == [0] * len(ranks), [p.log() for p, _ in ranks]


def diag(ranks):
    return lambda: "\n".join(f"--- {d}\n{plugin_log(d)[-3000:]}" for _, d in ranks)


def test_two_ranks_trace_the_same_window(make_daemon, tmp_path):
    daemon = make_daemon()
    out = tmp_path / "traces"
    ranks, creator = start_ranks(daemon, tmp_path, rate=10)
    seen = []
    try:
        r = run_dyno(daemon, "nputrace", "--start-step", "-1", "--iterations", "4", "--log-file", str(out))
        assert r.returncode == 0 and '"commandStatus":"effective"' in r.stdout, r.stdout + r.stderr
        assert "Trace output files will be written to:" in r.stdout

        def both_written():
            st = status(daemon)
            for p in st.get("processes", []):
                if p["pid"] == creator.p.pid:
                    seen.append((p["nputrace"], p.get("start_step"), p.get("stop_step")))
            return all(trace_files(out, p.p.pid) for p, _ in ranks)
        wait_until(both_written, 60, "a trace file from each rank", diag(ranks))
        wait_until(lambda: any(s[0] == "Idle" for s in seen[-1:]) or both_written() and
                   status(daemon)["processes"] and
                   [p for p in status(daemon)["processes"] if p["pid"] == creator.p.pid][0]["nputrace"] == "Idle",
                   15, "Idle after the window")
    finally:
        stop_ranks(ranks)

    windows = set()
    for p, d in ranks:
        files = trace_files(out, p.p.pid)
        assert len(files) == 1, files
        tr = load_trace(files[0])
        check_schema(tr)
        m = tr["msmonitor"]
        windows.add((m["startStep"], m["stopStep"]))
        assert m["stopStep"] - m["startStep"] == 4
        assert tr["distributedInfo"]["world_size"] == 2
        assert m["activityBackend"] == "mspti"
        # Exactly the window's step ranges, and exactly the simulator's records.
        assert step_ranges(tr) == sorted(f"step {s}" for s in range(m["startStep"], m["stopStep"]))
        truth = truth_keys(read_dump(str(d / "dump.jsonl")))
        assert m["windowEndNanoseconds"] > tr["baseTimeNanoseconds"]
        assert truth and event_keys(tr) == in_window(tr, truth)
        kinds = {e["args"]["kind"] for e in tr["traceEvents"] if e["ph"] == "X"}
        assert {"Kernel", "Marker"} <= kinds, kinds
        # Every kernel launched by an API call in the window has its ac2g flow.
        corr_api = {e["args"]["correlation"] for e in tr["traceEvents"]
                    if e["ph"] == "X" and e["cat"] == "cuda_runtime"}
        kernels = [e for e in tr["traceEvents"] if e["ph"] == "X" and e["cat"] == "kernel" and
                   e["args"].get("correlation") in corr_api]
        flows = {e["id"] for e in tr["traceEvents"] if e["ph"] == "f"}
        assert kernels and {k["args"]["correlation"] for k in kernels} <= flows
        assert f"nputrace: trace of steps [{m['startStep']}, {m['stopStep']})" in plugin_log(d)
    assert len(windows) == 1, windows          # both ranks traced the same steps
    start, stop = windows.pop()
    assert ("Ready", start, stop) in seen or ("Running", start, stop) in seen, seen
    assert "aligned for every rank to step %d" % start in "".join(plugin_log(d) for _, d in ranks)


def test_refusals_and_partial_window(make_daemon, tmp_path):
    daemon = make_daemon()
    out = tmp_path / "traces"
    ranks, creator = start_ranks(daemon, tmp_path, n=1, rate=20)
    (p, d), = ranks
    try:
        # --log-file that is a symlink, then one that is a file: refused with one line each.
        real = tmp_path / "real"
        real.mkdir()
        link = tmp_path / "link"
        os.symlink(str(real), str(link))
        r = run_dyno(daemon, "nputrace", "--start-step", "-1", "--iterations", "2", "--log-file", str(link),
                     "--wait-s", "60", timeout=120)
        # issue 22: the rank's refusal is dyno's outcome, exit 3
        assert r.returncode == 3, r.stdout + r.stderr
        assert re.search(r"^Outcome: localhost pid %d rank 0: rejected \(Idle\): .*is a symbolic link" % p.p.pid,
                         r.stdout, re.M), r.stdout
        wait_until(lambda: "is a symbolic link" in plugin_log(d), 15, "the symlink refusal", diag(ranks))
        # A start step already passed.
        step = max(2, [q for q in status(daemon)["processes"] if q["pid"] == p.p.pid][0]["current_step"])
        r = run_dyno(daemon, "nputrace", "--start-step", "1", "--iterations", "2", "--log-file", str(out),
                     "--wait-s", "60", timeout=120)
        assert r.returncode == 3, r.stdout + r.stderr
        assert "start step 1 already passed" in r.stdout, r.stdout
        wait_until(lambda: "start step 1 already passed" in plugin_log(d), 15, "the passed-step refusal",
                   diag(ranks))
        assert step >= 2
        # A long window: npu-monitor is refused by the gate while it runs, a second nputrace
        # by the daemon (it names the tracing pid); then the job leaves mid-window.
        r = run_dyno(daemon, "nputrace", "--start-step", "-1", "--iterations", "100000", "--log-file", str(out))
        assert '"commandStatus":"effective"' in r.stdout, r.stdout
        wait_until(lambda: "nputrace: tracing steps" in plugin_log(d), 30, "the window to start", diag(ranks))
        wait_until(lambda: [q for q in status(daemon)["processes"] if q["pid"] == p.p.pid][0]["nputrace"]
                   == "Running", 15, "status Running")
        r = run_dyno(daemon, "npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel")
        assert '"commandStatus":"ineffective"' in r.stdout and "Note:" in r.stdout, r.stdout
        assert r.returncode == 5, r.stdout
        r = run_dyno(daemon, "nputrace", "--start-step", "-1", "--iterations", "2", "--log-file", str(out))
        # refused by the daemon, with the reason: no rank receives the second config
        assert '"commandStatus":"ineffective"' in r.stdout, r.stdout
        assert "Note: command not applied (ineffective): nputrace is already Running in pid" in r.stdout, r.stdout
        assert r.returncode == 5, r.stdout
    finally:
        stop_ranks(ranks)
    log = plugin_log(d)
    assert "partial trace is written" in log
    files = trace_files(out, p.p.pid)
    assert len(files) == 1, files
    tr = load_trace(files[0])
    check_schema(tr)
    assert tr["msmonitor"]["windowEndNanoseconds"] == 0   # ended by the exit, not by a step
    assert event_keys(tr) == truth_keys(read_dump(str(d / "dump.jsonl")))
    assert not [f for f in os.listdir(out) if f.endswith(".tmp")]
    assert os.listdir(real) == []


def test_export_type_db_writes_the_window_db_too(make_daemon, tmp_path):
    import glob
    import sqlite3
    daemon = make_daemon()
    out = tmp_path / "traces"
    ranks, _ = start_ranks(daemon, tmp_path, n=1, rate=20)
    (p, d), = ranks
    try:
        r = run_dyno(daemon, "nputrace", "--start-step", "-1", "--iterations", "3", "--log-file", str(out),
                     "--export-type", "Db")
        assert '"commandStatus":"effective"' in r.stdout, r.stdout
        wait_until(lambda: trace_files(out, p.p.pid) and glob.glob(str(out / f"msmonitor_{p.p.pid}_*.db")), 60,
                   "the trace and the DB", diag(ranks))
    finally:
        stop_ranks(ranks)
    tr = load_trace(trace_files(out, p.p.pid)[0])
    check_schema(tr)
    kern = {(k[2], k[3]) for k in event_keys(tr) if k[0] == "Kernel"}
    db = sqlite3.connect(glob.glob(str(out / f"msmonitor_{p.p.pid}_*.db"))[0])
    rows = set(db.execute("SELECT t.startNs, t.endNs FROM TASK t JOIN COMPUTE_TASK_INFO c "
                          "ON c.globalTaskId = t.globalTaskId"))
    db.close()
    # the DB holds exactly the window's kernels: the same cut at the step boundary as the trace
    assert kern and kern == rows, (len(kern), len(rows), sorted(rows - kern)[:5])
