"""`dyno gputrace` against PyTorch Kineto's real dynolog client protocol (spec docs/design/daemon.md#kineto-clients,
docs/design/ipc.md#kineto-endpoint, #datagrams, #registry, docs/design/rpc.md#status-gate, #setkinetondemandrequest, docs/design/cli.md#gputrace), real daemon and real dyno:
a Kineto-style client (ipcclient.KinetoClient / kineto_client.py: abstract
dynoconfigclient<uuid> name with Kineto's trailing NUL, two-iovec datagrams to @dynolog,
ctxt {gpu,pid,job}, req {type,n,job,pids} with own pid + ancestors) registers, polls and
receives the wrapped config; npu-monitor and gputrace stay apart by origin."""
import json
import os
import re
import socket
import struct
import sys
import uuid

import pytest

from conftest import Daemon, Proc, run_dyno
from ipcclient import (HDR, KINETO_DEST, IpcClient, KinetoClient, build, kineto_log_file,
                       parse_kineto_config)
from waits import wait_status, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
IND = " " * 12


@pytest.fixture
def d():
    # test_npu_monitor_and_gputrace_kept_apart speaks for a made-up msMonitor pid next to the
    # Kineto client in the same process: the issue-13 speaks-for rule is off here
    dm = Daemon(extra=["--noipc_peer_pid_check"])
    yield dm
    dm.stop()


def events(proc, kind):
    out = []
    for line in proc.log().splitlines():
        if line.startswith("{"):
            e = json.loads(line)
            if e["event"] == kind:
                out.append(e)
    return out


def wait_event(proc, kind, pred=lambda e: True, timeout=15):
    hits = wait_until(lambda: [e for e in events(proc, kind) if pred(e)], timeout, f"a {kind} event",
                      diag=lambda: proc.log()[-3000:], alive=proc, interval=0.02)
    return hits[0]


def reply_of(stdout):
    m = re.search(r"^response = (.*)$", stdout, re.M)
    assert m, stdout
    return json.loads(m.group(1))


def kineto_config_of(stdout):
    """The config text dyno printed after `Kineto config = ` (up to `response length`)."""
    i = stdout.index("Kineto config = ") + len("Kineto config = ")
    j = stdout.index("\nresponse length = ")
    return stdout[i:j].lstrip("\n")


def test_datagrams_are_byte_exact():
    # docs/design/ipc.md#datagrams worked example, and KinetoClient's two-iovec req is the same bytes
    ex = bytes.fromhex("1c00000000000000" "72657100" + "00" * 28 +
                       "03000000" "03000000" + "00" * 8 + "d2040000" "e8030000" "84030000")
    assert build("req", struct.pack("<iiqiii", 3, 3, 0, 1234, 1000, 900)) == ex
    with KinetoClient(job=0, pids=[1234, 1000, 900]) as k:
        p = k.req_payload(3)
        assert HDR.pack(len(p), b"req".ljust(32, b"\0")) + p == ex
        assert k.sock.getsockname() == b"\0" + k.name.encode() + b"\0"
        assert len(k.name) == 52 and uuid.UUID(k.name[16:]).version == 4
    assert len(KINETO_DEST) + 2 == 11     # sizeof(sa_family_t) + strlen("dynolog") + 2


def test_abstract_endpoint_exact_name_and_ctxt(d):
    with KinetoClient() as k:
        # a different address length is a different name: nobody listens there
        with pytest.raises(ConnectionRefusedError):
            k.sock.sendto(build("req", k.req_payload(2)), b"\0dynolog")
        assert k.ctxt(3) == 1                        # int32 count for (job 0, gpu 3)
        d.wait_log("Registered process (%d) for job 0." % k.pid)
        assert k.ctxt(3) == 1                        # idempotent
        # first req registers implicitly; the reply comes from @dynolog even when empty
        text, src = k.poll(timeout=5)
        assert text == "" and src == KINETO_DEST
        d.wait_log("Registered process (%s) for job 0." % ", ".join(map(str, k.pids)))
        assert len(k.pids) <= 11


def test_gputrace_duration_mode_end_to_end(d):
    kc = Proc([sys.executable, os.path.join(HERE, "kineto_client.py"), "--gpu", "0",
               "--interval", "0.2"], env=d.client_env(), logname="kineto")
    try:
        start = wait_event(kc, "start")
        pid = start["pid"]
        assert wait_event(kc, "ctxt")["count"] == 1
        wait_event(kc, "poll", lambda e: e["reply"] == "" and e["src"] == "\0dynolog\0")
        log_file = "/tmp/mmk_%s.json" % uuid.uuid4().hex[:8]
        r = run_dyno(d, "gputrace", "--log-file", log_file, "--duration-ms", "300")
        assert r.returncode == 0, r.stderr
        rep = reply_of(r.stdout)
        assert rep == {"activityProfilersBusy": 0, "activityProfilersTriggered": [pid],
                       "commandStatus": "effective", "eventProfilersBusy": 0,
                       "eventProfilersTriggered": [], "processesMatched": [pid]}
        out = r.stdout.splitlines()
        i = out.index("Matched 1 processes")
        assert out[i + 1:i + 3] == ["Trace output files will be written to:",
                                    "    " + kineto_log_file(log_file, pid)]
        cfg = kineto_config_of(r.stdout)
        assert cfg.split("\n") == [
            "ACTIVITIES_LOG_FILE=" + log_file, "PROFILE_START_TIME=0",
            "ACTIVITIES_DURATION_MSECS=300", "PROFILE_REPORT_INPUT_SHAPES=false",
            "PROFILE_WITH_STACK=false", "PROFILE_WITH_FLOPS=false", "PROFILE_WITH_MODULES=false"]
        # the next ACTIVITIES poll receives it, wrapped with the trace id line (docs/design/ipc.md#config-wrapping)
        got = wait_event(kc, "poll", lambda e: e["reply"])
        m = re.fullmatch(re.escape("\n" + IND + cfg + "\n" + IND + "REQUEST_TRACE_ID=") +
                         r"(\d+)\n", got["reply"])
        assert m, repr(got["reply"])
        assert got["src"] == "\0dynolog\0"
        d.wait_log(" PID: %d, Trace Id: %s" % (pid, m.group(1)))
        keys = wait_event(kc, "config")["keys"]
        assert keys["ACTIVITIES_DURATION_MSECS"] == "300"
        assert keys["ACTIVITIES_LOG_FILE"] == log_file
        assert keys["REQUEST_TRACE_ID"] == m.group(1)
        # keep-alives (type 0) while tracing, then the file under the name dyno printed
        wait_event(kc, "poll", lambda e: e["type"] == 0)
        written = wait_event(kc, "trace_written")["path"]
        assert written == kineto_log_file(log_file, pid) and os.path.exists(written)
        os.unlink(written)
        # one-shot: later ACTIVITIES polls get empty replies
        n = len(events(kc, "poll"))
        wait_until(lambda: len(events(kc, "poll")) >= n + 3, 30, "three more polls", alive=kc)
        assert all(e["reply"] == "" for e in events(kc, "poll")[n:])
        assert len([e for e in events(kc, "poll") if e["reply"]]) == 1
    finally:
        kc.stop()


def test_gputrace_iteration_mode_spec_example_and_keepalive(d):
    with KinetoClient() as k:
        assert k.poll(timeout=5)[0] == ""
        r = run_dyno(d, "gputrace", "--log-file", "/tmp/t.pt.trace.json", "--iterations", "2")
        assert r.returncode == 0, r.stderr
        assert "    /tmp/t_%d.pt.trace.json" % k.pid in r.stdout.splitlines()
        # a second command before the poll replaces the first (issue 22: last wins)
        r2 = run_dyno(d, "gputrace", "--log-file", "/tmp/t.pt.trace.json", "--iterations", "2")
        assert reply_of(r2.stdout)["activityProfilersBusy"] == 0
        assert reply_of(r2.stdout)["activityProfilersTriggered"] == [k.pid]
        # type 0 keep-alive gets an (empty) reply and leaves the config pending
        assert k.poll(type=0, timeout=5)[0] == ""
        text = k.poll(type=2, timeout=5)[0]
        # docs/design/daemon.md#kineto-clients's example, byte for byte
        m = re.fullmatch(re.escape(
            "\n" + IND + "ACTIVITIES_LOG_FILE=/tmp/t.pt.trace.json\nPROFILE_START_ITERATION=0\n"
            "PROFILE_START_ITERATION_ROUNDUP=1\nACTIVITIES_ITERATIONS=2\n"
            "PROFILE_REPORT_INPUT_SHAPES=false\nPROFILE_WITH_STACK=false\n"
            "PROFILE_WITH_FLOPS=false\nPROFILE_WITH_MODULES=false\n" + IND +
            "REQUEST_TRACE_ID=") + r"\d+\n", text)
        assert m, repr(text)
        assert parse_kineto_config(text)["ACTIVITIES_ITERATIONS"] == "2"
        assert k.poll(type=2, timeout=5)[0] == ""


def test_slurm_job_id_must_match(d):
    with KinetoClient(job=77) as k:
        assert k.poll(timeout=5)[0] == ""
        r = run_dyno(d, "gputrace", "--log-file", "/tmp/t.json", "--fail-on-no-process")
        assert r.returncode == 1
        assert "No processes were matched, please check --job-id or --pids flags" in r.stdout
        r = run_dyno(d, "gputrace", "--job-id", "77", "--log-file", "/tmp/t.json")
        assert r.returncode == 0 and reply_of(r.stdout)["processesMatched"] == [k.pid]
        assert "REQUEST_TRACE_ID=" in k.poll(timeout=5)[0]
        # an ancestor pid (launcher) selects its descendants
        r = run_dyno(d, "gputrace", "--job-id", "77", "--pids", str(k.pids[-1]),
                     "--log-file", "/tmp/t.json")
        assert reply_of(r.stdout)["processesMatched"] == [k.pid]


def test_npu_monitor_and_gputrace_kept_apart(d):
    MS = 910002                                      # the msMonitor process (plugin pid)
    with KinetoClient() as k, IpcClient(d.sockdir) as m:
        assert k.poll(timeout=5)[0] == ""
        assert m.poll(pids=[MS], timeout=5) == ""
        m.status("trace", "Idle", pid=MS)
        m.status("monitor", "Running", pid=MS)
        wait_status(d.port, "Idle", "Running")
        # npu-monitor Running: gputrace (TRACE) skips the msMonitor process (gate
        # ineffective) but reaches the Kineto process (no gate for Kineto)
        r = run_dyno(d, "gputrace", "--log-file", "/tmp/t.json")
        assert r.returncode == 0
        rep = reply_of(r.stdout)
        assert rep["processesMatched"] == [k.pid] and rep["commandStatus"] == "effective"
        assert m.poll(pids=[MS]) == ""
        assert "ACTIVITIES_LOG_FILE=/tmp/t.json" in k.poll(timeout=5)[0]
        # npu-monitor configs never reach the Kineto process
        m.status("monitor", "Idle", pid=MS)
        wait_status(d.port, "Idle", "Idle")
        # --no-wait: this fake process polls only after dyno returned (issue 22)
        r = run_dyno(d, "npu-monitor", "--npu-monitor-start", "--no-wait")
        assert r.returncode == 0, r.stderr
        assert reply_of(r.stdout)["processesMatched"] == [MS]
        assert m.poll(pids=[MS]).startswith("\n" + IND + "NPU_MONITOR_START=true")
        assert k.poll(timeout=1)[0] == ""
        # nputrace Running on the msMonitor side: npu-monitor is refused (gate), and the
        # Kineto process is never eligible for it, so nothing matches
        m.status("trace", "Running", pid=MS)
        wait_status(d.port, "Running", "Idle")
        r = run_dyno(d, "npu-monitor", "--npu-monitor-start")
        assert reply_of(r.stdout) == {"commandStatus": "ineffective"}
        assert k.poll(timeout=1)[0] == ""
        # both idle: a gputrace (TRACE kind) is eligible for both origins, as upstream
        m.status("trace", "Idle", pid=MS)
        wait_status(d.port, "Idle", "Idle")
        r = run_dyno(d, "gputrace", "--log-file", "/tmp/t.json")
        assert sorted(reply_of(r.stdout)["processesMatched"]) == sorted([k.pid, MS])
        assert "REQUEST_TRACE_ID=" in k.poll(timeout=5)[0]
        assert "REQUEST_TRACE_ID=" in m.poll(pids=[MS])


def test_kineto_origin_becomes_msmon_on_npu_status(d):
    with KinetoClient() as k:
        assert k.poll(timeout=5)[0] == ""
        # an older msMonitor plugin on the abstract name: its status makes it MSMON
        k.send("npuTraceStatus", struct.pack("<iiiiiiq", 0, -1, -1, -1, k.pid, 0, 0))
        k.send("npuMonitorStatus", struct.pack("<iiiiiiq", 0, -1, -1, -1, k.pid, 0, 0))
        wait_status(d.port, "Idle", "Idle")
        r = run_dyno(d, "npu-monitor", "--npu-monitor-start")
        assert reply_of(r.stdout)["processesMatched"] == [k.pid]
        assert k.poll(timeout=5)[0].startswith("\n" + IND + "NPU_MONITOR_START=true")


def test_fail_on_no_process_kineto_only_daemon(d):
    r = run_dyno(d, "gputrace", "--log-file", "/tmp/t.json", "--fail-on-no-process")
    assert r.returncode == 1
    # a Kineto-only daemon (no NPU status ever) still sends the upstream keys (docs/design/rpc.md#setkinetondemandrequest)
    assert reply_of(r.stdout) == {"activityProfilersBusy": 0, "activityProfilersTriggered": [],
                                  "commandStatus": "ineffective", "eventProfilersBusy": 0,
                                  "eventProfilersTriggered": [], "processesMatched": []}
    assert "No processes were matched, please check --job-id or --pids flags" in r.stdout
    assert r.stderr == "No processes were matched (--fail-on-no-process)\n"
    r = run_dyno(d, "gputrace", "--log-file", "/tmp/t.json")      # without the flag: 0
    assert r.returncode == 0
