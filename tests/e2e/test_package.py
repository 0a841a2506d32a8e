"""Release packaging (00-overview.md §5, R34-R36): scripts/package.sh builds the .deb, .rpm and
wheel into a temp dir; the .deb is installed on this machine with the FAQ's command, run,
upgraded to a higher version and removed; the .rpm goes into a scratch root; the wheel into a
fresh venv. Installing needs root (CI is root); the machine is left as it was (purged at the end)."""
import fcntl
import glob
import os
import platform
import re
import shutil
import subprocess
import time

import pytest

from conftest import BUILD, SANITIZED, SOURCE, free_port

# The packages are built by package.sh in a tree of their own, so one run (the release tree's)
# covers them; under the sanitizer tree's LD_PRELOAD, dpkg, rpm and the compilers would run
# with ASan injected.
pytestmark = pytest.mark.skipif(SANITIZED, reason="packaging is tested from the release tree only")

ARCH = platform.machine()
VERSION = open(os.path.join(SOURCE, "VERSION")).readline().strip()
# A higher version for the upgrade: the last numeric field + 1.
_head, _last = re.match(r"^(.*?)(\d+)$", VERSION).groups()
VERSION2 = f"{_head}{int(_last) + 1}"
FILES = ["/usr/local/bin/dynolog", "/usr/local/bin/dyno", "/usr/lib/systemd/system/dynolog.service",
         "/etc/dynolog.gflags", "/etc/logrotate.d/dynolog.conf"]
CONFFILES = ["/etc/dynolog.gflags", "/etc/logrotate.d/dynolog.conf"]
GLIBC_SONAMES = re.compile(r"^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|"
                           r"ld-linux[-\w.]*\.so\.\d|ld-linux\.so\.\d)$")
MAINTAINER = "msmonitor developers"
# The FAQ's install command passes --ignore-depends. dpkg takes options only before the archive
# (`dpkg -i x.deb --ignore-depends=...` reads the option as a second archive) and the option
# needs a package list, so the working form is `dpkg -i --ignore-depends=<pkgs> x.deb`; ours
# declares no dependencies, so the list (upstream's protobuf) is a no-op. docs/packaging.md.
IGNORE = "--ignore-depends=libprotobuf-dev"


def sh(argv, check=True, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=kw.pop("timeout", 300), **kw)
    if check:
        assert r.returncode == 0, f"{argv}: rc={r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _outer_netns_pid():
    """The nearest ancestor in another network namespace (run_netns.sh's caller), or None."""
    try:
        mine = os.readlink("/proc/self/ns/net")
        pid = os.getppid()
        while pid > 1:
            if os.readlink(f"/proc/{pid}/ns/net") != mine:
                return pid
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        pass
    return None


@pytest.fixture(scope="module")
def pkgs(tmp_path_factory):
    out = tmp_path_factory.mktemp("pkg")
    out2 = tmp_path_factory.mktemp("pkg2")
    env = dict(os.environ, MSMON_WHEEL_BUILD_DIR=BUILD, JOBS=os.environ.get("JOBS", "2"))
    # The static cJSON comes from Debian's source archive (package.sh). ctest runs this file in
    # a private network namespace, so a first fetch steps back into the host's (root only).
    script = os.path.join(SOURCE, "scripts", "package.sh")
    prefix = []
    host_ns = _outer_netns_pid() if os.geteuid() == 0 and shutil.which("nsenter") else None
    if host_ns:
        prefix = ["nsenter", "-t", str(host_ns), "-n"]
    sh(prefix + ["bash", script, "--deps-only", str(out)], env=env, timeout=600)
    sh(["bash", script, str(out)], env=env, timeout=900)
    env2 = dict(env, MSMON_VERSION_OVERRIDE=VERSION2, MSMON_PKG_WHEELS="0", MSMON_PKG_RPM="0")
    sh(["bash", script, str(out2)], env=env2, timeout=900)
    return {"deb": out / f"dynolog_{VERSION}_{ARCH}.deb", "rpm": out / f"dynolog_{VERSION}_{ARCH}.rpm",
            "deb2": out2 / f"dynolog_{VERSION2}_{ARCH}.deb", "dir": out}


def test_artifact_names(pkgs):
    assert pkgs["deb"].exists() and pkgs["rpm"].exists() and pkgs["deb2"].exists()
    info = sh(["dpkg-deb", "-f", str(pkgs["deb"]), "Package", "Version", "Architecture", "Depends",
               "Pre-Depends"]).stdout
    deb_arch = {"x86_64": "amd64", "aarch64": "arm64"}[ARCH]
    assert f"Package: dynolog\nVersion: {VERSION}\nArchitecture: {deb_arch}\n" == info, info
    wheels = glob.glob(str(pkgs["dir"] / "mindstudio_monitor-*.whl"))
    assert wheels, os.listdir(pkgs["dir"])
    for w in wheels:
        assert re.match(rf"^mindstudio_monitor-[\d.]+-(cp\d+)-\1-linux_{ARCH}\.whl$", os.path.basename(w)), w


def test_binaries_need_only_glibc(pkgs, tmp_path):
    sh(["dpkg-deb", "-x", str(pkgs["deb"]), str(tmp_path)])
    for name in ("dynolog", "dyno"):
        dump = sh(["objdump", "-p", str(tmp_path / "usr/local/bin" / name)]).stdout
        needed = re.findall(r"^\s*NEEDED\s+(\S+)", dump, re.M)
        assert needed and all(GLIBC_SONAMES.match(n) for n in needed), (name, needed)
        # ldd agrees (it also resolves what NEEDED pulls in transitively)
        ldd = sh(["ldd", str(tmp_path / "usr/local/bin" / name)]).stdout
        for line in ldd.splitlines():
            lib = line.split()[0]
            assert lib.startswith(("linux-vdso", "/lib", "/lib64")) or GLIBC_SONAMES.match(lib), (name, line)


def test_rpm_contents_and_scratch_root(pkgs, tmp_path):
    files = sh(["rpm", "-qlp", str(pkgs["rpm"])]).stdout.split()
    assert sorted(files) == sorted(FILES)
    conf = sh(["rpm", "-qcp", str(pkgs["rpm"])]).stdout.split()
    assert sorted(conf) == sorted(CONFFILES)
    reqs = sh(["rpm", "-qp", "--requires", str(pkgs["rpm"])]).stdout.split("\n")
    assert all(r.startswith(("rpmlib(", "/bin/sh")) for r in reqs if r.strip()), reqs
    root = tmp_path / "root"
    root.mkdir()
    sh(["rpm", "--root", str(root), "--initdb"])
    r = sh(["rpm", "--root", str(root), "--nodeps", "-ivh", str(pkgs["rpm"])])
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:") and "scriptlet interpreter" not in ln]
    assert not errors, r.stderr
    for f in FILES:
        assert (root / f.lstrip("/")).is_file(), f
    assert os.access(root / "usr/local/bin/dynolog", os.X_OK)
    q = sh(["rpm", "--root", str(root), "-q", "dynolog"]).stdout.strip()
    assert q == f"dynolog-{VERSION}-1.{ARCH}"
    # the scratch root has no /bin/sh for the scriptlets
    sh(["rpm", "--root", str(root), "-e", "--nodeps", "--noscripts", "dynolog"])
    assert not (root / "usr/local/bin/dynolog").exists()


def test_unit_file():
    text = open(os.path.join(SOURCE, "packaging", "dynolog.service")).read()
    for line in ("ExecStart=/usr/local/bin/dynolog --flagfile=/etc/dynolog.gflags",
                 "StandardOutput=append:/var/log/dynolog.log", "StandardError=append:/var/log/dynolog.log",
                 "CPUQuota=100%", "MemoryMax=1G", "Restart=always"):
        assert line in text.splitlines(), line
    rot = open(os.path.join(SOURCE, "packaging", "dynolog.logrotate")).read().split()
    for word in ("daily", "7", "10M", "/var/log/dynolog.log"):
        assert word in rot


def _installed_version():
    r = sh(["dpkg-query", "-W", "-f=${Status} ${Version}", "dynolog"], check=False)
    return r.stdout if r.returncode == 0 else ""


@pytest.fixture
def dpkg_guard():
    """Root only; serialises with other runs and always purges what the test installed."""
    if os.geteuid() != 0:
        pytest.skip("installing the .deb needs root (CI runs as root)")
    lock = open("/tmp/msmonitor-package-test.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    r = sh(["dpkg-query", "-W", "-f=${Maintainer}|${Status}", "dynolog"], check=False)
    if r.returncode == 0 and "not-installed" not in r.stdout:
        if not r.stdout.startswith(MAINTAINER):
            pytest.skip("a dynolog package that is not ours is installed: " + r.stdout)
        sh(["dpkg", "-P", "dynolog"])   # left over by an interrupted run of this test
    try:
        yield
    finally:
        sh(["dpkg", "-P", "dynolog"], check=False)
        lock.close()


def _run_installed_daemon(tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    port = free_port()
    env = dict(os.environ, HOME=str(home), MSMONITOR_SOCKET_DIR=str(home))
    log = open(tmp_path / "dynolog.log", "wb")
    p = subprocess.Popen(["/usr/local/bin/dynolog", "--port", str(port), "--enable_ipc_monitor"], env=env,
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 10
    while b"Listening to connections on port" not in open(tmp_path / "dynolog.log", "rb").read():
        assert p.poll() is None and time.monotonic() < deadline, open(tmp_path / "dynolog.log").read()
        time.sleep(0.02)
    return p, port, env


def _check_running(tmp_path, version):
    r = sh(["/usr/local/bin/dynolog", "--version"])
    assert r.stdout.startswith(f"dynolog version {version}"), r.stdout
    assert sh(["/usr/local/bin/dyno", "--version"]).stdout.strip() == f"dyno {version}"
    p, port, env = _run_installed_daemon(tmp_path)
    try:
        r = sh(["/usr/local/bin/dyno", "--port", str(port), "version"], env=env, timeout=30)
        assert r.stdout.splitlines()[-1] == '{"version":"%s"}' % version, r.stdout
        assert os.path.exists(os.path.join(env["MSMONITOR_SOCKET_DIR"], "dynolog.sock"))
    finally:
        os.killpg(p.pid, 9)
        p.wait()


def test_deb_install_upgrade_remove(pkgs, dpkg_guard, tmp_path):
    # Install with the FAQ's command.
    sh(["dpkg", "-i", IGNORE, pkgs["deb"].name], cwd=str(pkgs["deb"].parent))
    assert _installed_version() == f"install ok installed {VERSION}"
    for f in FILES:
        assert os.path.isfile(f), f
    assert os.stat("/usr/local/bin/dynolog").st_mode & 0o777 == 0o755
    assert os.stat("/usr/lib/systemd/system/dynolog.service").st_mode & 0o777 == 0o644
    listed = sh(["dpkg", "-L", "dynolog"]).stdout.split()
    assert set(FILES) <= set(listed)
    conf = sh(["dpkg-query", "-W", "-f=${Conffiles}", "dynolog"]).stdout
    assert sorted(re.findall(r"^\s*(\S+)\s+[0-9a-f]{32}", conf, re.M)) == sorted(CONFFILES), conf
    _check_running(tmp_path, VERSION)

    # The unit verifies against the installed binary.
    if shutil.which("systemd-analyze"):
        r = sh(["systemd-analyze", "verify", "/usr/lib/systemd/system/dynolog.service"], check=False)
        assert r.returncode == 0, r.stdout + r.stderr
    else:
        pytest.fail("systemd-analyze missing (scripts/install-deps.sh installs systemd)")

    # Upgrade in place; a local edit of the conffile survives.
    with open("/etc/dynolog.gflags", "a") as f:
        f.write("# local edit\n")
    sh(["dpkg", "-i", IGNORE, pkgs["deb2"].name], cwd=str(pkgs["deb2"].parent))
    assert _installed_version() == f"install ok installed {VERSION2}"
    assert "# local edit" in open("/etc/dynolog.gflags").read()
    _check_running(tmp_path, VERSION2)

    # Remove (FAQ): everything goes except the conffiles.
    sh(["dpkg", "-r", "dynolog"])
    assert _installed_version().startswith("deinstall ok config-files")
    for f in FILES:
        assert os.path.exists(f) == (f in CONFFILES), f
    sh(["dpkg", "-P", "dynolog"])
    for f in CONFFILES:
        assert not os.path.exists(f), f


def test_wheel_in_fresh_venv(pkgs, tmp_path):
    wheels = glob.glob(str(pkgs["dir"] / "mindstudio_monitor-*.whl"))
    venv = tmp_path / "venv"
    r = sh(["/usr/bin/python3", "-m", "venv", str(venv)], check=False)
    if r.returncode != 0:
        pytest.fail("python3 -m venv failed (python3-venv from scripts/install-deps.sh): " + r.stdout + r.stderr)
    py = str(venv / "bin" / "python")
    tag = sh([py, "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"]).stdout.strip()
    mine = [w for w in wheels if f"-{tag}-{tag}-" in w]
    assert len(mine) == 1, wheels
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    sh([py, "-m", "pip", "install", "--no-index", mine[0]], env=env)
    # No Python dependencies (R36): nothing but our own distribution was installed.
    meta = sh([py, "-m", "pip", "show", "mindstudio_monitor"], env=env).stdout
    assert re.search(r"^Requires:\s*$", meta, re.M), meta
    smoke = ("import msmonitor, IPCMonitor\n"
             "from IPCMonitor import Monitor, PyDynamicMonitorProxy, ActivityKind\n"
             "m = Monitor()\n"
             "print(type(m).__name__, ActivityKind.Kernel.value, PyDynamicMonitorProxy.poll_dyno() == '')\n")
    r = sh([py, "-c", smoke], env=dict(env, MSMONITOR_SOCKET_DIR=str(tmp_path)), cwd=str(tmp_path))
    assert r.stdout.split() == ["Monitor", "2", "True"], r.stdout
    sh([py, "-m", "pip", "uninstall", "-y", "mindstudio_monitor"], env=env)
    assert sh([py, "-c", "import msmonitor"], check=False, cwd=str(tmp_path)).returncode != 0
