"""Containers the way the kernel builds them, for the deployment tests (docs/deploy.md): `unshare`
new pid (with its own /proc), mount, uts and ipc namespaces, a network namespace when asked (loopback
up), a private /dev/shm, the daemon's socket directory bind-mounted at a path of the container's own,
its own hostname, and the downward-API variables a Kubernetes pod gets. Nothing is mocked: the
daemon sees these processes exactly as it sees a pod's.

A container's processes live as long as its `unshare` process: kill() sends it SIGKILL, and
--kill-child takes the namespace's init (and so every process in the namespace) with it. Only root
can build them; the tests skip otherwise."""
import os
import secrets
import shutil
import signal
import subprocess
import uuid

import pytest

from conftest import Proc
from waits import wait_until

# Run by `sh -c` as the container's first process; "$@" is the payload, exec'd (so it is the
# namespace's init when there is a pid namespace).
SETUP = r"""
set -e
hostname "$MSCTR_HOSTNAME"
mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm
if [ -n "$MSCTR_SOCKDIR" ]; then mount --bind "$MSCTR_SOCKDIR" "$MSCTR_INNER"; fi
if [ "$MSCTR_NET" = 1 ]; then ip link set lo up; fi
if [ -n "$MSCTR_CGROUP" ]; then echo $$ > "$MSCTR_CGROUP/cgroup.procs"; fi
unset MSCTR_HOSTNAME MSCTR_SOCKDIR MSCTR_INNER MSCTR_NET MSCTR_CGROUP
exec "$@"
"""


def require_containers():
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"):
        pytest.skip("containers need root, unshare and nsenter")
    r = subprocess.run(["unshare", "-p", "-f", "-m", "-u", "-i", "--mount-proc", "true"], capture_output=True)
    if r.returncode != 0:
        pytest.skip("unshare cannot make pid/mount/uts/ipc namespaces here: " + r.stderr.decode(errors="replace"))


def pod_env(name, namespace="ml", container="trainer", node=None):
    """The downward-API variables of a pod's container (packaging/kubernetes/training-pod.yaml)."""
    return {"POD_NAME": name, "POD_NAMESPACE": namespace, "NODE_NAME": node or os.uname().nodename,
            "CONTAINER_NAME": container}


class Container(Proc):
    """argv run in new namespaces; `sockdir` (the daemon's socket directory on the node) appears
    at `self.inner` inside, and MSMONITOR_SOCKET_DIR says so."""

    def __init__(self, name, argv, env, tmp, sockdir=None, hostname=None, pid=True, net=False, cgroup=None):
        self.name = name
        self.dir = os.path.join(str(tmp), name)
        os.makedirs(self.dir, exist_ok=True)
        self.inner = os.path.join(self.dir, "run") if sockdir else None
        env = dict(env)
        env.update({"MSCTR_HOSTNAME": hostname or name, "MSCTR_NET": "1" if net else "0",
                    "MSCTR_CGROUP": cgroup.path if cgroup else ""})
        if sockdir:
            os.makedirs(self.inner, exist_ok=True)
            env.update({"MSCTR_SOCKDIR": sockdir, "MSCTR_INNER": self.inner, "MSMONITOR_SOCKET_DIR": self.inner})
        ns = ["-m", "-u", "-i"] + (["-p", "--mount-proc"] if pid else []) + (["-n"] if net else [])
        self.pidns = pid
        super().__init__(["unshare", "--fork", "--kill-child"] + ns + ["--", "sh", "-c", SETUP, "sh"] + list(argv),
                         env=env, logname=name, tmpdir=self.dir)

    def init_pid(self, timeout=30):
        """The node pid of the container's first process (the payload, after exec)."""
        def child():
            try:
                with open(f"/proc/{self.p.pid}/task/{self.p.pid}/children") as f:
                    kids = f.read().split()
            except OSError:
                return None
            return int(kids[0]) if kids else None
        return wait_until(child, timeout, f"the first process of container {self.name}", diag=self.log, alive=self)

    def nsenter(self, argv, env=None, timeout=60, net=True):
        """Run argv inside the container (its pid, mount, uts, ipc and network namespaces)."""
        t = str(self.init_pid())
        flags = ["-m", "-u", "-i"] + (["-p"] if self.pidns else []) + (["-n"] if net else [])
        return subprocess.run(["nsenter", "-t", t] + flags + ["--"] + list(argv), env=env, capture_output=True,
                              text=True, timeout=timeout)

    def kill(self):
        """SIGKILL, as a node kills a container: every process in it dies. Returns once the
        namespace's init has exited, which the kernel allows only after every other process of
        the namespace has (a container without a pid namespace: once its payload has)."""
        init = None
        if self.p.poll() is None:
            try:
                with open(f"/proc/{self.p.pid}/task/{self.p.pid}/children") as f:
                    kids = f.read().split()
                init = int(kids[0]) if kids else None
            except OSError:
                pass
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait()
        if init:
            wait_until(lambda: not _alive(init), 30, f"container {self.name}'s processes to exit")
        return self.stop()


class PodCgroup:
    """A pod's cgroup as Kubernetes makes it with the systemd driver and containerd
    (kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice/
    cri-containerd-<id>.scope), under a directory of this test's own in the cgroup v2 hierarchy;
    None where no writable one is mounted. remove() takes it away again (its processes gone)."""

    @staticmethod
    def make():
        root = None
        try:
            with open("/proc/self/mountinfo") as f:
                for ln in f:
                    parts = ln.split()
                    fstype = parts[parts.index("-") + 1]
                    if fstype == "cgroup2":
                        root = parts[4]
                        break
        except (OSError, ValueError, IndexError):
            return None
        if not root:
            return None
        uid, cid = str(uuid.uuid4()), secrets.token_hex(32)
        top = os.path.join(root, "msmon-e2e-" + secrets.token_hex(4))
        path = os.path.join(top, "kubepods.slice", "kubepods-besteffort.slice",
                            "kubepods-besteffort-pod%s.slice" % uid.replace("-", "_"), "cri-containerd-%s.scope" % cid)
        try:
            os.makedirs(path)
        except OSError:
            return None
        c = PodCgroup()
        c.top, c.path, c.uid, c.cid = top, path, uid, cid
        return c

    def remove(self):
        p = self.path
        while len(p) >= len(self.top):
            try:
                os.rmdir(p)
            except OSError:
                pass
            p = os.path.dirname(p)


def _alive(pid):
    """pid runs (a zombie has exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False
