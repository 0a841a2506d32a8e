"""The deployment matrix of docs/deploy.md, with containers built the way the kernel builds them
(ctr_util.py: unshare pid, mount, uts, ipc and, where the case needs it, network namespaces; a
private /dev/shm; the socket directory bind-mounted at a path of the container's own; its own
hostname; the downward-API variables). Every job runs in the FAQ's default mode: the Python
package in dyno mode (`python -m mssim.train`, MSMONITOR_USE_DAEMON=1), no LD_PRELOAD, no
simulator check switched off.

  a. the daemon on the host, two jobs in two containers of 2 ranks each, with equal inner pids;
  b. the daemon in a container that shares the host's pid namespace (the DaemonSet), jobs in pods
     with network namespaces of their own;
  c. the daemon and the job in one container;
  d. a job in its own network namespace beside a Kineto client (KINETO_IPC_SOCKET_DIR).

Each case: every outcome `applied`, DB rows from every rank with the pod in META_DATA, live health,
the pods in `dyno status` and on /metrics, `dyno doctor` all ✔ on the node and inside a container,
a process of one container refused when it speaks for another's, and a killed container's
processes marked gone at the first status after they are reaped."""
import glob
import json
import os
import signal
import sqlite3
import subprocess
import tempfile

import pytest

from conftest import Daemon, _dgram_live, binpath, free_port
from ctr_util import Container, PodCgroup, pod_env, require_containers
from daemon_util import rpc_json
from prom_util import scrape
from python_util import PYTHON, py_env, require_packages
from waits import wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
FAIL, OK = "\u2718", "\u2714"
POLL_S = 0.3   # MSMONITOR_POLL_INTERVAL_S of every rank: one poll period


@pytest.fixture(autouse=True)
def _need():
    require_containers()
    require_packages()


def job_argv(ranks):
    return [PYTHON, "-m", "mssim.train", "--ranks", str(ranks), "--steps", "0", "--rate", "20"]


def job_env(name, tmp, **extra):
    """A pod's environment for the FAQ's default mode."""
    env = py_env(dict(os.environ), MSMONITOR_USE_DAEMON=1, MSMONITOR_POLL_INTERVAL_S=POLL_S,
                 MSMONITOR_LOG_PATH=os.path.join(str(tmp), name, "log"), **pod_env(name), **extra)
    for k in ("MSMONITOR_SHM_DIR", "MSMONITOR_NATIVE_POLL", "MSMONITOR_JOB_KEY", "MSSIM_CHECK_PRELOAD"):
        env.pop(k, None)
    return env


def status(port):
    """getStatus; {} while the daemon does not answer yet (one in a container starts with it)."""
    try:
        return rpc_json(port, {"fn": "getStatus"}) or {}
    except OSError:
        return {}


def of_pod(st, name):
    return [p for p in st.get("processes", []) if p.get("pod", {}).get("name") == name]


def wait_pods(port, want, diag=None):
    """Every rank of every pod listed with its pod, one poller per pod, live health from each."""
    def ok():
        st = status(port)
        for name, n in want.items():
            ps = of_pod(st, name)
            if len(ps) != n or sum(1 for p in ps if p.get("polling")) != 1 or \
                    any(p.get("health", {}).get("mode") != "dyno" or p["health"].get("steps", 0) < 1 for p in ps):
                return None
        return st
    return wait_until(ok, 90, f"the ranks of {sorted(want)} listed with their pods", diag=diag)


class Node:
    """dyno against one daemon, from the node (TCP) or through dyno.sock."""

    def __init__(self, port, sockdir, prom_port=None):
        self.port, self.sockdir, self.prom_port = port, sockdir, prom_port

    def env(self):
        e = dict(os.environ)
        e.update({"MSMONITOR_SOCKET_DIR": self.sockdir, "HOME": self.sockdir})
        return e

    def dyno(self, *args, target=None, prefix=(), timeout=60):
        argv = list(prefix) + [binpath("dyno"), "--hostname", target or "localhost", "--port", str(self.port)]
        return subprocess.run(argv + list(args), env=self.env(), capture_output=True, text=True, timeout=timeout)

    def doctor_ok(self, *args):
        """dyno doctor on the node with a private /dev/shm (other jobs on this machine may leave
        segments in the real one): every check ✔."""
        r = self.dyno("doctor", *args, prefix=["unshare", "-m", "sh", "-c",
                                              "mount -t tmpfs none /dev/shm && exec \"$@\"", "sh"])
        assert r.returncode == 0 and FAIL not in r.stdout, r.stdout + r.stderr
        return r.stdout


def outcomes(r):
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("Outcome: ")]
    assert lines and all(": applied (" in ln for ln in lines), r.stdout + r.stderr
    return lines


def metrics_named(node, pods):
    """/metrics carries series of every pod with its namespace and container labels."""
    def ok():
        code, _, text = scrape(node.prom_port)
        return code == 200 and all(f'pod="{p}"' in text for p in pods) and 'namespace="ml"' in text and \
            'container="trainer"' in text and text
    return wait_until(ok, 60, f"/metrics series of {pods}")


def db_of(path):
    """(marker rows, META_DATA pod) of a finished DB file, None while it is being written."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            if not db.execute("SELECT 1 FROM sqlite_master WHERE name='STRING_IDS'").fetchone():
                return None
            rows = db.execute("SELECT COUNT(*) FROM MSTX_EVENTS").fetchone()[0]
            pod = db.execute("SELECT value FROM META_DATA WHERE name='pod'").fetchone()
            return rows, json.loads(pod[0]) if pod else None
        finally:
            db.close()
    except sqlite3.Error:
        return None


def jsonl_of(path):
    """(data lines, the pod line) of a JSONL file whose session ended, None before that."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(ln) for ln in f if ln.strip()]
    except (OSError, ValueError):
        return None
    pod = [ln for ln in lines if ln.get("kind") == "pod"]
    if not any(ln.get("kind") == "session_stats" for ln in lines):
        return None
    return sum(1 for ln in lines if ln.get("kind") == "Marker"), pod[0] if pod else None


def monitor_and_db(node, pods, ranks, out, export="DB"):
    """A metric session on every pod (the /metrics labels), then one file session per pod (DB or
    Jsonl), sent with --pod: each reaches its pod only, and each of its ranks writes a file naming
    the pod (META_DATA row / JSONL line)."""
    # --wait-s: dyno returns as soon as every outcome is in; the bound only matters on a loaded machine
    r = node.dyno("npu-monitor", "--npu-monitor-start", "--mspti-activity-kind", "Marker", "--report-interval-s", "1",
                  "--wait-s", "60", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    outcomes(r)
    metrics_named(node, pods)
    st = status(node.port)
    for p in st["processes"]:
        if p.get("pod", {}).get("name") in pods and "health" in p:   # a Kineto client reports none
            assert p["health"]["marks"] == [], p            # live health, nothing wrong
    for pod in pods:
        pdir = os.path.join(out, pod)
        creator = [p["pid"] for p in of_pod(st, pod) if p.get("polling") and "health" in p]
        r = node.dyno("npu-monitor", "--npu-monitor-start", "--pod", pod, "--mspti-activity-kind", "Marker",
                      "--report-interval-s", "1", "--duration", "1", "--log-file", pdir, "--export-type", export,
                      "--wait-s", "60", timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        reply = json.loads(r.stdout[r.stdout.index("response = ") + 11:].splitlines()[0])
        assert reply["processesMatched"] == creator and reply["pod"] == pod, r.stdout
        assert all(f"(pod {pod})" in ln for ln in outcomes(r)), r.stdout
    for pod in pods:
        pdir = os.path.join(out, pod)

        def done():
            files = glob.glob(os.path.join(pdir, "*.db" if export == "DB" else "*.jsonl"))
            got = [db_of(p) if export == "DB" else jsonl_of(p) for p in files]
            return got if len(files) == ranks[pod] and all(got) else None
        got = wait_until(done, 60, f"a {export} file from each rank of {pod}")
        for rows, meta in got:
            assert rows > 0 and meta and meta["name"] == pod and meta["namespace"] == "ml" and \
                meta["container"] == "trainer", got
    return st


def speak_for_other(ctr, sockdir_inner, victim_pid, node):
    """From inside ctr, claim another container's process: a status for it and a health report
    naming it. Both refused; the victim's state is unchanged."""
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from ipcclient import IpcClient\n"
            "with IpcClient(%r) as c:\n"
            "    c.status('trace', 'Running', current_step=7, start_step=5, stop_step=9, pid=%d)\n"
            "    c.data({'kind':'PluginHealth','deviceId':-1,'duration':0,'timestamp':1,'pid':%d,'rank':9,"
            "'mode':'dyno','step':1,'step_age_ms':0,'step_period_ms':1,'config_age_ms':-1,'steps':1,"
            "'steps_since_config':0,'backend':'x','library':'','fallback':'','pod_name':'evil'})\n"
            "print('sent', flush=True)\n") % (HERE, sockdir_inner, victim_pid, victim_pid)
    before = status(node.port)["ipc_drops"]["speaks_for"]
    r = ctr.nsenter([PYTHON, "-c", code], env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert r.returncode == 0 and "sent" in r.stdout, r.stdout + r.stderr
    wait_until(lambda: status(node.port)["ipc_drops"]["speaks_for"] > before, 30, "the claim to be refused")
    victim = next(p for p in status(node.port)["processes"] if p["pid"] == victim_pid)
    assert victim["nputrace"] != "Running" and victim["pod"]["name"] != "evil" and victim["health"]["rank"] != 9


def doctor_inside(ctr, pid_inside, node_sockdir=None):
    """dyno doctor run in the container as a user in the pod would (dyno.sock in the mounted
    directory): every check ✔, and it relates the container's pid to the node's."""
    sock = os.path.join(node_sockdir or ctr.inner, "dyno.sock")
    env = dict(os.environ, MSMONITOR_SOCKET_DIR=node_sockdir or ctr.inner)
    r = ctr.nsenter([binpath("dyno"), "--hostname", "unix:" + sock, "doctor", "--pid", str(pid_inside)], env=env)
    assert r.returncode == 0 and FAIL not in r.stdout, r.stdout + r.stderr
    return r.stdout


def descendants(pid):
    """Node pids below pid (the /proc children files, as the node numbers them)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(x) for x in f.read().split()]
                out += kids
                todo += kids
        except OSError:
            continue
    return out


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def gone_at_once(node, pids, alive):
    """The first status after the processes were reaped marks every one of them gone."""
    st = status(node.port)
    seen = {p["pid"]: p for p in st["processes"]}
    for pid in pids:
        assert pid not in seen or (seen[pid]["health"]["gone"] and not seen[pid]["polling"]), seen.get(pid)
    for pid in alive:
        assert not seen[pid]["health"]["gone"], seen[pid]


def host_daemon(tmp, *extra, env_extra=None):
    prom = free_port()
    d = Daemon(extra=["--use_prometheus", "--prometheus_port", str(prom)] + list(extra), env_extra=env_extra)
    return d, Node(d.port, d.sockdir, prom)


def test_a_host_daemon_two_containers(tmp_path):
    d, node = host_daemon(tmp_path)
    pods = ["trainer-a-0", "trainer-b-0"]
    ctrs = []
    cg = PodCgroup.make()   # container A in a kubepods cgroup, where the machine lets us make one
    try:
        ctrs = [Container(p, job_argv(2), job_env(p, tmp_path), tmp_path, sockdir=d.sockdir,
                          cgroup=cg if p == pods[0] else None) for p in pods]
        st = wait_pods(d.port, {p: 2 for p in pods}, diag=lambda: d.log()[-3000:])
        a, b = (of_pod(st, p) for p in pods)
        if cg:   # the kernel's word: the container id and pod UID of A's cgroup path
            assert all(p["pod"]["container_id"] == cg.cid and p["pod"]["uid"] == cg.uid and
                       p["pod"]["runtime"] == "containerd" for p in a), a
        assert all("container_id" not in p["pod"] for p in b), b
        # the node's pids differ, the containers' own are the same: two processes each, never one
        assert len({p["pid"] for p in a + b}) == 4
        assert sorted(p["ns_pid"] for p in a) == sorted(p["ns_pid"] for p in b)
        assert all(p["pid_ns"] != a[0]["pid_ns"] for p in b)
        assert len(st["processes"]) == 4 and st["ipc_drops"] == {"no_pid": 0, "speaks_for": 0, "uid": 0}
        # the table: node pid, container pid, pod
        r = node.dyno("status", "--pod", "trainer-a-0")
        rows = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("localhost")]
        assert len(rows) == 2 and all(row[-1] == "ml/trainer-a-0" for row in rows), r.stdout
        assert sorted(int(row[1]) for row in rows) == sorted(p["pid"] for p in a)
        # a container's own pid names one process in each container: refused, with the candidates
        pa = next(p for p in a if p.get("polling"))
        r = node.dyno("nputrace", "--pids", str(pa["ns_pid"]), "--start-step", "-1", "--iterations", "1",
                      "--log-file", str(tmp_path / "t"))
        assert "Note: command not applied (refused): pid %d is a container's own pid" % pa["ns_pid"] in r.stdout, \
            r.stdout
        assert "(pod ml/trainer-a-0)" in r.stdout and "(pod ml/trainer-b-0)" in r.stdout
        monitor_and_db(node, pods, {p: 2 for p in pods}, str(tmp_path / "out"))
        # the report's rank table names the pod of every rank
        html = os.path.join(str(tmp_path), "report.html")
        r = subprocess.run([PYTHON, "-m", "msmonitor", "report", str(tmp_path / "out" / pods[0]), "-o", html],
                           env=py_env(), capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert open(html, encoding="utf-8").read().count("<td>ml/trainer-a-0</td>") == 2
        node.doctor_ok()
        assert f"pid {pa['ns_pid']} here is pid {pa['pid']} on the node (pod trainer-a-0)" in \
            doctor_inside(ctrs[0], pa["ns_pid"])
        pb = next(p for p in b if p.get("polling"))
        speak_for_other(ctrs[0], ctrs[0].inner, pb["pid"], node)
        assert "it speaks for pid %d, which is neither the sender nor its descendant" % pb["pid"] in d.log()
        ctrs[0].kill()
        gone_at_once(node, [p["pid"] for p in a], [p["pid"] for p in b])
    finally:
        for c in ctrs:
            c.kill()
        if cg:
            cg.remove()
        d.stop()


def test_b_daemonset_and_pods(tmp_path):
    """The DaemonSet's daemon: a container of its own (mount, uts, ipc) in the host's pid and
    network namespaces, the socket directory a hostPath; pods with network namespaces of their own."""
    host_dir = tempfile.mkdtemp(prefix="mmhp", dir="/tmp")
    port, prom = free_port(), free_port()
    ds_env = dict(os.environ, HOME=host_dir)
    ds = Container("dynolog-ds", [binpath("dynolog"), "--port", str(port), "--enable_ipc_monitor", "--use_prometheus",
                                  "--prometheus_port", str(prom)], ds_env, tmp_path, sockdir=host_dir, pid=False)
    pods = ["trainer-b-0", "trainer-b-1"]
    ctrs = []
    node = Node(port, host_dir, prom)
    try:
        wait_until(lambda: _dgram_live(os.path.join(host_dir, "dynolog.sock")), 30, "the DaemonSet's dynolog.sock",
                   diag=ds.log, alive=ds)
        # the readiness check of packaging/kubernetes/dynolog-daemonset.yaml
        r = node.dyno("status", target="unix:" + os.path.join(host_dir, "dyno.sock"))
        assert r.returncode == 0 and '"processes":[]' in r.stdout, r.stdout + r.stderr
        ctrs = [Container(p, job_argv(1), job_env(p, tmp_path), tmp_path, sockdir=host_dir, net=True) for p in pods]
        st = wait_pods(port, {p: 1 for p in pods}, diag=lambda: ds.log()[-3000:])
        assert all(p["ns_pid"] != p["pid"] for p in st["processes"])
        monitor_and_db(node, pods, {p: 1 for p in pods}, str(tmp_path / "out"), export="Jsonl")
        node.doctor_ok()
        p0, p1 = of_pod(st, pods[0])[0], of_pod(st, pods[1])[0]
        out = doctor_inside(ctrs[0], p0["ns_pid"])
        assert "runs in another network namespace than the daemon" in out, out
        speak_for_other(ctrs[0], ctrs[0].inner, p1["pid"], node)
        ctrs[0].kill()
        gone_at_once(node, [p0["pid"]], [p1["pid"]])
    finally:
        for c in ctrs:
            c.kill()
        ds.kill()


def test_c_daemon_and_job_in_one_container(tmp_path):
    """dynolog and the job share one container (its pid namespace too): they number pids alike,
    and dyno on the node reaches the daemon through dyno.sock in the mounted directory."""
    host_dir = tempfile.mkdtemp(prefix="mmhc", dir="/tmp")
    port, prom = free_port(), free_port()
    pod = "trainer-c-0"
    inner = os.path.join(str(tmp_path), pod, "run")
    script = ("%s --port %d --enable_ipc_monitor --use_prometheus --prometheus_port %d > %s/dynolog.log 2>&1 &\n"
              "until [ -S %s/dynolog.sock ]; do sleep 0.05; done\n"
              "setsid %s & wait\n") % (binpath("dynolog"), port, prom, os.path.join(str(tmp_path), pod), inner,
                                       " ".join(job_argv(2)))
    env = job_env(pod, tmp_path, HOME=inner)
    ctr = Container(pod, ["sh", "-c", script], env, tmp_path, sockdir=host_dir)
    node = Node(port, host_dir, prom)
    try:
        st = wait_pods(port, {pod: 2}, diag=ctr.log)
        assert all("ns_pid" not in p and p["pid"] < 100 for p in st["processes"]), st   # the container's own pids
        monitor_and_db(node, [pod], {pod: 2}, str(tmp_path / "out"))
        r = node.dyno("status", target="unix:" + os.path.join(host_dir, "dyno.sock"))
        assert r.returncode == 0 and '"name":"trainer-c-0"' in r.stdout
        node.doctor_ok()
        ranks = of_pod(st, pod)
        creator = next(p for p in ranks if p.get("polling"))
        other = next(p for p in ranks if not p.get("polling"))
        doctor_inside(ctr, creator["pid"])
        # one rank speaking for its sibling: the rule holds inside the namespace too
        speak_for_other(ctr, ctr.inner, other["pid"], node)
        # the job dies (the daemon lives on in the container): its ranks are gone
        job = [p for p in descendants(ctr.init_pid()) if b"mssim.train" in cmdline(p)]
        assert len(job) == 3, job    # the launcher and its two ranks, by their node pids
        for p in job:
            os.kill(p, signal.SIGKILL)
        wait_until(lambda: all(p["health"]["gone"] and not p["polling"] for p in of_pod(status(port), pod)), 30,
                   "the killed job's ranks marked gone")
    finally:
        ctr.kill()


def test_d_own_network_namespace_and_kineto(tmp_path):
    """A pod with its own network namespace runs a dyno-mode job and a Kineto client. msMonitor's
    plugin learns from dynolog.netns that the daemon cannot reach its abstract name and receives
    through a socket in the shared directory; Kineto needs KINETO_IPC_SOCKET_DIR (one directory at
    the same path for both). A Kineto client without it is what dyno doctor fails, with the fix."""
    kdir = tempfile.mkdtemp(prefix="mmk", dir="/tmp")
    d, node = host_daemon(tmp_path, env_extra={"KINETO_IPC_SOCKET_DIR": kdir})
    pod = "trainer-d-0"
    kout = os.path.join(str(tmp_path), "kineto")
    os.makedirs(kout)
    script = ("%s %s --interval 0.2 --run-s 600 > %s/kineto.jsonl 2>&1 &\nexec %s\n") % (
        PYTHON, os.path.join(HERE, "kineto_client.py"), kout, " ".join(job_argv(2)))
    env = job_env(pod, tmp_path, KINETO_USE_DAEMON=1, KINETO_IPC_SOCKET_DIR=kdir)
    ctr = Container(pod, ["sh", "-c", script], env, tmp_path, sockdir=d.sockdir, net=True)
    bare = None
    try:
        # two ranks reporting health, and the Kineto process (named by its environment)
        def listed():
            s = status(d.port)
            ps = of_pod(s, pod)
            ranks = [p for p in ps if p.get("health", {}).get("mode") == "dyno" and p["health"].get("steps", 0) >= 1]
            kin = [p for p in ps if "health" not in p and p.get("polling")]
            return s if len(ranks) == 2 and len(kin) == 1 and sum(1 for p in ranks if p.get("polling")) == 1 else None
        st = wait_until(listed, 90, "the pod's ranks and its Kineto client", diag=lambda: d.log()[-3000:])
        assert os.readlink(os.path.join(d.sockdir, "dynolog.netns")).startswith("net:[")
        monitor_and_db(node, [pod], {pod: 2}, str(tmp_path / "out"))
        kin = next(p for p in of_pod(st, pod) if "health" not in p)
        r = node.dyno("gputrace", "--log-file", os.path.join(kout, "k.json"), "--duration-ms", "100")
        assert r.returncode == 0 and str(kin["pid"]) in r.stdout, r.stdout + r.stderr
        wait_until(lambda: "trace_written" in open(os.path.join(kout, "kineto.jsonl")).read(), 30,
                   "the Kineto client's trace")
        node.doctor_ok()
        out = doctor_inside(ctr, kin["ns_pid"])
        assert "Kineto uses KINETO_IPC_SOCKET_DIR" in out, out
        # Kineto without KINETO_IPC_SOCKET_DIR in another network namespace: doctor says what to do
        benv = dict(os.environ, KINETO_USE_DAEMON="1", **pod_env("trainer-d-1"))
        bare = Container("trainer-d-1", ["sleep", "600"], benv, tmp_path, net=True)
        r = node.dyno("doctor", "--pid", str(bare.init_pid()))
        hits = [ln for ln in r.stdout.splitlines() if ln.startswith(FAIL) and "runs Kineto" in ln]
        assert r.returncode != 0 and hits and "hostNetwork: true" in hits[0] and "KINETO_IPC_SOCKET_DIR" in hits[0] \
            and "docs/troubleshooting.md#kinetos-dynolog-in-another-network-namespace" in hits[0], r.stdout
        ctr.kill()
        gone_at_once(node, [p["pid"] for p in of_pod(st, pod)], [])
    finally:
        if bare:
            bare.kill()
        ctr.kill()
        d.stop()
