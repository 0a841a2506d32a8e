"""The per-rank step series in Prometheus (docs/cluster.md §2): 4 daemons as 4 hosts with
their /metrics, 2 simulated ranks each, SYNCHRONISED through the simulator's fabric (every
rank's wall time is the same), one rank 20 % slower in compute. In the FAQ's default mode (the
Python package in dyno mode, no LD_PRELOAD, so no Hccl records and no measured split: every
rank's msmonitor_step_split is 0) the real Prometheus scrapes them and evaluates the
documented rules (window and `for` shortened): the wait recorded from the ranks' communication
(inferred: less the job's shortest), and both alerts — the straggler on the step's work less
that wait, the fail-slow device on compute — fire for exactly that rank. Skipped where the
daemon has no Prometheus exposition."""
import json
import os
import re
import signal
import subprocess
import tempfile

from conftest import SOURCE, Daemon, Proc, binpath, free_port
from python_util import PYTHON, py_env, require_packages
from waits import wait_until

HOSTS = 4


def documented_rules():
    """The rule group of docs/cluster.md §2, with the test's window and `for`."""
    with open(os.path.join(SOURCE, "docs", "cluster.md"), encoding="utf-8") as f:
        doc = f.read()
    m = re.search(r"```yaml\n(groups:\n- name: msmonitor-slow-rank\n.*?)```", doc, re.S)
    assert m, "docs/cluster.md has no msmonitor-slow-rank rule group"
    rules = m.group(1).replace("[1m]", "[10s]").replace("for: 2m", "for: 3s")
    return rules.replace("- name: msmonitor-slow-rank\n", "- name: msmonitor-slow-rank\n  interval: 1s\n", 1)


def test_alert_rules_fire_for_the_slow_rank(tmp_path):
    import prom_util
    prom_util.need_prometheus()
    require_packages()
    PromServer = prom_util.PromServer
    port, pport = free_port(), free_port()
    addrs = [f"127.0.0.{i + 2}" for i in range(HOSTS)]
    daemons, jobs, prom = [], [], None
    try:
        for a in addrs:
            d = Daemon(extra=["--rpc_bind_address", a, "--use_prometheus", "--prometheus_address", a,
                              "--prometheus_port", str(pport)], port=port)
            d.wait_log("prometheus: serving /metrics")
            daemons.append(d)
        fabric = tmp_path / "fabric"
        fabric.mkdir()
        for h, d in enumerate(daemons):
            logdir = tempfile.mkdtemp(dir=str(tmp_path))
            os.makedirs(os.path.join(logdir, "shm"))
            # compute-bound steps (120 of 200 ms): the 24 ms of the slow rank are 12 % of the
            # step's work, above the straggler rule's 10 %
            env = py_env(d.client_env(), MSMONITOR_USE_DAEMON=1, MSMONITOR_SHM_DIR=os.path.join(logdir, "shm"),
                         MSMONITOR_LOG_PATH=logdir, MSMONITOR_POLL_INTERVAL_S="0.3", MSSIM_WL_KERNEL_SCALE=10)
            for k in ("MSSIM_CHECK_PRELOAD", "MSMONITOR_NATIVE_POLL"):
                env.pop(k, None)
            argv = [PYTHON, "-m", "mssim.train", "--ranks", "2", "--rank-offset", str(2 * h), "--world-size",
                    str(2 * HOSTS), "--steps", "0", "--rate", "5", "--fabric-dir", str(fabric),
                    "--slow-rank", "5", "--slow-factor", "1.2", "--slow-from-step", "1", "--slow-kind", "compute"]
            jobs.append(Proc(argv, env=env, logname=f"host{h}", tmpdir=logdir))
        hostfile = tmp_path / "hostfile"
        hostfile.write_text("".join(f"{a}\n" for a in addrs))
        dyno = [binpath("dyno"), "--hostfile", str(hostfile), "--port", str(port)]
        last = {}

        def stepping():
            # one poller per host (the creator of its segment) and both ranks stepping: they
            # apply a config at their next step, and the segment's stamp has 1 s resolution
            r = last["r"] = subprocess.run(dyno + ["status", "--json"], capture_output=True, text=True, timeout=60)
            st = json.loads(r.stdout.strip().splitlines()[-1])
            return sum(1 for p in st["processes"] if p.get("polling") and p.get("current_step", -1) >= 3) == HOSTS
        wait_until(stepping, 120, "every host's ranks stepping", diag=lambda: last["r"].stdout + last["r"].stderr,
                   alive=jobs, interval=0.3)
        r = subprocess.run(dyno + ["npu-monitor", "--npu-monitor-start", "--mspti-activity-kind",
                                   "Marker,Kernel,Communication", "--report-interval-s", "1"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.count('"commandStatus":"effective"') == HOSTS, r.stdout + r.stderr
        pdir = tempfile.mkdtemp(prefix="mmp")
        with open(os.path.join(pdir, "rules.yml"), "w") as f:
            f.write(documented_rules())
        prom = PromServer(pdir)
        prom.stop()
        with open(prom.cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                    f"rule_files: ['{pdir}/rules.yml']\n"
                    "scrape_configs:\n  - job_name: dynolog\n    honor_labels: true\n    static_configs:\n"
                    "      - targets: [" + ", ".join(f"'{a}:{pport}'" for a in addrs) + "]\n")
        prom.start()
        prom.wait_query('count(msmonitor_step_wall_ns)', pred=lambda x: x and int(x[0]["value"][1]) == 2 * HOSTS)
        # no rank measures its split (no Hccl without LD_PRELOAD) ...
        split = prom.wait_query('msmonitor_step_split', pred=lambda x: len(x) == 2 * HOSTS)
        assert {s["value"][1] for s in split} == {"0"}, split
        assert prom.query('max(msmonitor_step_wait_ns)')[0]["value"][1] == "0"
        # ... so the recorded wait is inferred: the others wait for the slow rank in the collective
        prom.wait_query('min(msmonitor:step_wait_ns:avg{rank!="5"})',
                        pred=lambda x: x and float(x[0]["value"][1]) > 15e6)
        for name in ("MsmonitorSlowRank", "MsmonitorFailSlow"):
            prom.wait_query(f'ALERTS{{alertname="{name}",alertstate="firing"}}', timeout=90)
        prom.wait_rule_evaluations(3)   # later evaluations must not flag another rank
        for name in ("MsmonitorSlowRank", "MsmonitorFailSlow"):
            firing = prom.query(f'ALERTS{{alertname="{name}",alertstate="firing"}}')
            assert [(a["metric"]["rank"], a["metric"]["instance"]) for a in firing] == [("5", f"{addrs[2]}:{pport}")], \
                (name, firing)
    finally:
        if prom:
            prom.stop()
        # all at once: a synchronised rank stopped alone leaves the others waiting for it
        for p in jobs:
            if p.p.poll() is None:
                os.killpg(p.p.pid, signal.SIGTERM)
        for p in jobs:
            p.stop()
        for d in daemons:
            d.stop()
