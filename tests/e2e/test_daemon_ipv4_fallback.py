"""docs/design/rpc.md#transport, docs/design/rpc.md: when IPv6 is unavailable (socket(AF_INET6) fails, as with
ipv6.disable=1) the daemon logs the fallback and serves RPC over IPv4 0.0.0.0."""
import os

from conftest import BUILD, Daemon, run_dyno


def test_ipv4_fallback_serves_rpc():
    shim = os.path.join(BUILD, "tests", "e2e", "libnoipv6.so")
    assert os.path.exists(shim), shim
    preload = (os.environ.get("LD_PRELOAD", "") + " " + shim).strip()
    d = Daemon(env_extra={"LD_PRELOAD": preload})
    try:
        log = d.log()
        assert "IPv6 unavailable (EAFNOSUPPORT), falling back to IPv4" in log
        # dyno itself must not carry the shim: strip it from the client environment
        env = d.client_env()
        env["LD_PRELOAD"] = os.environ.get("LD_PRELOAD", "")
        if not env["LD_PRELOAD"]:
            del env["LD_PRELOAD"]
        r = run_dyno(d, "version", hostname="127.0.0.1", env=env)
        assert r.returncode == 0, r.stderr
        assert '{"version":"' in r.stdout
        # and the IPv6 loopback is not served: the listener is IPv4 only
        r6 = run_dyno(d, "version", hostname="::1", timeout=30, env=env)
        assert r6.returncode == 1
        assert "Couldn't connect to the server" in r6.stderr
    finally:
        assert d.stop() == 0


def test_dual_stack_by_default():
    d = Daemon()
    try:
        assert "falling back to IPv4" not in d.log()
        for host in ("127.0.0.1", "::1"):
            r = run_dyno(d, "version", hostname=host)
            assert r.returncode == 0, (host, r.stderr)
    finally:
        assert d.stop() == 0
