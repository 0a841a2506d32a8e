"""Release packaging (docs/design/contract.md#packaging, R34-R36): scripts/package.sh builds the .deb, .rpm and
wheel into a temp dir; the .deb is installed with the FAQ's command into a private dpkg root
(`dpkg --root`: its own admin dir, files and chrooted maintainer scripts), run, upgraded to a
higher version and removed; the .rpm goes into a scratch root; the wheel into a fresh venv.
Nothing is installed on the machine itself: its package database and lock are never touched."""
import glob
import os
import platform
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, SANITIZED, SOURCE, free_port
from waits import wait_until

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


class PrivateRoot:
    """A private dpkg root: its own admin dir (status, lock) under DIR/var/lib/dpkg, files under
    DIR, maintainer scripts run chrooted into DIR with a copied /bin/sh. The host's package
    database, lock and files are never read or written, so a concurrent apt/dpkg on the
    machine cannot fail this test and this test cannot change the machine."""

    def __init__(self, path):
        self.root = path
        admin = path / "var" / "lib" / "dpkg"
        for d in ("info", "updates", "triggers"):
            (admin / d).mkdir(parents=True, exist_ok=True)
        (admin / "status").touch()
        # The maintainer scripts are /bin/sh scripts; a chroot needs the shell and its libraries.
        (path / "bin").mkdir(exist_ok=True)
        shell = os.path.realpath("/bin/sh")
        shutil.copy2(shell, path / "bin" / "sh")
        for lib in re.findall(r"(/\S+)\s+\(0x", sh(["ldd", shell]).stdout):
            dst = path / lib.lstrip("/")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.realpath(lib), dst)

    def p(self, f):
        """The private root's copy of an absolute package path."""
        return self.root / f.lstrip("/")

    def dpkg(self, *args, **kw):
        return sh(["dpkg", f"--root={self.root}"] + list(args), **kw)

    def query(self, *args, **kw):
        return sh(["dpkg-query", f"--root={self.root}"] + list(args), **kw)

    def installed_version(self):
        r = self.query("-W", "-f=${Status} ${Version}", "dynolog", check=False)
        return r.stdout if r.returncode == 0 else ""


@pytest.fixture
def proot(tmp_path):
    """Root only: dpkg chroots into the private root to run the maintainer scripts."""
    if os.geteuid() != 0:
        pytest.skip("installing the .deb into a private root needs root (chroot; CI runs as root)")
    return PrivateRoot(tmp_path / "root")


def _host_untouched():
    """What the host's package database says about dynolog (compared before and after)."""
    r = sh(["dpkg-query", "-W", "-f=${Status} ${Version}", "dynolog"], check=False)
    return (r.returncode, r.stdout, os.path.exists("/usr/local/bin/dynolog"))


def _run_installed_daemon(tmp_path, binary):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    port = free_port()
    env = dict(os.environ, HOME=str(home), MSMONITOR_SOCKET_DIR=str(home))
    log = open(tmp_path / "dynolog.log", "wb")
    p = subprocess.Popen([binary, "--port", str(port), "--enable_ipc_monitor"], env=env,
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: b"Listening to connections on port" in open(tmp_path / "dynolog.log", "rb").read(),
                   60, "the installed daemon to listen", diag=lambda: open(tmp_path / "dynolog.log").read(),
                   alive=p)
    except BaseException:
        os.killpg(p.pid, 9)
        p.wait()
        raise
    return p, port, env


def _check_running(root, tmp_path, version):
    # The binaries need only glibc (test_binaries_need_only_glibc), so they run from the root.
    dynolog, dyno = str(root.p("/usr/local/bin/dynolog")), str(root.p("/usr/local/bin/dyno"))
    r = sh([dynolog, "--version"])
    assert r.stdout.startswith(f"dynolog version {version}"), r.stdout
    assert sh([dyno, "--version"]).stdout.strip() == f"dyno {version}"
    p, port, env = _run_installed_daemon(tmp_path, dynolog)
    try:
        r = sh([dyno, "--port", str(port), "version"], env=env, timeout=30)
        assert r.stdout.splitlines()[-1] == '{"version":"%s"}' % version, r.stdout
        assert os.path.exists(os.path.join(env["MSMONITOR_SOCKET_DIR"], "dynolog.sock"))
    finally:
        os.killpg(p.pid, 9)
        p.wait()


def _verify_unit(root):
    """systemd-analyze verify inside the private root: the unit's ExecStart must resolve to the
    installed binary there. The root gets copies of the host's stock units (targets the unit
    pulls in); the host's own unit directory is only read."""
    if not shutil.which("systemd-analyze"):
        pytest.fail("systemd-analyze missing (scripts/install-deps.sh installs systemd)")
    units = root.p("/usr/lib/systemd/system")
    for f in glob.glob("/usr/lib/systemd/system/*"):
        dst = units / os.path.basename(f)
        if os.path.lexists(dst):
            continue
        if os.path.islink(f):
            os.symlink(os.readlink(f), dst)
        elif os.path.isdir(f):
            shutil.copytree(f, dst, symlinks=True)
        else:
            shutil.copy2(f, dst)
    unit = str(units / "dynolog.service")
    r = sh(["systemd-analyze", "verify", f"--root={root.root}", unit], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    return unit


def test_deb_install_upgrade_remove(pkgs, proot, tmp_path):
    host_before = _host_untouched()
    # Install with the FAQ's command (plus --root: the private root).
    proot.dpkg("-i", IGNORE, pkgs["deb"].name, cwd=str(pkgs["deb"].parent))
    assert proot.installed_version() == f"install ok installed {VERSION}"
    for f in FILES:
        assert proot.p(f).is_file(), f
    assert os.stat(proot.p("/usr/local/bin/dynolog")).st_mode & 0o777 == 0o755
    assert os.stat(proot.p("/usr/lib/systemd/system/dynolog.service")).st_mode & 0o777 == 0o644
    listed = proot.dpkg("-L", "dynolog").stdout.split()
    assert set(FILES) <= set(listed)
    conf = proot.query("-W", "-f=${Conffiles}", "dynolog").stdout
    assert sorted(re.findall(r"^\s*(\S+)\s+[0-9a-f]{32}", conf, re.M)) == sorted(CONFFILES), conf
    _check_running(proot, tmp_path, VERSION)

    # The unit verifies against the installed binary; it fails when that binary is missing.
    unit = _verify_unit(proot)
    exe = proot.p("/usr/local/bin/dynolog")
    os.rename(exe, str(exe) + ".away")
    try:
        r = sh(["systemd-analyze", "verify", f"--root={proot.root}", unit], check=False)
        assert r.returncode != 0 and "dynolog" in r.stdout + r.stderr, r.stdout + r.stderr
    finally:
        os.rename(str(exe) + ".away", exe)

    # Upgrade in place; a local edit of the conffile survives.
    with open(proot.p("/etc/dynolog.gflags"), "a") as f:
        f.write("# local edit\n")
    proot.dpkg("-i", IGNORE, pkgs["deb2"].name, cwd=str(pkgs["deb2"].parent))
    assert proot.installed_version() == f"install ok installed {VERSION2}"
    assert "# local edit" in open(proot.p("/etc/dynolog.gflags")).read()
    _check_running(proot, tmp_path, VERSION2)

    # Remove (FAQ): everything goes except the conffiles.
    proot.dpkg("-r", "dynolog")
    assert proot.installed_version().startswith("deinstall ok config-files")
    for f in FILES:
        assert proot.p(f).exists() == (f in CONFFILES), f
    proot.dpkg("-P", "dynolog")
    for f in CONFFILES:
        assert not proot.p(f).exists(), f
    assert _host_untouched() == host_before


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
