"""The report page in a real browser: Debian's headless chromium opens the HTML written from a
simulator DB run (file://, no network), the page's own self-check must have passed in the dumped
DOM (every SVG laid out with a non-zero size, the data blob parsed), and a screenshot is kept as
an artifact in $MSMON_BUILD_DIR/artifacts/report.png. A tampered page must fail the self-check."""
import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib

import pytest

from conftest import BUILD
from test_report import _report, _run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium(*args):
    profile = tempfile.mkdtemp(prefix="mmchrome")
    # The sanitizer tree preloads the ASan runtime into every process; chromium is not ours and
    # does not start under it.
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    try:
        r = subprocess.run([CHROMIUM] + FLAGS + [f"--user-data-dir={profile}"] + list(args),
                           capture_output=True, text=True, timeout=120, env=env)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return r


def _dump_dom(path):
    r = _chromium("--virtual-time-budget=5000", "--dump-dom", "file://" + path)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def _png_pixels(path):
    """(width, height, distinct byte values in the raw scanlines) of an 8-bit PNG."""
    with open(path, "rb") as f:
        blob = f.read()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(blob):
        n, typ = struct.unpack(">I4s", blob[pos:pos + 8])
        body = blob[pos + 8:pos + 8 + n]
        if typ == b"IHDR":
            w, h = struct.unpack(">II", body[:8])
        elif typ == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    return w, h, len(set(raw[:4 * 1024 * 1024]))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/install-deps.sh installs it)")
def test_report_renders_in_chromium(daemon):
    tmp = tempfile.mkdtemp(prefix="mmrepb")
    out = _run(daemon, "DB", tmp)
    _, data = _report(out)
    page = os.path.join(out, "report.html")
    assert data["svg_count"] >= 5

    dom = _dump_dom(page)
    m = re.search(r'<html[^>]*data-selfcheck="([^"]*)"', dom)
    assert m, dom[:2000]
    assert m.group(1) == "ok", m.group(1)
    assert "<title>[ok] msmonitor report" in dom

    art = os.path.join(BUILD, "artifacts")
    os.makedirs(art, exist_ok=True)
    shot = os.path.join(art, "report.png")
    if os.path.exists(shot):
        os.unlink(shot)
    r = _chromium("--virtual-time-budget=5000", "--window-size=1280,3200", f"--screenshot={shot}", "file://" + page)
    assert r.returncode == 0 and os.path.exists(shot), r.stderr[-2000:]
    w, h, distinct = _png_pixels(shot)
    assert (w, h) == (1280, 3200)
    assert os.path.getsize(shot) > 20000 and distinct > 64, (os.path.getsize(shot), distinct)
    shutil.copy(page, os.path.join(art, "report.html"))

    # The check is not vacuous: an SVG that lays out with no size makes it fail.
    with open(page, encoding="utf-8") as f:
        text = f.read()
    bad = os.path.join(tmp, "tampered.html")
    with open(bad, "w", encoding="utf-8") as f:
        f.write(text.replace("<h2>", '<svg width="0" height="0"></svg><h2>', 1))
    m = re.search(r'<html[^>]*data-selfcheck="([^"]*)"', _dump_dom(bad))
    assert m and m.group(1).startswith("fail"), m and m.group(1)
