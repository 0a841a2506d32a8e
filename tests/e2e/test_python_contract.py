"""The contract as Python (docs/design/contract.md#python): msmonitor/_contract.py is generated
at build time from src/contract/ by python/gen/gen_contract.c, packaged in both packages, and
agrees with what the C side does (the extension's ActivityKind, the step-marker rule)."""
import os
import subprocess

import pytest

from conftest import BUILD, SOURCE
from python_util import PKG, last_json, require_packages, run_py


@pytest.fixture(autouse=True)
def _built():
    require_packages()


def test_generated_not_hand_written():
    gen = os.path.join(BUILD, "python", "msmon_gen_contract")
    r = subprocess.run([gen], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Do not edit" in r.stdout
    for pkg in ("msmonitor", "IPCMonitor"):
        with open(os.path.join(PKG, pkg, "_contract.py")) as f:
            assert f.read() == r.stdout, pkg
    # no copy in the source tree that could drift from the tables
    assert not os.path.exists(os.path.join(SOURCE, "python", "msmonitor", "_contract.py"))


def test_matches_the_extension():
    r = run_py("""
import json
from msmonitor import ActivityKind, _contract as c
from msmonitor.monitor import _mon, _GETTERS
print(json.dumps({
    "enum": [[k.name, k.value] for k in ActivityKind],
    "standalone": [[n, c.KIND_VALUES[n]] for n, _ in c.STANDALONE_KINDS],
    "getters": all(callable(getattr(_mon, g, None)) for g in _GETTERS.values()),
    "ngetters": len(_GETTERS),
    "names": [c.KIND_NAMES[v] for _, v in c.KINDS],
}))""")
    assert r.returncode == 0, r.stderr
    got = last_json(r.stdout)
    assert got["enum"] == got["standalone"]
    assert got["getters"] and got["ngetters"] == 7
    assert got["names"] == ["Marker", "Kernel", "API", "Hccl", "Memory", "MemSet", "MemCpy", "Communication",
                            "AclAPI", "NodeAPI", "RuntimeAPI"]


def test_step_rule_and_names():
    r = run_py("""
import json
from msmonitor import _contract as c, dynamic_profile as d
cases = ["step 0", "step 42", "step 2147483647", "step 2147483648", "step -1", "step +1", "step x",
         "stepper 1", "step ", "step  1", "step 1 ", "Step 1", "step \\u0661", None, 7]
print(json.dumps({
    "steps": [c.step_of(x) for x in cases],
    "shm": [d.SHM_PREFIX, d.SHM_SIZE],
    "socks": [c.SOCK_CTL, c.SOCK_DATA, c.SOCK_RPC],
    "offset": c.DB_MARKER_CONN_OFFSET,
    "dtype": [c.DTYPE_NAMES.get(4), c.DTYPE_NAMES.get(13, c.DTYPE_INVALID)],
    "memcpy": c.MEMCPY_KIND_NAMES.get(2),
    "stats": [k for k, _ in c.STATS_COUNTERS],
}))""")
    assert r.returncode == 0, r.stderr
    got = last_json(r.stdout)
    assert got["steps"] == [0, 42, 2147483647] + [None] * 12
    assert got["shm"] == ["DynamicProfileNpuShm", 1 << 20]
    assert got["socks"] == ["dynolog.sock", "dynolog_data.sock", "dyno.sock"]
    assert got["offset"] == 4000000000
    assert got["dtype"] == ["FP32", "INVALID_TYPE"]
    assert got["memcpy"] == "HTOD"
    assert len(got["stats"]) == 11 and got["stats"][0] == "consumed" and "bytes_written" in got["stats"]
