"""The one wait/poll helper of the end-to-end tests: every test waits for a state (a log line,
a file, a status field) with a generous deadline, never for a time. docs/design/session.md and
docs/daemon.md describe the states the tests wait for."""
import os
import time

# Deadlines are what fail a test, so they are generous; in a sanitizer tree every process runs
# several times slower (a Python rank under ASan takes tens of seconds to start on a loaded
# machine), so each deadline is stretched there. MSMON_TEST_TIMEOUT_SCALE overrides the factor.
TIMEOUT_SCALE = float(os.environ.get("MSMON_TEST_TIMEOUT_SCALE")
                      or (4.0 if os.environ.get("MSMON_SANITIZED") == "1" else 1.0))

# Polls are cheap reads (a log file, one RPC); the interval only bounds how late a state is
# seen, the deadline is what fails a test, and it is generous because the machine is shared.
INTERVAL_S = 0.05


class WaitTimeout(AssertionError):
    pass


def _alive_check(alive):
    """`alive`: a Popen, an object with `.p` (conftest.Proc) or a list of them; an exited one
    fails the wait at once (nothing will change any more), with its exit status."""
    if alive is None:
        return
    for a in alive if isinstance(alive, (list, tuple)) else [alive]:
        p = getattr(a, "p", a)
        if p.poll() is not None:
            raise WaitTimeout(f"process {p.pid} exited ({p.returncode})")


def wait_until(pred, timeout, what, diag=None, alive=None, interval=INTERVAL_S):
    """Poll `pred` until it returns a true value, and return that value. On timeout (or when a
    process in `alive` exited) fail naming `what`, with `diag()` appended when given."""
    timeout = timeout * TIMEOUT_SCALE
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        try:
            _alive_check(alive)
            if time.monotonic() > deadline:
                raise WaitTimeout(f"timeout after {timeout} s")
        except WaitTimeout as e:
            raise WaitTimeout(f"{e} waiting for {what}" + (f":\n{diag()}" if diag else "")) from None
        time.sleep(interval)


def wait_status(port, trace=None, monitor=None, timeout=30.0):
    """The daemon's getStatus shows the given nputrace / npumonitor gate states (status
    datagrams get no reply, so a test waits until they are applied); returns the status."""
    from daemon_util import rpc_json
    last = {}

    def ok():
        st = rpc_json(port, {"fn": "getStatus"})
        last["st"] = st
        if (trace is None or st["nputrace"] == trace) and (monitor is None or st["npumonitor"] == monitor):
            return st
        return None
    return wait_until(ok, timeout, f"status nputrace={trace} npumonitor={monitor}",
                      diag=lambda: repr(last.get("st")), interval=0.01)


def wait_polling(daemon, run_dyno, timeout=30.0, count=1):
    """At least `count` registered processes have polled (only then can a config reach them);
    returns `dyno status`'s JSON."""
    import json
    last = {}

    def ok():
        r = run_dyno(daemon, "status")
        last["out"] = r.stdout
        if "{" not in r.stdout:
            return None
        st = json.loads(r.stdout[r.stdout.index("{"):])
        return st if sum(1 for p in st.get("processes", []) if p.get("polling")) >= count else None
    return wait_until(ok, timeout, f"{count} polling process(es)",
                      diag=lambda: f"{last.get('out')}\n{daemon.log()[-3000:]}", interval=0.1)


def wait_log(read, text, timeout, what=None, count=1, alive=None, tail=4000):
    """`text` appears `count` times in what `read()` returns; returns that text."""
    out = {"s": ""}

    def ok():
        out["s"] = read()
        return out["s"] if out["s"].count(text) >= count else None
    return wait_until(ok, timeout, what or repr(text), diag=lambda: out["s"][-tail:], alive=alive)


def wait_equal(get, want, timeout, what):
    """`get()` reaches `want`, and return it. For what the daemon received against what a
    process that already exited sent: its last datagrams may still be queued in the daemon's
    socket when the process is reaped, so the totals are waited for, never read once. A value
    that overshoots never comes back, so a wrong total still fails, with both values shown."""
    last = {}

    def ok():
        last["v"] = get()
        return last["v"] == want
    wait_until(ok, timeout, what, diag=lambda: f"got  {last.get('v')!r}\nwant {want!r}")
    return last["v"]
