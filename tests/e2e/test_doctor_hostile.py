"""`dyno doctor` against names and environments another user chose (issue 23 item 5): the
`rm -f` fix it prints, pasted into a real shell, removes exactly the leftover and nothing else
(`$(touch x)`, `*`, a quote, a newline and ESC in the names); a newline cannot forge a check
line; raw escape bytes from /proc/<pid>/environ never reach the terminal; files of another
user are never named. Real dyno, a fake daemon (test_doctor's), real bash."""
import os
import subprocess

import pytest

from test_doctor import FAIL, INFO, OK, doctor, env, fake, good_replies, line, proc  # noqa: F401

HOSTILE = ["DynamicProfileNpuShm$(touch pwned)", "DynamicProfileNpuShm*",
           "DynamicProfileNpuShm'; touch pwned2; '", "DynamicProfileNpuShm\n\u2714 all good",
           "DynamicProfileNpuShm\x1b[2J\x1b]0;owned\x07", "DynamicProfileNpuShm `touch pwned3`"]


def fix_command(r):
    got = line(r, FAIL, "with no live owner")
    assert got.endswith(" (docs/troubleshooting.md#leftover-segments)"), got
    return got[got.index("fix: ") + len("fix: "):-len(" (docs/troubleshooting.md#leftover-segments)")]


def test_hostile_leftover_names_are_quoted_for_the_shell(env, fake, tmp_path):  # noqa: F811
    shm = env["MSMONITOR_SHM_DIR"]
    for n in HOSTILE:
        with open(os.path.join(shm, n), "wb") as f:
            f.write(b"\0" * 64)
    # files the pasted command must leave alone: the cwd's, and the other leftover-looking one
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "precious").write_text("keep")
    r = doctor(fake(good_replies()).port, env)
    out = r.stdout
    # nothing a terminal acts on, and the newline in a name did not start a line of its own
    assert "\x1b" not in out and "\x07" not in out, repr(out)
    assert not [ln for ln in out.splitlines() if ln.startswith("\u2714 all good")], out
    cmd = fix_command(r)
    assert cmd.startswith("rm -f -- ")
    subprocess.run(["bash", "-c", cmd], cwd=str(cwd), check=True, timeout=30)
    assert os.listdir(shm) == [], os.listdir(shm)           # every leftover, exactly
    assert sorted(os.listdir(cwd)) == ["precious"]           # no injected command ran, no glob
    r = doctor(fake(good_replies()).port, env)
    line(r, OK, "no leftover")


def test_other_users_leftovers_are_not_named(env, fake):  # noqa: F811
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another uid")
    shm = env["MSMONITOR_SHM_DIR"]
    mine = os.path.join(shm, "DynamicProfileNpuShm-mine")
    theirs = os.path.join(shm, "DynamicProfileNpuShm-theirs")
    for p in (mine, theirs):
        with open(p, "wb") as f:
            f.write(b"\0" * 64)
    os.chown(theirs, 65534, 65534)
    r = doctor(fake(good_replies()).port, env)
    got = line(r, FAIL, "1 leftover")
    assert mine in got and "theirs" not in got, got
    line(r, INFO, "1 dyno-mode file of other users in " + shm + " not named")


def test_private_segment_directory_is_checked(env, fake):  # noqa: F811
    shm = env["MSMONITOR_SHM_DIR"]
    priv = os.path.join(shm, f"msmonitor-{os.geteuid()}")
    os.mkdir(priv, 0o700)
    left = os.path.join(priv, "DynamicProfileNpuShm-0123456789abcdef")
    with open(left, "wb") as f:
        f.write(b"\0" * 64)
    r = doctor(fake(good_replies()).port, env)
    got = line(r, FAIL, f"1 leftover dyno-mode file in {priv} (")
    assert got.endswith(f"rm -f -- {left} (docs/troubleshooting.md#leftover-segments)"), got


def test_environ_escape_bytes_never_reach_the_terminal(env, fake):  # noqa: F811
    cenv = dict(env, MSMONITOR_USE_DAEMON="1\x1b[31m\x1b]0;x\x07\r\u2714 fine")
    child = subprocess.Popen(["sleep", "60"], env=cenv)
    try:
        r = doctor(fake(good_replies([proc(child.pid)])).port, env, "--pid", str(child.pid))
        assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\r" not in r.stdout, repr(r.stdout)
        got = line(r, FAIL, f"pid {child.pid} has MSMONITOR_USE_DAEMON=1\\x1b[31m")
        assert "\\r" in got and "(must be 1)" in got
    finally:
        child.kill()
        child.wait()
