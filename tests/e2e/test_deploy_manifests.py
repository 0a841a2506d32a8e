"""packaging/kubernetes/ against the code (docs/deploy.md#kubernetes-manifests): the manifests are
parsed (python3-yaml) and every path, port, flag and environment variable in them is checked
against what the binaries and the generated msmonitor._contract say, never against a retyped copy."""
import os
import subprocess
import sys

import pytest

from conftest import SOURCE, binpath
from python_util import PKG

yaml = pytest.importorskip("yaml")
KDIR = os.path.join(SOURCE, "packaging", "kubernetes")


@pytest.fixture(scope="module")
def contract():
    sys.path.insert(0, PKG)
    try:
        from msmonitor import _contract  # generated from src/contract at build time
    finally:
        sys.path.remove(PKG)
    return _contract


def load(name):
    with open(os.path.join(KDIR, name), encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    assert len(docs) == 1, name
    return docs[0]


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def mount_of(container, volume):
    return next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == volume)


def flags_of(args):
    """{flag: value or True} of --name[=value] arguments."""
    out = {}
    for a in args:
        assert a.startswith("--"), a
        k, _, v = a[2:].partition("=")
        out[k] = v if _ else True
    return out


def daemon_flags():
    """The flag names `dynolog --help` lists (the one table that parses them)."""
    r = subprocess.run([binpath("dynolog"), "--help"], capture_output=True, text=True, timeout=30)
    return {ln.split()[0][2:] for ln in r.stdout.splitlines() if ln.startswith("  --")}


def socket_volume(spec):
    """The hostPath volume holding the daemon's sockets, by its path."""
    vols = [v for v in spec["volumes"] if "hostPath" in v]
    return {v["name"]: v["hostPath"]["path"] for v in vols}


def test_daemonset(contract):
    ds = load("dynolog-daemonset.yaml")
    assert ds["kind"] == "DaemonSet" and ds["apiVersion"] == "apps/v1"
    spec = ds["spec"]["template"]["spec"]
    # the daemon must see the jobs' pids (docs/deploy.md#the-daemon-must-see-the-jobs-pids)
    assert spec["hostPID"] is True and spec["hostNetwork"] is True
    (c,) = spec["containers"]
    flags = flags_of(c["args"])
    assert set(flags) <= daemon_flags(), set(flags) - daemon_flags()
    assert flags["enable_ipc_monitor"] is True
    # ports: the flags, the container ports and the contract's defaults agree
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert int(flags["port"]) == ports["rpc"] == contract.RPC_PORT
    assert int(flags["prometheus_port"]) == ports["metrics"] == contract.PROMETHEUS_PORT
    assert "use_prometheus" in flags
    # the socket directory: a hostPath, mounted where MSMONITOR_SOCKET_DIR says
    env = env_of(c)
    sockdir = env[contract.ENV_SOCKET_DIR]["value"]
    hostpaths = socket_volume(spec)
    vol = next(m["name"] for m in c["volumeMounts"] if m["mountPath"] == sockdir)
    assert vol in hostpaths
    # readiness: dyno status on the local socket, by its contract name
    probe = c["readinessProbe"]["exec"]["command"]
    assert probe[0] == "dyno" and probe[-1] == "status"
    assert probe[probe.index("--hostname") + 1] == "unix:" + os.path.join(sockdir, contract.SOCK_RPC)
    # TLS from a Secret, mounted where --certs_dir points
    secret = next(v for v in spec["volumes"] if "secret" in v)
    assert mount_of(c, secret["name"]) == flags["certs_dir"]
    # --allowed_log_dirs is a mounted host directory
    assert any(m["mountPath"] == flags["allowed_log_dirs"] for m in c["volumeMounts"])
    res = c["resources"]
    assert set(res["requests"]) == set(res["limits"]) == {"cpu", "memory"}


def test_training_pod_matches_the_daemonset(contract):
    ds = load("dynolog-daemonset.yaml")
    pod = load("training-pod.yaml")
    assert pod["kind"] == "Pod"
    dspec = ds["spec"]["template"]["spec"]
    (dc,) = dspec["containers"]
    ds_sockdir = env_of(dc)[contract.ENV_SOCKET_DIR]["value"]
    ds_vol = next(m["name"] for m in dc["volumeMounts"] if m["mountPath"] == ds_sockdir)
    host_path = socket_volume(dspec)[ds_vol]
    (c,) = pod["spec"]["containers"]
    env = env_of(c)
    assert env[contract.ENV_USE_DAEMON]["value"] == "1"
    # the same host directory, mounted where the pod's MSMONITOR_SOCKET_DIR says
    sockdir = env[contract.ENV_SOCKET_DIR]["value"]
    vol = next(m["name"] for m in c["volumeMounts"] if m["mountPath"] == sockdir)
    assert socket_volume(pod["spec"])[vol] == host_path
    # the downward-API variables by the contract's names
    assert set(contract.POD_ENV) <= set(env)
    fields = {name: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for name, e in env.items()}
    pod_name, pod_ns, node = (f[0] for f in contract.POD_FIELDS[:3])
    assert fields[pod_name] == "metadata.name" and fields[pod_ns] == "metadata.namespace"
    assert fields[node] == "spec.nodeName"
    # the literal values are valid names by the contract's rule (the daemon refuses others)
    container = contract.POD_FIELDS[3][0]
    assert env[container]["value"] == c["name"]
    assert len(pod["metadata"]["name"]) <= contract.POD_FIELDS[0][3]
    # no LD_PRELOAD, no switch of the simulator: the FAQ's default mode
    assert "LD_PRELOAD" not in env and not any(k.startswith("MSSIM_") for k in env)


def test_docs_name_the_manifests():
    with open(os.path.join(SOURCE, "docs", "deploy.md"), encoding="utf-8") as f:
        text = f.read()
    for name in os.listdir(KDIR):
        assert f"packaging/kubernetes/{name}" in text or name in text, name
