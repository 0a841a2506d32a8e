"""Slow ranks in SYNCHRONISED training (docs/cluster.md §4, docs/simulator.md "Synchronised
collectives"): 8 daemons as 8 hosts on 127.0.0.2 … 127.0.0.9, two mssim-train ranks each
whose all-reduce waits for the slowest of all 16 ranks through the fabric directory of the
test. Every rank's wall time is the same, so `dyno steps` must find the straggler from the
compute / host / transfer split: compute x1.2 (paced 5 steps/s and unpaced) -> `compute`,
a host stall -> `host`, a 3x slower link -> `communication`, a clean run -> nobody; the
job-wide cost per step is checked against the simulator's own record of the waits."""
import json
import os
import statistics
import subprocess
import tempfile
import time

import pytest

from conftest import SANITIZED, Proc, binpath
from test_cluster import HOSTS, RANKS_PER_HOST, Cluster

WORLD = HOSTS * RANKS_PER_HOST
INTERVAL_S = 1
SLOW = 5  # host 127.0.0.4 (node03), second rank


class SyncCluster(Cluster):
    def __init__(self, tmp):
        super().__init__(tmp)
        self.fabric = os.path.join(tmp, "fabric")
        os.makedirs(self.fabric)

    def start_sync_ranks(self, steps, rate, args=()):
        for r in range(WORLD):
            d = self.daemons[r // RANKS_PER_HOST]
            env = d.client_env(MSMONITOR_USE_DAEMON=1, MSMONITOR_NATIVE_POLL=1, RANK=r, LOCAL_RANK=r % 2,
                               WORLD_SIZE=WORLD, MSSIM_FABRIC_DIR=self.fabric, MSSIM_CHECK_PRELOAD=0,
                               MSMONITOR_MSPTI_LIB=binpath("libmspti.so"))
            argv = [binpath("mssim-train"), "--with-plugin", binpath("libmsmonitor.so"), "--steps", str(steps),
                    "--rate", str(rate)] + list(args)
            self.ranks.append(Proc(argv, env=env, logname=f"rank{r}", tmpdir=tempfile.mkdtemp(dir=self.tmp)))

    def monitor(self):
        r = self.dyno("npu-monitor", "--npu-monitor-start", "--mspti-activity-kind",
                      "Kernel,Marker,Communication,Hccl,MemCpy", "--report-interval-s", str(INTERVAL_S))
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.count('"commandStatus":"effective"') == HOSTS, r.stdout

    def newest_step(self):
        v = self.dyno_json("steps", "--json", "--last", "1")
        return v["window"]["last_step"]

    def truth(self):
        """seq -> rank -> wait ns, from the simulator's ground-truth files."""
        out = {}
        for r in range(WORLD):
            path = os.path.join(self.fabric, f"truth.{r}.jsonl")
            if not os.path.exists(path):
                continue
            with open(path) as f:
                for ln in f:
                    d = json.loads(ln)
                    out.setdefault(d["seq"], {})[d["rank"]] = d["wait"]
        return out


@pytest.fixture
def cluster(tmp_path):
    c = SyncCluster(str(tmp_path))
    yield c
    c.stop()


def watch(c, until_step, deadline_s=180):
    """`dyno steps --json` until a view flags a rank or the window passed until_step."""
    views = []
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        v = c.dyno_json("steps", "--json")
        views.append(v)
        if v["slow_ranks"] or v["window"]["last_step"] >= until_step:
            return v, views
        time.sleep(0.2)
    raise AssertionError(f"no view reached step {until_step}: {views[-1] if views else None}")


def start_and_find(cluster, rate, kind, factor, onset_after):
    """Start the job with the slowdown at onset_after steps past the first monitored one."""
    # The onset must lie after the monitor started: unpaced ranks run far ahead, so the job
    # runs clean until the monitor is on, then the onset is put well past the newest step.
    cluster.start_sync_ranks(steps=0, rate=rate, args=["--slow-rank", str(SLOW), "--slow-factor", str(factor),
                                                       "--slow-from-step", str(onset_after), "--slow-kind", kind])
    cluster.wait_polling(WORLD)
    cluster.monitor()
    return onset_after


def check_flagged(cluster, v, views, kind, onset, per_interval):
    assert v is not None and v["slow_ranks"], views[-1]
    assert len(v["slow_ranks"]) == 1, v
    s = v["slow_ranks"][0]
    assert (s["rank"], s["host"], s["cause"]) == (SLOW, cluster.host_of(SLOW), kind), v
    # Under ASan+UBSan every rank runs several times slower and its steps' noise grows with it:
    # the onset and the cost are measured in the release tree; here the rank, host and cause.
    if not SANITIZED:
        assert onset <= s["since_step"] <= onset + 3, v
    # within 2 report intervals of the onset (plus the 3 consecutive steps of the rule): the
    # last view that did not flag must be inside that bound (how late this loop's next
    # `dyno steps` came on a loaded machine is the test's latency, not the monitor's)
    unflagged = views[-2]["window"]["last_step"] if len(views) > 1 else onset
    assert unflagged <= onset + 2 * per_interval + 3, (unflagged, v)
    assert all(not x["slow_ranks"] for x in views[:-1]), [x for x in views if x["slow_ranks"]][0]
    assert v["ranks"] == WORLD
    print("flagged:", json.dumps(s))
    return s


def job_cost_truth(cluster, first, last):
    """Mean over steps [first, last] of how much longer the ranks wait (their median) than the
    slow rank, from the simulator's own record: the n-th all-reduce is step n."""
    t = cluster.truth()
    costs = []
    for n in range(first, last + 1):
        w = t.get(n, {})
        if len(w) < WORLD:
            continue
        costs.append((statistics.median(w.values()) - w[SLOW]) / 1e6)
    assert costs, (first, last, sorted(t)[-5:])
    print("truth cost:", statistics.mean(costs))
    return statistics.mean(costs)


@pytest.mark.parametrize("rate", [5, 0], ids=["paced5", "unpaced"])
def test_sync_compute_straggler(cluster, rate):
    # paced: the onset at step 30 as the issue has it; unpaced ranks run ~10x faster, so the
    # onset sits later to lie after the monitor starts
    onset = 30 if rate else 400
    start_and_find(cluster, rate, "compute", 1.2, onset)
    if not rate:
        assert cluster.newest_step() < onset - 20, "the unpaced job passed the onset before the monitor started"
    v, views = watch(cluster, until_step=onset + 200)
    per_interval = (rate or 60) * INTERVAL_S
    s = check_flagged(cluster, v, views, "compute", onset, per_interval)
    # the walls are equal (synchronised), so the wall rule alone could not have named it
    assert s["ratio"] < 1.08, v
    assert s["excess_ms"]["compute"] > 1.5, v
    # the job-wide cost per step (what the others wait) against the simulator's ground truth
    truth = job_cost_truth(cluster, s["since_step"], s["cost_to_step"])
    # Paced ranks idle between steps, so the target's 10 % holds whatever else runs. Unpaced
    # ranks (16 on the machine's cores) contend for CPU: with other work on the machine their
    # waits carry scheduling noise the rule rightly does not pin on the slow rank (a run under
    # a parallel build measured 2.52 against 3.03 ms), so that case gets 25 %.
    tol = 0.10 if rate else 0.25
    assert SANITIZED or abs(s["cost_ms"] - truth) <= tol * truth, (s, truth)
    # the text view names it too
    r = cluster.dyno("steps")
    assert r.returncode == 0, r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith(cluster.host_of(SLOW))]
    assert len(line) == 1 and f" {SLOW} " in line[0] and "compute" in line[0], r.stdout


@pytest.mark.parametrize("kind,factor", [("host", 1.5), ("communication", 3.0)])
def test_sync_host_and_link(cluster, kind, factor):
    onset = 30
    start_and_find(cluster, 5, kind, factor, onset)
    v, views = watch(cluster, until_step=onset + 60)
    s = check_flagged(cluster, v, views, kind, onset, 5 * INTERVAL_S)
    if kind == "host":
        truth = job_cost_truth(cluster, s["since_step"], s["cost_to_step"])
        assert SANITIZED or abs(s["cost_ms"] - truth) <= 0.10 * truth, (s, truth)
    else:
        assert s["excess_ms"]["communication"] > 2 and s["excess_ms"]["compute"] < 1, v


def test_sync_clean_run_flags_nothing(cluster):
    cluster.start_sync_ranks(steps=200, rate=0)
    cluster.wait_polling(WORLD)
    cluster.monitor()
    views = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and all(p.p.poll() is None for p in cluster.ranks):
        views.append(cluster.dyno_json("steps", "--json", "--last", "128"))
        time.sleep(0.5)
    views.append(cluster.dyno_json("steps", "--json", "--last", "128"))
    flagged = [v for v in views if v["slow_ranks"]]
    assert not flagged, flagged[0]
    assert views[-1]["window"]["last_step"] >= 190, views[-1]
    assert views[-1]["ranks"] == WORLD
    # the ranks really were synchronised: some waited inside the collective
    assert any(w for w in cluster.truth().get(150, {}).values())


def test_report_agrees_with_dyno_steps(cluster, tmp_path):
    """The same synchronised job judged twice by the one rule: `dyno steps` on the step
    summaries of a metric-mode session, then the HTML report on the DB files of a second
    session of that job: the same rank, the same cause."""
    import glob
    import re
    from conftest import BUILD
    from dyn_util import plugin_log, wait_until
    onset = 30
    start_and_find(cluster, 5, "compute", 1.2, onset)
    v, views = watch(cluster, until_step=onset + 60)
    s = check_flagged(cluster, v, views, "compute", onset, 5 * INTERVAL_S)
    r = cluster.dyno("npu-monitor", "--npu-monitor-stop")
    assert r.returncode == 0, r.stdout + r.stderr

    def stopped(n):
        return lambda: sum(plugin_log(p.tmpdir).count("MsptiMonitor stop successfully") for p in cluster.ranks) >= n
    wait_until(stopped(WORLD), 60, "every rank's metric session stopped")
    out = str(tmp_path / "db")
    r = cluster.dyno("npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Kernel,Marker,Communication,Hccl,MemCpy",
                     "--report-interval-s", "1", "--log-file", out, "--export-type", "DB")
    assert r.returncode == 0 and r.stdout.count('"commandStatus":"effective"') == HOSTS, r.stdout + r.stderr
    wait_until(lambda: len(glob.glob(os.path.join(out, "**", "*.db"), recursive=True)) >= WORLD, 60,
               "every rank's DB file")
    time.sleep(3)  # a few steps in the DB files (5 steps/s); the verdict needs 3 consecutive
    r = cluster.dyno("npu-monitor", "--npu-monitor-stop")
    assert r.returncode == 0, r.stdout + r.stderr
    wait_until(stopped(2 * WORLD), 60, "every rank's DB session stopped")
    html = str(tmp_path / "report.html")
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python", "pkg"))
    r = subprocess.run(["/usr/bin/python3", "-m", "msmonitor", "report", out, "-o", html], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(html, encoding="utf-8") as f:
        page = f.read()
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                                re.S).group(1))
    assert data["slow_ranks"] == [s["rank"]], data["slow_rule"]
    assert data["slow_rule"]["detail"][str(s["rank"])]["cause"] == s["cause"] == "compute", data["slow_rule"]


def test_python_driver_synchronises(tmp_path):
    """python -m mssim.train --fabric-dir: the Python driver's ranks meet in every all-reduce —
    the simulator's ground truth has one line per rank and step, all with the same `last`
    arrival, and the compute-slow rank 1 is the one the other waits for."""
    from python_util import PYTHON, py_env, require_packages
    require_packages()
    fabric = tmp_path / "fabric"
    fabric.mkdir()
    env = py_env()
    env.pop("MSMONITOR_USE_DAEMON", None)
    argv = [PYTHON, "-m", "mssim.train", "--ranks", "2", "--steps", "6", "--rate", "0", "--fabric-dir", str(fabric),
            "--slow-rank", "1", "--slow-factor", "1.5", "--slow-kind", "compute"]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = {}
    for rk in (0, 1):
        with open(fabric / f"truth.{rk}.jsonl") as f:
            for ln in f:
                d = json.loads(ln)
                lines[(d["seq"], d["rank"])] = d
    assert sorted(lines) == [(s, rk) for s in range(1, 7) for rk in (0, 1)], sorted(lines)
    for s in range(1, 7):
        assert lines[(s, 0)]["last"] == lines[(s, 1)]["last"]
    # from the second step on the fast rank 0 waits for rank 1's 50 % longer kernels (~6 ms)
    # (medians: one step's wait can be skewed by a late-scheduled process on a loaded host)
    assert statistics.median(lines[(s, 0)]["wait"] for s in range(2, 7)) > 3e6, lines
    assert statistics.median(lines[(s, 1)]["wait"] for s in range(2, 7)) < 1e6, lines
    bad = subprocess.run([PYTHON, "-m", "mssim.train", "--fabric-dir", str(tmp_path / "nope")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--fabric-dir" in bad.stderr and "not a directory" in bad.stderr
