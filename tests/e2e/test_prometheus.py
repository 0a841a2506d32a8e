"""Prometheus pull end to end: the real dynolog with --use_prometheus, a monitored simulator
job, the real Prometheus server scraping /metrics, and prometheus_client's parser on the text.
Also hostile scrapers (slowloris, 1,000 idle connections) while RPC and IPC keep working."""
import os
import socket
import tempfile
import time

from conftest import free_port, run_dyno
from daemon_util import rpc_json
from ipcclient import IpcClient
from plugin_util import Workload, wait_registered
from prom_util import PromServer, kernel_truth, samples, scrape
from waits import wait_until

HOST = socket.gethostname()


def _daemon(make_daemon, *extra):
    port = free_port()
    d = make_daemon(extra=["--use_prometheus", "--prometheus_port", str(port), *extra])
    d.prom_port = port
    d.wait_log("prometheus: serving /metrics")
    return d


def _run_job(d, extra_env=None):
    """A simulator job monitored with one report (a long interval: the final report at exit
    carries every kernel), run to its end; returns the workload (ground truth)."""
    tmp = tempfile.mkdtemp(prefix="mmw")
    w = Workload(d, tmp, extra_env=extra_env, args=("--steps", "40", "--rate", "10"))
    try:
        wait_registered(d, w.p.pid)
        r = run_dyno(d, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "60",
                     "--mspti-activity-kind", "Kernel,Marker")
        assert r.returncode == 0, r.stderr + r.stdout
        w.wait_plugin_log("MsptiMonitor start successfully")
        w.p.wait(120)
    finally:
        w.stop()
    assert w.p.returncode == 0, w.log()
    return w


def _op_totals(text):
    out = {}
    for (name, labels), v in samples(text).items():
        lab = dict(labels)
        if name == "npu_op_total_ns" and lab.get("kind") == "Kernel":
            assert lab["host_name"] == HOST and lab["device"] == "0", lab
            out[lab["name"]] = v
    return out


def test_exposition_parsed_and_scraped_by_prometheus(make_daemon):
    d = _daemon(make_daemon)
    w = _run_job(d)
    tot, cnt = kernel_truth(w.ground_truth())
    assert tot
    last = {}

    def every_op():
        last["r"] = r = scrape(d.prom_port)
        return r if set(_op_totals(r[2])) == set(tot) else None
    st, hdr, text = wait_until(every_op, 60, "every op of the job in the exposition",
                               diag=lambda: last["r"][2][-3000:], interval=0.1)
    assert st == 200
    assert hdr["Content-Type"] == "text/plain; version=0.0.4"
    assert hdr["Connection"] == "close"
    # prometheus_client's parser reads every line; values equal the simulator's ground truth
    assert _op_totals(text) == {k: float(v) for k, v in tot.items()}
    smp = samples(text)
    # every npu series is labelled with its sender's kernel-reported pid (and its job)
    counts = {dict(lab)["name"]: (v, dict(lab)) for (n, lab), v in smp.items()
              if n == "npu_op_count" and dict(lab).get("kind") == "Kernel"}
    for name, n in cnt.items():
        v, lab = counts[name]
        assert v == n
        assert lab["pid"] == str(w.p.pid) and lab["device"] == "0" and lab["host_name"] == HOST, lab
        assert set(lab) <= {"host_name", "device", "kind", "name", "pid", "job"}, lab
    from prometheus_client.parser import text_string_to_metric_families
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    for f in ("npu_op_total_ns", "npu_op_count", "npu_op_min_ns", "npu_op_max_ns", "npu_op_avg_ns",
              "npu_activity_duration_ns", "npu_marker_duration_ns"):
        assert fams[f].type == "gauge", f
        assert fams[f].documentation, f
    assert "# HELP npu_op_total_ns total duration of an op over the last report interval, ns\n" in text
    # the plugin's session counters, labelled with the sender's pid
    kept = [v for (n, lab), v in smp.items() if n == "msmonitor_plugin_kept" and dict(lab).get("pid") == str(w.p.pid)]
    assert kept and kept[0] >= sum(cnt.values())
    # families sorted by name
    order = [ln.split()[2] for ln in text.splitlines() if ln.startswith("# TYPE ")]
    assert order == sorted(order)

    # the real Prometheus scrapes it: the same values through its query API
    p = PromServer(tempfile.mkdtemp(prefix="mmp"), target=f"127.0.0.1:{d.prom_port}")
    try:
        name = max(tot, key=tot.get)
        res = p.wait_query(f'npu_op_total_ns{{job="dynolog",kind="Kernel",name="{name}"}}')
        assert len(res) == 1
        assert res[0]["metric"]["host_name"] == HOST and res[0]["metric"]["device"] == "0"
        assert float(res[0]["value"][1]) == tot[name]
        res = p.wait_query('count(npu_op_total_ns{job="dynolog",kind="Kernel"})')
        assert int(res[0]["value"][1]) == len(tot)
        res = p.wait_query('up{job="dynolog"}')
        assert res[0]["value"][1] == "1"
    finally:
        p.stop()


def test_paths_and_methods(make_daemon):
    d = _daemon(make_daemon)
    assert scrape(d.prom_port, "/")[0] == 404
    assert scrape(d.prom_port, "/metrics/x")[0] == 404
    st, hdr, _ = scrape(d.prom_port, method="POST")
    assert st == 405
    st, hdr, body = scrape(d.prom_port, method="HEAD")
    assert st == 200 and body == "" and hdr["Content-Type"] == "text/plain; version=0.0.4"
    # with nothing reported yet the daemon's own series are there
    text = scrape(d.prom_port)[2]
    assert samples(text)[("msmonitor_prometheus_dropped_series", frozenset({"host_name": HOST}.items()))] == 0


def test_bind_failure_is_not_fatal(make_daemon):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        port = busy.getsockname()[1]
        d = make_daemon(extra=["--use_prometheus", "--prometheus_port", str(port)])
        d.wait_log("continuing without Prometheus exposition")
        assert rpc_json(d.port, {"fn": "getVersion"}) is not None
    finally:
        busy.close()


def _served(d):
    """RPC answers and IPC registers while scrapers misbehave."""
    assert "processes" in rpc_json(d.port, {"fn": "getStatus"})
    with IpcClient(d.sockdir) as c:
        assert c.register(npu=0, timeout=5) is not None


def _nfds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_thousand_idle_connections(make_daemon):
    d = _daemon(make_daemon)
    socks = []
    try:
        for _ in range(1000):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", d.prom_port))
            socks.append(s)
        _served(d)
        # the listener pauses at its connection cap: fds stay for RPC/IPC
        assert _nfds(d.p.pid) < 256 + 64
        # a well-behaved scraper still gets its answer once idle ones time out
        st, _, text = scrape(d.prom_port, timeout=60)
        assert st == 200 and "msmonitor_prometheus_series" in text
        _served(d)
    finally:
        for s in socks:
            s.close()
    assert d.p.poll() is None


def test_slowloris(make_daemon):
    d = _daemon(make_daemon)
    socks = []
    try:
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", d.prom_port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        # one header byte per 0.5 s keeps the idle timeout from firing; the per-connection
        # deadline closes them anyway
        closed = set()
        deadline = time.monotonic() + 60
        while len(closed) < len(socks) and time.monotonic() < deadline:
            for i, s in enumerate(socks):
                if i in closed:
                    continue
                try:
                    s.sendall(b"X")
                except OSError:
                    closed.add(i)
            _served(d)
            time.sleep(0.5)
        assert len(closed) == len(socks)
        assert scrape(d.prom_port)[0] == 200
    finally:
        for s in socks:
            s.close()


def test_host_metric_scraped(make_daemon):
    """A host metric from the kernel monitor reaches /metrics and Prometheus."""
    d = _daemon(make_daemon, "--kernel_monitor_reporting_interval_s", "1")
    p = PromServer(tempfile.mkdtemp(prefix="mmp"), target=f"127.0.0.1:{d.prom_port}")
    try:
        res = p.wait_query('uptime{job="dynolog"}')
        assert res[0]["metric"]["host_name"] == HOST
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        assert 0 < float(res[0]["value"][1]) <= up
        res = p.wait_query('rx_bytes{job="dynolog",net="lo"}')
        assert float(res[0]["value"][1]) >= 0
    finally:
        p.stop()
