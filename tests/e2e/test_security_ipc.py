"""Local peers on the IPC sockets (issue 13 item 3), with the real daemon: a process of another
uid (nobody, through setpriv) cannot register, poll, report status or send data on
dynolog.sock, dynolog_data.sock or Kineto's abstract @dynolog even when the files are
world-writable, unless --ipc_allowed_uids names it; a same-uid process cannot speak for a pid
that is neither itself nor its descendant (the spoofed-Running and fake-pids-2,3,4 probes);
dead pids hold neither a registry nor a process_limit slot. Regression tests for the probe."""
import json
import os
import subprocess
import sys
import tempfile

import pytest

from conftest import Daemon, run_dyno
from daemon_util import rpc_json, set_config
from plugin_util import Workload, wait_registered
from waits import wait_until

E2E = os.path.dirname(os.path.abspath(__file__))
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
NPU_CFG = "NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false\nREPORT_INTERVAL_S=60"

# One attacker run: every message kind on every socket; prints what came back as JSON.
ATTACK = r"""
import json, os, struct, sys
sys.path.insert(0, sys.argv[1])
from ipcclient import IpcClient, KinetoClient, build
sockdir, claim = sys.argv[2], int(sys.argv[3])
pid = claim or os.getpid()
got = {}
with IpcClient(sockdir) as c:
    got["ctxt"] = c.register(npu=0, pid=pid, timeout=0.5)
    got["req"] = c.poll(pids=[pid], timeout=0.5)
    c.status("trace", "Running", pid=pid)
    c.status("monitor", "Running", pid=pid)
    c.data({"kind": "Kernel", "name": "forged", "pid": pid})
    for _ in range(int(sys.argv[4])):     # a burst: the drop line must stay rate-limited
        c.send_raw(build("ctxt", struct.pack("<iiq", 0, pid, 0)))
with KinetoClient(pids=[pid]) as k:
    k.pid = pid
    got["kineto_ctxt"] = k.ctxt(0, timeout=0.5)
    k.send("req", k.req_payload(3))
    got["kineto_req"] = k.recv(0.5) is not None
print(json.dumps(got))
"""


@pytest.fixture
def attack_script():
    d = tempfile.mkdtemp(prefix="mmatk")
    os.chmod(d, 0o755)
    p = os.path.join(d, "attack.py")
    with open(p, "w") as f:
        f.write(ATTACK)
    os.chmod(p, 0o644)
    return p


def open_daemon(*extra):
    """A daemon whose socket files any local user can reach at the file-system level: only
    the daemon's own credential check stands between them and the registry."""
    sockdir = tempfile.mkdtemp(prefix="mmsec", dir="/tmp")
    os.chmod(sockdir, 0o777)
    return Daemon(extra=["--use_JSON", "--ipc_socket_mode", "0666"] + list(extra), sockdir=sockdir)


def attack(script, d, as_nobody, claim=0, burst=0):
    argv = (NOBODY if as_nobody else []) + [sys.executable, script, E2E, d.sockdir, str(claim),
                                            str(burst)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=d.client_env())
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def status(d):
    return rpc_json(d.port, {"fn": "getStatus"})


def test_other_uid_is_dropped_on_all_three_sockets(attack_script):
    d = open_daemon()
    try:
        got = attack(attack_script, d, as_nobody=True, burst=500)
        assert got == {"ctxt": None, "req": None, "kineto_ctxt": None, "kineto_req": False}
        for ep in ("dynolog.sock", "dynolog_data.sock", "Kineto endpoint"):
            d.wait_log("ipc: dropped datagram on %s from uid 65534" % ep)
        st = status(d)
        assert st["processes"] == [] and st["nputrace"] == "Uninitialized", st
        assert "forged" not in d.log()
        # 500 + 6 datagrams: the drop lines are rate-limited (at most one a second per socket)
        d.wait_log("so far)")
        assert d.log().count("from uid 65534") < 20
    finally:
        d.stop()


def test_allowed_uids_flag_lets_another_uid_in(attack_script):
    d = open_daemon("--ipc_allowed_uids", "65534")
    try:
        got = attack(attack_script, d, as_nobody=True)
        assert got["ctxt"] == 1 and got["req"] == "" and got["kineto_ctxt"] == 1, got
        assert "from uid 65534" not in d.log()
    finally:
        d.stop()


def test_same_uid_cannot_speak_for_another_pid(attack_script):
    d = open_daemon()
    w = Workload(d, tempfile.mkdtemp(prefix="mmsecw"))
    try:
        wait_registered(d, w.p.pid)
        # the probe's spoof: npuTraceStatus Running in the name of the real rank, from a
        # process that is not the rank nor its ancestor (a sibling of it)
        got = attack(attack_script, d, as_nobody=False, claim=w.p.pid)
        assert got["ctxt"] is None and got["req"] is None and got["kineto_ctxt"] is None, got
        d.wait_log("it speaks for pid %d, which is neither the sender nor its descendant" % w.p.pid)
        # fake pids 2, 3, 4 would have taken all process_limit slots
        for fake in (2, 3, 4):
            attack(attack_script, d, as_nobody=False, claim=fake)
        st = status(d)
        assert [p["pid"] for p in st["processes"]] == [w.p.pid], st
        assert st["nputrace"] != "Running"
        r = run_dyno(d, "npu-monitor", "--npu-monitor-start", "--report-interval-s", "1")
        assert r.returncode == 0, r.stderr
        line = [l for l in r.stdout.splitlines() if l.startswith("response = ")][-1]
        rep = json.loads(line[len("response = "):])
        assert rep["commandStatus"] == "effective" and rep["activityProfilersTriggered"] == [w.p.pid], rep
        w.wait_plugin_log("MsptiMonitor start successfully")
    finally:
        w.stop()
        d.stop()


POLL_ONCE = r"""
import sys
sys.path.insert(0, sys.argv[1])
from ipcclient import IpcClient
with IpcClient(sys.argv[2]) as c:
    assert c.poll(timeout=5) == ""
"""


def test_dead_pids_free_their_slots():
    d = open_daemon("--registry_uid_quota", "3")
    try:
        # three short-lived pollers fill this uid's quota, then exit (reaped: truly gone)
        for _ in range(3):
            p = subprocess.run([sys.executable, "-c", POLL_ONCE, E2E, d.sockdir], timeout=30,
                               env=d.client_env())
            assert p.returncode == 0
        assert len(status(d)["processes"]) == 3
        # a live rank still registers (the dead ones are purged for it) and, although the dead
        # pids are lower, it is the one process_limit=1 picks
        w = Workload(d, tempfile.mkdtemp(prefix="mmsecw"))
        try:
            wait_registered(d, w.p.pid)
            d.wait_log("the process is gone")
            rep = set_config(d.port, NPU_CFG, limit=1)
            assert rep["processesMatched"] == [w.p.pid] and rep["activityProfilersTriggered"] == [w.p.pid], rep
            assert "holds its quota" not in d.log()
        finally:
            w.stop()
    finally:
        d.stop()


def test_plugin_refuses_a_socket_of_another_owner():
    # a shared socket directory in which nobody bound dynolog.sock: a root rank must not talk
    # to it (the probe's fake daemon made a root rank create directories)
    shared = tempfile.mkdtemp(prefix="mmshared", dir="/tmp")
    os.chmod(shared, 0o1777)
    fake = os.path.join(shared, "dynolog.sock")
    marker = os.path.join(shared, "fake_got")
    srv = subprocess.Popen(NOBODY + [sys.executable, "-c", r"""
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666)
open(sys.argv[2] + ".ready", "w").close()
n = 0
while True:
    s.recv(70000); n += 1
    with open(sys.argv[2], "w") as f: f.write(str(n))
""", fake, marker], start_new_session=True)
    w = None
    try:
        wait_until(lambda: os.path.exists(marker + ".ready"), 30, "the fake server to be ready", alive=srv)
        assert os.stat(fake).st_uid == 65534

        class NoDaemon:
            port = 0
            sockdir = shared

            def client_env(self):
                return dict(os.environ, MSMONITOR_SOCKET_DIR=shared, HOME=shared)

        w = Workload(NoDaemon(), tempfile.mkdtemp(prefix="mmsecw"))
        w.wait_plugin_log("is not a socket owned by uid 0 or root (owner uid 65534); not talking to it")
        assert not os.path.exists(marker)
    finally:
        if w:
            w.stop()
        os.killpg(srv.pid, 9)
        srv.wait()


SPOOF_STATS = r"""
import sys
sys.path.insert(0, sys.argv[1])
from ipcclient import IpcClient
with IpcClient(sys.argv[2]) as c:
    c.data({"kind": "PluginInfo", "duration": 0, "timestamp": 1, "deviceId": -1,
            "pid": int(sys.argv[3]), "backend": "mspti", "library": "/forged/libmspti.so"})
    c.data({"kind": "PluginStats", "duration": 1, "timestamp": 1, "deviceId": -1,
            "pid": int(sys.argv[3]), "stats": {"kept": 999999, "dropped_queue": 777}})
"""


def test_same_uid_cannot_rewrite_another_ranks_counters():
    # the data socket takes PluginStats/PluginInfo only for the sender's own pid: a sibling
    # process naming the rank's pid is counted and ignored, so `dyno status`/`doctor` keep
    # showing the rank's own counters and library
    d = open_daemon()
    w = Workload(d, tempfile.mkdtemp(prefix="mmsecw"))
    try:
        wait_registered(d, w.p.pid)
        p = subprocess.Popen([sys.executable, "-c", SPOOF_STATS, E2E, d.sockdir, str(w.p.pid)],
                             env=d.client_env())
        assert p.wait(timeout=30) == 0
        d.wait_log("data: ignored PluginInfo from pid %d naming pid %d" % (p.pid, w.p.pid))
        # the PluginStats line right after it is rate-limited; its receipt line comes first and
        # the check runs on the same loop before any later getStatus
        d.wait_log('"kept":999999')
        for proc in status(d)["processes"]:
            assert (proc.get("session_stats") or {}).get("kept") != 999999, proc
            assert proc.get("library") != "/forged/libmspti.so", proc
    finally:
        w.stop()
        d.stop()
