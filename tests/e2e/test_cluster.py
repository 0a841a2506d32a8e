"""Cluster view end to end (docs/cluster.md): 8 daemons as 8 hosts on 127.0.0.2 … 127.0.0.9
(own socket dir and HOME each, one RPC port, a hostfile naming them node01 … node08), two
simulated ranks per host with the plugin, and one real dyno for all of them: the merged
status, `dyno steps` naming the slow rank (compute / communication) or nobody, and
`dyno nputrace --aligned` giving every rank the same start step, and every rank's trace file
covering exactly the same steps."""
import json
import os
import subprocess
import tempfile
import time

import pytest

from conftest import Daemon, Proc, binpath, free_port
from dyn_util import dyn_rank, plugin_log, rank_env
from waits import wait_until

HOSTS = 8
RANKS_PER_HOST = 2
RATE = 10          # steps per second of every rank
INTERVAL_S = 1     # npu-monitor report interval
ONSET = 30         # first slow step


class Cluster:
    def __init__(self, tmp):
        self.tmp = tmp
        self.port = free_port()
        self.daemons = []
        self.ranks = []
        self.addrs = [f"127.0.0.{i + 2}" for i in range(HOSTS)]
        for a in self.addrs:
            self.daemons.append(Daemon(extra=["--rpc_bind_address", a], port=self.port))
        self.hostfile = os.path.join(tmp, "hostfile")
        with open(self.hostfile, "w") as f:
            for i, a in enumerate(self.addrs):
                f.write(f"{a}  # node{i + 1:02d}\n")

    def host_of(self, rank):
        return self.addrs[rank // RANKS_PER_HOST]

    def start_metric_ranks(self, steps, args=()):
        """mssim-train (native poller) per rank; rank r on host r // 2."""
        for r in range(HOSTS * RANKS_PER_HOST):
            d = self.daemons[r // RANKS_PER_HOST]
            # MSSIM_CHECK_PRELOAD=0: MemCpy needs LD_PRELOAD under the simulated CANN 26; without it
            # the start is (rightly, issue 22) rejected for that kind
            # POD_NAME: each rank names its pod (docs/deploy.md#attribution), which dyno steps shows
            env = d.client_env(MSMONITOR_USE_DAEMON=1, MSMONITOR_NATIVE_POLL=1, RANK=r, LOCAL_RANK=r % 2,
                               MSMONITOR_MSPTI_LIB=binpath("libmspti.so"), MSSIM_CHECK_PRELOAD=0,
                               POD_NAME=f"trainer-{r}", POD_NAMESPACE="ml")
            argv = [binpath("mssim-train"), "--with-plugin", binpath("libmsmonitor.so"), "--steps", str(steps),
                    "--rate", str(RATE)] + list(args)
            self.ranks.append(Proc(argv, env=env, logname=f"rank{r}", tmpdir=tempfile.mkdtemp(dir=self.tmp)))

    def start_dyno_ranks(self):
        """dyn_rank (dyno mode: dynamic_profile step() per step) per rank. Each rank gets its own
        segment, so each is its segment's creator and reports its own step and trace status
        (with one segment per host only the creator reports)."""
        for r in range(HOSTS * RANKS_PER_HOST):
            d = self.daemons[r // RANKS_PER_HOST]
            shm = os.path.join(d.sockdir, f"shm{r}")
            os.makedirs(shm, exist_ok=True)
            logdir = tempfile.mkdtemp(dir=self.tmp)
            env = rank_env(d.client_env(), shm, logdir, r, LOCAL_RANK=r % 2, MSSIM_WL_RATE=5)
            self.ranks.append(Proc([dyn_rank()], env=env, logname=f"rank{r}", tmpdir=logdir))

    def dyno(self, *args, timeout=60):
        argv = [binpath("dyno"), "--hostfile", self.hostfile, "--port", str(self.port)] + list(args)
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=self.daemons[0].client_env())

    def dyno_json(self, *args):
        r = self.dyno(*args)
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    def wait_polling(self, n):
        def ok():
            st = self.dyno_json("status", "--json")
            return sum(1 for p in st["processes"] if p.get("polling")) >= n
        wait_until(ok, 60, f"{n} polling processes")

    def monitor(self):
        r = self.dyno("npu-monitor", "--npu-monitor-start", "--mspti-activity-kind",
                      "Kernel,Marker,Communication,MemCpy", "--report-interval-s", str(INTERVAL_S))
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.count('"commandStatus":"effective"') == HOSTS, r.stdout

    def stop(self):
        for p in self.ranks:
            p.stop()
        for d in self.daemons:
            d.stop()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(str(tmp_path))
    yield c
    c.stop()


def watch_for_slow(c, until_step):
    """`dyno steps --json` until a view flags a rank or every rank passed until_step; returns
    (first flagging view or None, all views)."""
    views = []

    def decided():
        v = c.dyno_json("steps", "--json")
        views.append(v)
        if v["slow_ranks"]:
            return (v,)
        return (None,) if v["window"]["last_step"] >= until_step else None
    return wait_until(decided, 120, f"a view flagging a rank or reaching step {until_step}",
                      diag=lambda: repr(views[-1] if views else None), interval=0.2)[0], views


@pytest.mark.parametrize("kind,factor", [("compute", 1.2), ("communication", 3.0)])
def test_slow_rank_named(cluster, kind, factor):
    slow = 5  # host 127.0.0.4 (node03), second rank
    cluster.start_metric_ranks(steps=0, args=["--slow-rank", str(slow), "--slow-factor", str(factor),
                                              "--slow-from-step", str(ONSET), "--slow-kind", kind])
    cluster.wait_polling(HOSTS * RANKS_PER_HOST)
    st = cluster.dyno_json("status", "--json")
    assert sorted({p["host"] for p in st["processes"]}) == sorted(cluster.addrs)
    cluster.monitor()
    # Two report intervals after the onset the slow rank is at most this far.
    limit = ONSET + 2 * RATE * INTERVAL_S
    v, views = watch_for_slow(cluster, until_step=ONSET + 6 * RATE * INTERVAL_S)
    assert v is not None, views[-1]
    assert len(v["slow_ranks"]) == 1, v
    s = v["slow_ranks"][0]
    assert (s["rank"], s["host"], s["cause"]) == (slow, cluster.host_of(slow), kind), v
    assert ONSET <= s["since_step"] <= ONSET + 3, v
    assert s["last_step"] <= limit, v
    assert s["ratio"] > 1.1 and s["pid"] > 0 and s["pod"] == f"trainer-{slow}", v
    # every view before it was clean; the ranks all report
    assert all(not x["slow_ranks"] for x in views[:-1])
    assert v["ranks"] == HOSTS * RANKS_PER_HOST
    # the text view names it too
    r = cluster.dyno("steps")
    assert r.returncode == 0, r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith(cluster.host_of(slow))]
    assert len(line) == 1 and f" {slow} " in line[0] and kind in line[0] and line[0].endswith(f"trainer-{slow}"), \
        r.stdout


def test_clean_run_flags_nothing(cluster):
    cluster.start_metric_ranks(steps=200)
    cluster.wait_polling(HOSTS * RANKS_PER_HOST)
    cluster.monitor()
    views = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and all(p.p.poll() is None for p in cluster.ranks):
        views.append(cluster.dyno_json("steps", "--json", "--last", "128"))
        time.sleep(0.5)
    views.append(cluster.dyno_json("steps", "--json", "--last", "128"))
    flagged = [v for v in views if v["slow_ranks"]]
    assert not flagged, flagged[0]
    assert views[-1]["window"]["last_step"] >= 190, views[-1]
    assert views[-1]["ranks"] == HOSTS * RANKS_PER_HOST
    # --watch prints one view per period; --count bounds it
    r = cluster.dyno("steps", "--watch", "--interval-s", "1", "--count", "2", "--json")
    assert r.returncode == 0, r.stderr
    assert len([ln for ln in r.stdout.splitlines() if ln.startswith("{")]) == 2


def test_status_table_and_aligned_nputrace(cluster, tmp_path):
    cluster.start_dyno_ranks()
    n = HOSTS * RANKS_PER_HOST

    # Step 10 is 2 s in: the segment's config timestamp has one-second resolution, so a config
    # written in the second the segment was created would not look new to the rank.
    def stepping():
        st = cluster.dyno_json("status", "--json")
        return sum(1 for p in st["processes"] if p.get("current_step", -1) >= 10) >= n
    wait_until(stepping, 60, "every rank reporting its step")
    r = cluster.dyno("status")
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("127.0.0.")]
    assert len(rows) == n and {ln.split()[0] for ln in rows} == set(cluster.addrs), r.stdout
    assert r.stdout.strip().endswith(f"Summary: {HOSTS} hosts, {HOSTS} succeeded, 0 failed")

    bad = cluster.dyno("nputrace", "--start-step", "5", "--aligned", "--iterations", "2", "--log-file", str(tmp_path))
    assert bad.returncode == 2 and "--aligned picks the start step" in bad.stderr

    r = cluster.dyno("nputrace", "--start-step", "-1", "--aligned", "--iterations", "2",
                     "--log-file", str(tmp_path), "--process-limit", "8")
    assert r.returncode == 0, r.stdout + r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("Aligned start step: ")]
    assert len(line) == 1, r.stdout
    start = int(line[0].split()[3])
    assert r.stdout.count('"commandStatus":"effective"') == HOSTS, r.stdout

    # What each rank received: its plugin logs the trace window it armed; the merged status
    # shows the trace state (and start_step while Ready/Running) of every rank.
    import re
    seen, states = {}, {}

    def all_armed():
        for i, p in enumerate(cluster.ranks):
            m = re.findall(r"nputrace ready: steps \[(\d+), (\d+)\)", plugin_log(p.tmpdir))
            if m:
                seen[i] = (int(m[-1][0]), int(m[-1][1]))
        for p in cluster.dyno_json("status", "--json")["processes"]:
            states.setdefault((p["host"], p["pid"]), set()).add(p["nputrace"])
            if "start_step" in p:
                assert p["start_step"] == start, p
        return len(seen) >= n
    wait_until(all_armed, 60, "every rank's trace window", diag=lambda: repr(seen) + r.stdout)
    assert set(seen.values()) == {(start, start + 2)}, seen  # the same 2 iterations everywhere
    assert len(states) == n and {h for h, _ in states} == set(cluster.addrs)
    assert all(s & {"Ready", "Running", "Idle"} for s in states.values()), states

    # and what each rank wrote: one trace per rank, every one of exactly steps [start, start+2)
    from trace_util import check_schema, load_trace, step_ranges, trace_files
    wait_until(lambda: all(trace_files(tmp_path, p.p.pid) for p in cluster.ranks), 90, "every rank's trace",
               diag=lambda: repr(sorted(os.listdir(tmp_path))))
    for p in cluster.ranks:
        files = trace_files(tmp_path, p.p.pid)
        assert len(files) == 1 and f"_step{start}-{start + 2}.json" in files[0], files
        tr = load_trace(files[0])
        check_schema(tr)
        assert step_ranges(tr) == [f"step {start}", f"step {start + 1}"], (files[0], step_ranges(tr))


@pytest.mark.parametrize("kind", ["host"])
def test_slow_rank_host_gaps(cluster, kind):
    """A host-side stall with an idle device on one rank is named "host"."""
    slow = 10
    cluster.start_metric_ranks(steps=0, args=["--slow-rank", str(slow), "--slow-factor", "1.5",
                                              "--slow-from-step", str(ONSET), "--slow-kind", kind])
    cluster.wait_polling(HOSTS * RANKS_PER_HOST)
    cluster.monitor()
    v, views = watch_for_slow(cluster, until_step=ONSET + 6 * RATE * INTERVAL_S)
    assert v is not None, views[-1]
    assert [(s["rank"], s["host"], s["cause"]) for s in v["slow_ranks"]] == [(slow, cluster.host_of(slow), kind)], v


def test_python_train_slow_rank_options(tmp_path):
    """python -m mssim.train passes --rank-offset and the --slow-* options to its ranks: the
    simulator of exactly the chosen rank reports itself slow."""
    from python_util import PYTHON, py_env, require_packages
    require_packages()
    env = py_env(MSSIM_LOG="info")
    env.pop("MSMONITOR_USE_DAEMON", None)
    argv = [PYTHON, "-m", "mssim.train", "--ranks", "2", "--rank-offset", "4", "--steps", "3", "--rate", "0",
            "--slow-rank", "5", "--slow-factor", "1.5", "--slow-from-step", "2", "--slow-kind", "communication"]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    lines = [ln for ln in out.splitlines() if "is slow" in ln]
    assert len(lines) == 1 and "this rank (5) is slow: communication x1.5 from step 2" in lines[0], out
    assert "rank 4 finished 3 steps" in out and "rank 5 finished 3 steps" in out, out
    bad = subprocess.run([PYTHON, "-m", "mssim.train", "--slow-factor", "0"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "--slow-factor 0.0: must be > 0" in bad.stderr
    bad = subprocess.run([binpath("mssim-train"), "--slow-kind", "disk"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "invalid value for --slow-kind: 'disk'" in bad.stderr
