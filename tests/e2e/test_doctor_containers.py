"""dyno doctor where containers go wrong (docs/troubleshooting.md#containers-and-pods): each case is
built with the kernel's namespaces and must end in its ✘ line with the fix, and in what the daemon
says and counts:

- a daemon in a pid namespace of its own: the kernel gives it pid 0 for the job's datagrams; it
  drops them, says so once with the fix, and doctor fails with `hostPID: true`;
- a job whose mount namespace does not have the socket directory;
- a container user the node sees as another uid: the daemon drops it, doctor names the uid to allow."""
import os
import socket
import struct
import subprocess
import tempfile

from conftest import Daemon, Proc, binpath, free_port
from ctr_util import Container, require_containers
from daemon_util import rpc_json
from ipcclient import build
from waits import wait_until

FAIL = "\u2718"


def doctor(port, sockdir, *args):
    env = dict(os.environ, MSMONITOR_SOCKET_DIR=sockdir, HOME=sockdir)
    return subprocess.run([binpath("dyno"), "--hostname", "localhost", "--port", str(port), "doctor"] + list(args),
                          env=env, capture_output=True, text=True, timeout=60)


def fails(r, *words):
    hits = [ln for ln in r.stdout.splitlines() if ln.startswith(FAIL) and all(w in ln for w in words)]
    assert r.returncode == 1 and hits, r.stdout + r.stderr
    return hits[0]


def req(pid):
    return build("req", struct.pack("<iiqi", 3, 1, 0, pid))


def test_daemon_in_its_own_pid_namespace(tmp_path):
    require_containers()
    sockdir = tempfile.mkdtemp(prefix="mmdp", dir="/tmp")
    port = free_port()
    d = Container("dynolog-own-pidns", [binpath("dynolog"), "--port", str(port), "--enable_ipc_monitor"],
                  dict(os.environ, HOME=sockdir), tmp_path, sockdir=sockdir)
    try:
        wait_until(lambda: os.path.exists(os.path.join(sockdir, "dynolog.sock")), 30, "dynolog.sock", diag=d.log,
                   alive=d)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind("\0dynoconfigclient-own-pidns-test")
        for _ in range(3):   # a job on the node polling: the daemon cannot see it
            s.sendto(req(os.getpid()), os.path.join(sockdir, "dynolog.sock"))
        s.close()

        def dropped():
            st = rpc_json(port, {"fn": "getStatus"}) or {}
            return st.get("ipc_drops", {}).get("no_pid", 0) >= 3 and st
        st = wait_until(dropped, 30, "the datagrams counted as dropped without a pid")
        assert st["processes"] == []
        assert d.log().count("the kernel reports pid 0 for the sender") == 1          # once
        assert "hostPID: true" in d.log() and "--pid=host" in d.log()
        hit = fails(doctor(port, sockdir), "whose sender it cannot see")
        assert "hostPID: true" in hit and "docs/troubleshooting.md#the-daemon-cannot-see-the-jobs-pids" in hit
    finally:
        d.kill()


def test_job_without_the_socket_directory_and_mapped_uid(tmp_path):
    require_containers()
    d = Daemon(extra=["--ipc_socket_mode=0666"])   # a container's user can reach the sockets
    os.chmod(d.sockdir, 0o755)
    jobs = []
    try:
        # a container whose MSMONITOR_SOCKET_DIR is a directory of its own, not the daemon's
        own = os.path.join(str(tmp_path), "empty")
        os.makedirs(own)
        env = dict(os.environ, MSMONITOR_USE_DAEMON="1", MSMONITOR_SOCKET_DIR=own)
        job = Container("no-sockets", ["sleep", "600"], env, tmp_path)
        jobs.append(job)
        hit = fails(doctor(d.port, d.sockdir, "--pid", str(job.init_pid())), "cannot see")
        assert own in hit and "mount the daemon's socket directory" in hit
        # a user namespace: root inside, uid 65534 on the node; its datagram is dropped, and the
        # doctor names the uid for --ipc_allowed_uids, from the daemon's count and from the job
        mapped = Proc(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "-U", "-r", "--",
                       "sh", "-c", "echo ready; exec sleep 600"], env=dict(os.environ), tmpdir=str(tmp_path))
        jobs.append(mapped)
        mapped.wait_log("ready", timeout=30)
        pid = mapped.p.pid   # setpriv and unshare exec: the sleep itself, in its user namespace
        sender = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
                                 "-c", "import socket,sys; s=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM); "
                                 "s.sendto(bytes.fromhex(sys.argv[1]), sys.argv[2])",
                                 req(1).hex(), d.sock("dynolog.sock")], capture_output=True, text=True, timeout=30)
        assert sender.returncode == 0, sender.stderr
        wait_until(lambda: (rpc_json(d.port, {"fn": "getStatus"}) or {}).get("ipc_drops", {}).get("uid", 0) >= 1,
                   30, "the datagram of uid 65534 counted")
        hit = fails(doctor(d.port, d.sockdir), "from uids it does not take")
        assert "--ipc_allowed_uids=65534" in hit and "the last from uid 65534" in hit
        hit = fails(doctor(d.port, d.sockdir, "--pid", str(pid)), "runs in a user namespace")
        assert "uid 65534" in hit and "--ipc_allowed_uids=65534" in hit and "docs/troubleshooting.md#mapped-uids" in hit
    finally:
        for j in jobs:
            j.kill() if isinstance(j, Container) else j.stop()
        d.stop()
