"""The per-rank step series in Prometheus (docs/cluster.md §2): 4 daemons as 4 hosts with
their /metrics, 2 simulated ranks each, SYNCHRONISED through the simulator's fabric (every
rank's wall time is the same), one rank 20 % slower in compute; the real Prometheus scrapes
them and evaluates the documented alert rule on the wall-less-wait series (window and `for`
shortened), which fires for exactly that rank. Skipped where the daemon has no Prometheus
exposition."""
import json
import os
import subprocess
import tempfile

from conftest import Daemon, Proc, binpath, free_port
from waits import wait_until

HOSTS = 4
RULE = """groups:
- name: msmonitor-slow-rank
  interval: 1s
  rules:
  - alert: MsmonitorSlowRank
    expr: |
      (avg_over_time(msmonitor_step_wall_ns[10s]) - avg_over_time(msmonitor_step_wait_ns[10s]))
        > on(job) group_left()
      1.10 * quantile by (job) (0.5,
        avg_over_time(msmonitor_step_wall_ns[10s]) - avg_over_time(msmonitor_step_wait_ns[10s]))
    for: 3s
"""


def test_alert_rule_fires_for_the_slow_rank(tmp_path):
    import prom_util
    prom_util.need_prometheus()
    PromServer = prom_util.PromServer
    port, pport = free_port(), free_port()
    addrs = [f"127.0.0.{i + 2}" for i in range(HOSTS)]
    daemons, ranks, prom = [], [], None
    try:
        for a in addrs:
            d = Daemon(extra=["--rpc_bind_address", a, "--use_prometheus", "--prometheus_address", a,
                              "--prometheus_port", str(pport)], port=port)
            d.wait_log("prometheus: serving /metrics")
            daemons.append(d)
        fabric = tmp_path / "fabric"
        fabric.mkdir()
        for r in range(HOSTS * 2):
            d = daemons[r // 2]
            env = d.client_env(MSMONITOR_USE_DAEMON=1, MSMONITOR_NATIVE_POLL=1, RANK=r, WORLD_SIZE=HOSTS * 2,
                               MSSIM_FABRIC_DIR=str(fabric), MSSIM_CHECK_PRELOAD=0,
                               MSMONITOR_MSPTI_LIB=binpath("libmspti.so"))
            argv = [binpath("mssim-train"), "--with-plugin", binpath("libmsmonitor.so"), "--steps", "0", "--rate", "10",
                    "--slow-rank", "5", "--slow-factor", "1.2", "--slow-from-step", "1", "--slow-kind", "compute"]
            ranks.append(Proc(argv, env=env, logname=f"rank{r}", tmpdir=tempfile.mkdtemp(dir=str(tmp_path))))
        hostfile = tmp_path / "hostfile"
        hostfile.write_text("".join(f"{a}\n" for a in addrs))
        dyno = [binpath("dyno"), "--hostfile", str(hostfile), "--port", str(port)]
        last = {}

        def all_polling():
            r = last["r"] = subprocess.run(dyno + ["status", "--json"], capture_output=True, text=True, timeout=60)
            st = json.loads(r.stdout.strip().splitlines()[-1])
            return sum(1 for p in st["processes"] if p.get("polling")) == 2 * HOSTS
        wait_until(all_polling, 60, "every rank polling", diag=lambda: last["r"].stdout + last["r"].stderr,
                   interval=0.3)
        r = subprocess.run(dyno + ["npu-monitor", "--npu-monitor-start", "--mspti-activity-kind",
                                   "Kernel,Marker,Communication,Hccl", "--report-interval-s", "1"],
                           capture_output=True, text=True, timeout=60)
        assert r.stdout.count('"commandStatus":"effective"') == HOSTS, r.stdout + r.stderr
        pdir = tempfile.mkdtemp(prefix="mmp")
        with open(os.path.join(pdir, "rules.yml"), "w") as f:
            f.write(RULE)
        prom = PromServer(pdir)
        prom.stop()
        with open(prom.cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                    f"rule_files: ['{pdir}/rules.yml']\n"
                    "scrape_configs:\n  - job_name: dynolog\n    honor_labels: true\n    static_configs:\n"
                    "      - targets: [" + ", ".join(f"'{a}:{pport}'" for a in addrs) + "]\n")
        prom.start()
        res = prom.wait_query('count(msmonitor_step_wall_ns)', pred=lambda x: x and int(x[0]["value"][1]) == 2 * HOSTS)
        # synchronised: the others wait for the slow rank inside the collective
        waits = prom.wait_query('max(msmonitor_step_wait_ns)', pred=lambda x: x and float(x[0]["value"][1]) > 0)
        assert waits
        firing = prom.wait_query('ALERTS{alertname="MsmonitorSlowRank",alertstate="firing"}', timeout=90)
        prom.wait_rule_evaluations(3)   # later evaluations must not flag another rank
        firing = prom.query('ALERTS{alertname="MsmonitorSlowRank",alertstate="firing"}')
        assert [(a["metric"]["rank"], a["metric"]["instance"]) for a in firing] == [("5", f"{addrs[2]}:{pport}")], firing
        assert res
    finally:
        if prom:
            prom.stop()
        for p in ranks:
            p.stop()
        for d in daemons:
            d.stop()
