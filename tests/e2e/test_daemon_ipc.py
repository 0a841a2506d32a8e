"""dynolog IPC end to end (spec docs/design/ipc.md, docs/design/rpc.md#setkinetondemandrequest, docs/design/outputs.md#daemon-sinks): registration,
one-shot config delivery, busy/limit/ancestor rules, the status gate, ctxt, drops, socket
file rules and the JSON logger, using the real daemon and ipcclient.IpcClient."""
import os
import re
import socket
import stat
import struct
import subprocess
import tempfile

import pytest

from conftest import Daemon, binpath, free_port
from daemon_util import rpc, rpc_json, set_config
from ipcclient import IpcClient, build
from waits import wait_status

NPU_CFG = "NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false\nREPORT_INTERVAL_S=60"
TRACE_CFG = "PROFILE_START_STEP=-1\nACTIVITIES_ITERATIONS=1"


@pytest.fixture
def d():
    # these protocol tests speak for made-up pids through one socket: the issue-13 rule that a
    # datagram speaks only for its sender (test_security_ipc.py) is switched off here
    dm = Daemon(extra=["--use_JSON", "--noipc_peer_pid_check"])
    yield dm
    dm.stop()


@pytest.fixture
def client(d):
    c = IpcClient(d.sockdir)
    yield c
    c.close()


def idle_status(c, port):
    c.status("trace", "Idle")
    c.status("monitor", "Idle")
    wait_status(port, "Idle", "Idle")


def test_socket_modes(d):
    for n in ("dynolog.sock", "dynolog_data.sock", "dyno.sock"):
        assert stat.S_IMODE(os.stat(d.sock(n)).st_mode) == 0o600


def test_first_poll_registers_and_gets_empty_reply(d, client):
    assert client.poll(pids=[client.pid, 1]) == ""
    d.wait_log("Registered process (%d, 1) for job 0." % client.pid)


def test_req_with_no_pids_gets_no_reply(d, client):
    assert client.poll(pids=[], timeout=0.5) is None
    d.wait_log("Missing pids parameter for type 3")


def test_one_shot_delivery_exact_text(d, client):
    assert client.poll() == ""
    idle_status(client, d.port)
    rep = set_config(d.port, NPU_CFG)
    assert rep == {"activityProfilersBusy": 0, "activityProfilersTriggered": [client.pid],
                   "commandStatus": "effective", "eventProfilersBusy": 0,
                   "eventProfilersTriggered": [], "processesMatched": [client.pid]}
    # a second command before the poll replaces the first (issue 22: last wins, the first is
    # superseded), so a stop right after a start is never lost
    second = NPU_CFG.replace("NPU_MONITOR_START=true", "NPU_MONITOR_START=false")
    rep = set_config(d.port, second)
    assert rep["activityProfilersBusy"] == 0 and rep["activityProfilersTriggered"] == [client.pid]
    cfg = client.poll()
    pad = " " * 12
    prefix = "\n" + pad + second + "\n" + pad + "REQUEST_TRACE_ID="
    assert cfg.startswith(prefix) and cfg.endswith("\n")
    assert cfg[len(prefix):-1].isdigit()
    assert client.poll() == ""            # delivered exactly once
    d.wait_log("Returning activity profiler config for process (%d) in job 0" % client.pid)


def test_type_zero_keepalive_leaves_config(d, client):
    client.poll()
    idle_status(client, d.port)
    set_config(d.port, NPU_CFG)
    assert client.poll(type=0) == ""
    assert NPU_CFG in client.poll(type=2)


def test_limit_and_iteration_order(d, client):
    # three fake processes (pid sets) polling through one socket
    for p in (700003, 700001, 700002):
        assert client.poll(pids=[p]) == ""
    idle_status(client, d.port)
    rep = set_config(d.port, NPU_CFG, limit=2)
    assert rep["processesMatched"] == [700001, 700002, 700003]
    assert rep["activityProfilersTriggered"] == [700001, 700002]
    assert rep["activityProfilersBusy"] == 0
    # issue 22: the pending configs of the first two are replaced (last wins); the limit still
    # counts every triggered process, so the third is skipped again
    rep = rpc(d.port, '{"fn":"setKinetOnDemandRequest","config":"%s","pids":[0],'
                      '"process_limit":2}' % NPU_CFG.replace("\n", "\\n"))
    assert rep == (b'{"activityProfilersBusy":0,"activityProfilersTriggered":[700001,700002],'
                   b'"commandStatus":"effective","eventProfilersBusy":0,'
                   b'"eventProfilersTriggered":[],"processesMatched":[700001,700002,700003]}')


def test_ancestor_match_and_job_id(d, client):
    client.poll(pids=[800010, 800000])
    client.poll(pids=[800020, 800001])
    client.poll(pids=[800030, 800000], job=7)
    idle_status(client, d.port)
    rep = set_config(d.port, NPU_CFG, pids=[800000])
    assert rep["processesMatched"] == [800010]
    rep = set_config(d.port, NPU_CFG, pids=[], job_id=7)
    assert rep["processesMatched"] == [800030]
    rep = set_config(d.port, NPU_CFG, pids=[123], job_id=0)
    assert rep == {"commandStatus": "ineffective"}


def test_gate_mutual_exclusion(d, client):
    client.poll()
    client.status("monitor", "Idle")
    client.status("trace", "Running", current_step=5, start_step=3, stop_step=9)
    wait_status(d.port, "Running", "Idle")
    assert set_config(d.port, NPU_CFG) == {"commandStatus": "ineffective"}
    st = rpc_json(d.port, {"fn": "getStatus"})
    assert st["nputrace"] == "Running" and st["start_step"] == 3 and st["stop_step"] == 9
    assert st["current_step"] == 5
    client.status("trace", "Idle")
    client.status("monitor", "Running")
    wait_status(d.port, "Idle", "Running")
    assert set_config(d.port, TRACE_CFG) == {"commandStatus": "ineffective"}
    client.status("monitor", "Idle")
    wait_status(d.port, "Idle", "Idle")
    assert set_config(d.port, TRACE_CFG)["processesMatched"] == [client.pid]


def test_get_status_processes(d, client):
    client.poll()
    client.status("monitor", "Running", pid=4250)
    wait_status(d.port, monitor="Running")
    st = rpc(d.port, '{"fn":"getStatus"}').decode()
    # a poller's entry carries its poll age (ours, for `dyno doctor`): plausible, then masked
    ages = [int(a) for a in re.findall(r'"last_poll_age_ms":(\d+),', st)]
    assert len(ages) == 1 and ages[0] < 60000, st
    st = re.sub(r'"last_poll_age_ms":\d+,', '"last_poll_age_ms":N,', st)
    # the daemon-level keys (issue 12) are checked by test_hostmetrics.py
    st = re.sub(r'"daemon_uptime_s":\d+,"ipc_drops":\{[^}]*\},"ipc_uids":\[[^]]*\],"loggers":\[[^]]*\],'
                r'"net_ns":\d+,', '', st)
    st = re.sub(r'"pid_ns":\d+,', '', st)   # the daemon's and each poller's pid namespace (docs/deploy.md)
    st = re.sub(r',"registered_processes":\d+', '', st)
    # 4250 is a made-up pid: no such process, so it reads gone (issue 22), with its mark
    gone = r'"health":\{"gone":true,"marks":\[\{"code":"gone","text":"pid 4250 has exited \(gone\)[^"]*"\}\]\},'
    assert len(re.findall(gone, st)) == (0 if os.path.exists("/proc/4250") else 1), st
    st = re.sub(gone, '', st)
    procs = sorted([(4250, '{"current_step":-1,"job_id":0,"npumonitor":"Running",'
                           '"nputrace":"Uninitialized","pid":4250,"polling":false}'),
                    (client.pid, '{"current_step":-1,"job_id":0,"last_poll_age_ms":N,"npumonitor":"Uninitialized",'
                                 '"nputrace":"Uninitialized","pid":%d,"polling":true}' % client.pid)])
    assert st == ('{"current_step":-1,"npumonitor":"Running","nputrace":"Uninitialized",'
                  '"processes":[' + ",".join(p for _, p in procs) + "]}")
    # both statuses -1 again: the entry goes away
    client.status("monitor", "Uninitialized", pid=4250)
    client.poll()    # control thread has processed the status once the reply arrives
    assert '"pid":4250' not in rpc(d.port, '{"fn":"getStatus"}').decode()


def test_ctxt_count_and_idempotence(d):
    with IpcClient(d.sockdir) as c:
        assert c.register(npu=0, pid=11) == 1
        assert c.register(npu=0, pid=12) == 2
        assert c.register(npu=0, pid=12) == 2
        assert c.register(npu=1, pid=13) == 1
    d.wait_log("Registered process (12) for job 0.")


def test_ctxt_cap(d):
    with IpcClient(d.sockdir) as c:
        for i in range(50):
            assert c.register(npu=0, pid=1000 + i) == i + 1
        assert c.register(npu=0, pid=2000, timeout=0.5) is None
        assert c.register(npu=0, pid=1000) == 50
    d.wait_log("Max register count reached, can not register more libkineto contexts.")


def test_oversized_and_malformed_datagrams_dropped(d, client):
    client.send_raw(build("req", b"\0" * 4960))          # 5000 bytes
    client.send_raw(b"short")
    client.send_raw(b"\x10" + b"\0" * 7 + b"x" * 32 + b"\0" * 16)   # tag without NUL
    client.send_raw(build("bogus", b"1234"))
    client.send_raw(build("req", b"\x03\0\0\0"))         # payload below 16 bytes
    assert client.poll() == ""                           # the next valid one is served
    log = d.wait_log("exceeds max size")
    assert "TYPE UNKOWN: bogus" in log
    assert "req receive message size is invalid: 4" in log
    assert "type tag is not NUL-terminated" in log


def test_unexpected_peer_dropped(d, tmp_path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(tmp_path / "c.sock"))
    s.settimeout(0.5)
    s.sendto(build("req", struct.pack("<iiqi", 3, 1, 0, 4242)), d.sock("dynolog.sock"))
    with pytest.raises(socket.timeout):
        s.recv(100)
    s.close()
    d.wait_log("unexpected peer address " + str(tmp_path / "c.sock"))


def test_data_message_json_logger(d, client):
    client.data({"deviceId": -1, "duration": 81234567, "kind": "Kernel",
                 "timestamp": 1749889801120000000})
    log = d.wait_log('data = {"deviceId":"host","duration":81234567,"kind":"Kernel",'
                     '"timestamp":1749889801120000000}')
    assert ('Received data message : {"deviceId":-1,"duration":81234567,"kind":"Kernel",'
            '"timestamp":1749889801120000000}') in log
    assert "Logging : 4 values" in log
    client.data({"activity": "Kernel", "deviceId": 3, "duration": 30, "interval_ns": 10,
                 "kind": "OpStats", "timestamp": 5,
                 "ops": [{"avg": 10, "count": 2, "max": 15, "min": 5, "name": "MatMul", "total": 20},
                         {"avg": 10, "count": 1, "max": 10, "min": 10, "name": "Add", "total": 10}]})
    d.wait_log('data = {"activity":"Kernel","avg":10,"count":1,"deviceId":"3","kind":"OpStats",'
               '"max":10,"min":10,"name":"Add","timestamp":5,"total":10}')
    client.data('{"kind":"Kernel","duration":-1,"timestamp":1,"deviceId":0}')
    d.wait_log('Error parsing message = {"kind":"Kernel","duration":-1')


def test_gc_forgets_idle_processes():
    d = Daemon(extra=["--registry_gc_interval_ms", "100", "--registry_gc_age_ms", "100",
                      "--noipc_peer_pid_check"])
    try:
        with IpcClient(d.sockdir) as c:
            c.register(npu=0, pid=555)
            c.poll(pids=[555])
            d.wait_log("Stopped tracking process (555) from job 0")
            d.wait_log("Stopped tracking job 0")
            st = rpc_json(d.port, {"fn": "getStatus"})
            assert st["processes"] == []
    finally:
        d.stop()


def test_stale_socket_file_is_replaced(make_daemon):
    sockdir = tempfile.mkdtemp(prefix="mmd", dir="/tmp")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    stale.bind(os.path.join(sockdir, "dynolog.sock"))
    stale.close()                                 # leaves a dead socket file behind
    d = make_daemon(sockdir=sockdir)
    with IpcClient(d.sockdir) as c:
        assert c.poll(timeout=10) == ""   # generous: a loaded (or sanitized) daemon is slow
    d.wait_log("removed stale socket file")


def test_second_daemon_for_same_dir_refused(make_daemon):
    d = make_daemon()
    r = subprocess.run([binpath("dynolog"), "--port", str(free_port()), "--enable_ipc_monitor"],
                       env=d.env, capture_output=True, text=True, timeout=20)
    assert r.returncode == 1
    assert "another dynolog instance is serving " + d.sock("dyno.sock") in r.stderr
    with IpcClient(d.sockdir) as c:      # the first one is untouched and still serves
        assert c.poll() == ""
    assert rpc(d.port, '{"fn":"getVersion"}') == b'{"version":"0.3.2"}'


def test_kineto_dir_endpoint_origin_rule(tmp_path):
    kdir = tempfile.mkdtemp(prefix="mmk", dir="/tmp")
    d = Daemon(extra=["--noipc_peer_pid_check"], env_extra={"KINETO_IPC_SOCKET_DIR": kdir})
    try:
        k = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        k.bind(os.path.join(kdir, "dynoconfigclient-test"))
        k.settimeout(2)
        kdest = os.path.join(kdir, "dynolog")
        k.sendto(build("req", struct.pack("<iiqi", 2, 1, 0, 910001)), kdest)
        assert k.recv(100)[40:] == b""
        with IpcClient(d.sockdir) as m:
            m.poll(pids=[910002])
            m.status("trace", "Idle", pid=910002)
            m.status("monitor", "Running", pid=910002)
            wait_status(d.port, "Idle", "Running")
            # gputrace reaches the Kineto process while npu-monitor runs on msMonitor's
            rep = set_config(d.port, "ACTIVITIES_DURATION_MSECS=100")
            assert rep["processesMatched"] == [910001]
            m.status("monitor", "Idle", pid=910002)
            wait_status(d.port, "Idle", "Idle")
            # npu-monitor never reaches a Kineto process
            rep = set_config(d.port, NPU_CFG)
            assert rep["processesMatched"] == [910002]
        k.close()
    finally:
        d.stop()
    assert not os.path.exists(os.path.join(kdir, "dynolog"))


def test_reply_source_with_trailing_slash_socket_dir(make_daemon):
    # MSMONITOR_SOCKET_DIR=/dir/ : the plugin expects replies from exactly /dir/dynolog.sock
    # (it strips trailing slashes), so the daemon must bind that name, not /dir//dynolog.sock
    sockdir = tempfile.mkdtemp(prefix="mmd", dir="/tmp")
    d = make_daemon(sockdir=sockdir + "//")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.bind("\0dynoconfigclient-trailing-slash-test")
        s.settimeout(5)
        s.sendto(build("req", struct.pack("<iiqi", 3, 1, 0, os.getpid())),
                 os.path.join(sockdir, "dynolog.sock"))
        data, src = s.recvfrom(4096)
        assert data[:8] == struct.pack("<Q", 0)
        assert src == os.path.join(sockdir, "dynolog.sock")
    finally:
        s.close()
    d.stop()
    for n in ("dynolog.sock", "dynolog_data.sock", "dyno.sock"):
        assert not os.path.exists(os.path.join(sockdir, n))


def test_unnamed_sender_warning_is_rate_limited(d):
    # an unbound client gets no reply (nowhere to send it) and must not flood the log
    u = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        for _ in range(200):
            u.sendto(build("req", struct.pack("<iiqi", 3, 1, 0, 4242)), d.sock("dynolog.sock"))
    finally:
        u.close()
    with IpcClient(d.sockdir) as c:      # served after the 200 in the same queue
        assert c.poll() == ""
    d.wait_log("unnamed sender: req reply skipped")
    assert d.log().count("unnamed sender: req reply skipped") < 20
