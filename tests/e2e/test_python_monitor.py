"""Standalone Monitor API (docs/design/session.md#standalone-monitor) against the simulator's ground truth
(MSSIM_DUMP), and Monitor.save's xlsx (docs/design/outputs.md#xlsx) re-read with openpyxl."""
import os
import stat

import pytest

from python_util import last_json, py_env, read_dump, require_packages, run_py

openpyxl = pytest.importorskip("openpyxl")

WORKLOAD = r"""
import ctypes, json, os, sys
from msmonitor import Monitor, ActivityKind as K
lib = ctypes.CDLL(os.environ["MSMONITOR_MSPTI_LIB"])
u64 = ctypes.c_uint64
lib.mssim_launch_kernel.restype = u64
lib.mssim_launch_kernel.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_char_p, u64]
lib.mssim_collective.restype = u64
lib.mssim_collective.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                 ctypes.c_int32, u64, u64, u64]
lib.mssim_api.restype = u64
lib.mssim_api.argtypes = [ctypes.c_char_p, ctypes.c_int, u64]
lib.mssim_mstx_range_start.restype = u64
lib.mssim_mstx_range_start.argtypes = [ctypes.c_char_p, ctypes.c_int32]
lib.mssim_mstx_range_end.argtypes = [u64]
mon = Monitor()
mon.start([K.Kernel, K.Communication, K.Marker, K.AclAPI])
for step in range(1, 4):
    rid = lib.mssim_mstx_range_start(f"step {step}".encode(), 0)
    lib.mssim_api(b"aclnnMatMul", 0, 3000)
    lib.mssim_launch_kernel(0, b"MatMul", b"KERNEL_AICORE", 120000)
    lib.mssim_launch_kernel(0, b"Softmax", b"KERNEL_AIVEC", 30000)
    lib.mssim_collective(1, b"HcclAllReduce", b"hccl_world_group", b"RING", 4, 1024, 4096, 2000000)
    lib.mssim_mstx_range_end(rid)
lib.mssim_synchronize(-1)
mon.stop()
res = mon.get_result()
out = {k.name: [r.to_tuple() for r in v] for k, v in res.items()}
out["order"] = [k.name for k in res]
out["raw"] = {"Kernel": [[r.startNs, r.endNs] for r in res[K.Kernel]]}
lib.mssim_dump_flush()
SAVE
print(json.dumps(out))
"""


@pytest.fixture(autouse=True)
def _built():
    require_packages()


def run_workload(tmp_path, save=""):
    dump = tmp_path / "truth.jsonl"
    r = run_py(WORKLOAD.replace("SAVE", save), env=py_env(MSSIM_DUMP=str(dump)), cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    return r, last_json(r.stdout), read_dump(dump)


def test_records_match_simulator_ground_truth(tmp_path):
    _, out, truth = run_workload(tmp_path)
    assert out["order"] == ["Kernel", "Communication", "Marker", "AclAPI"]
    want_k = sorted((d["name"], d["start"] / 1000.0, d["end"] / 1000.0, d["deviceId"], d["streamId"],
                     d["correlationId"], d["type"]) for d in truth if d["kind"] == "Kernel")
    assert len(want_k) == 6
    assert sorted(tuple(t) for t in out["Kernel"]) == want_k
    want_raw = sorted([d["start"], d["end"]] for d in truth if d["kind"] == "Kernel")
    assert sorted(out["raw"]["Kernel"]) == want_raw   # exact ns survive in the attributes

    want_c = sorted((d["name"], d["start"] / 1000.0, d["end"] / 1000.0, d["deviceId"], d["streamId"],
                     d["count"], "FP32", d["commName"], d["algType"], d["correlationId"])
                    for d in truth if d["kind"] == "Communication")
    assert len(want_c) == 3
    assert sorted(tuple(t) for t in out["Communication"]) == want_c

    want_a = sorted((d["name"], d["start"] / 1000.0, d["end"] / 1000.0, d["correlationId"])
                    for d in truth if d["kind"] == "AclAPI")
    assert len(want_a) == 3
    assert sorted((t[0], t[1], t[2], t[5]) for t in out["AclAPI"]) == want_a

    # Markers: each `step N` range appears as one host and one device record.
    names = sorted((t[0], t[1]) for t in out["Marker"])
    assert names == sorted([(f"step {i}", 0) for i in (1, 2, 3)] + [(f"step {i}", 1) for i in (1, 2, 3)])
    host = [t for t in out["Marker"] if t[1] == 0]
    assert all(t[6] == os.getpid() or t[6] > 0 for t in host)            # pid set on host records
    assert all(t[8] == 0 and t[9] == 0 for t in host)                     # no device on host records
    assert all(t[4] <= t[5] for t in out["Marker"])


def test_save_xlsx_sheets_headers_and_numbers(tmp_path):
    target = tmp_path / "new" / "deeper" / "capture"
    r, out, _ = run_workload(tmp_path, save=f"mon.save({str(target)!r})")
    path = str(target) + ".xlsx"
    assert f"[INFO] Start to save activity data file: {path}" in r.stdout
    assert f"[INFO] File saved successfully: {path}" in r.stdout
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(tmp_path / "new" / "deeper").st_mode) == 0o750
    wb = openpyxl.load_workbook(path)
    assert wb.sheetnames == ["Kernel", "Communication", "Marker", "AclAPI"]
    heads = {ws.title: [c.value for c in ws[1]] for ws in wb}
    assert heads["Kernel"] == ["Name", "Start(us)", "End(us)", "Device ID", "Stream ID", "Correlation ID",
                               "Type", "Duration(us)"]
    assert heads["Communication"] == ["Name", "Start(us)", "End(us)", "Device ID", "Stream ID", "Count",
                                      "DataType", "CommName", "AlgType", "Correlation ID", "Duration(us)"]
    assert heads["Marker"] == ["Name", "SourceKind", "Domain", "ID", "Start(us)", "End(us)", "Pid", "Tid",
                               "Device ID", "Stream ID", "Duration(us)"]
    assert heads["AclAPI"] == ["Name", "Start(us)", "End(us)", "Pid", "Tid", "Correlation ID", "Duration(us)"]
    rows = [[c.value for c in row] for row in wb["Kernel"].iter_rows(min_row=2)]
    assert len(rows) == len(out["Kernel"])
    by_corr = {t[5]: t for t in out["Kernel"]}
    durations = {(e - s) / 1000.0 for s, e in out["raw"]["Kernel"]}
    for row in rows:
        want = by_corr[row[5]]
        assert row[0] == want[0] and row[6] == want[6]
        assert all(isinstance(v, (int, float)) for v in row[1:6] + row[7:])   # numeric cells
        # xlsx numbers carry 15 significant digits: compare the µs times to within 1 µs.
        assert abs(row[1] - want[1]) < 1 and abs(row[2] - want[2]) < 1
        assert row[3:6] == list(want[3:6])
        assert row[7] in durations   # computed from the exact ns, not the rounded µs
        assert abs(row[7] - (want[2] - want[1])) < 0.5
    comm = [[c.value for c in row] for row in wb["Communication"].iter_rows(min_row=2)]
    assert {(r[0], r[5], r[6], r[7], r[8]) for r in comm} == {("HcclAllReduce", 1024, "FP32", "hccl_world_group",
                                                               "RING")}


def test_save_messages_and_refusals(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link_dir = tmp_path / "linkdir"
    link_dir.symlink_to(real)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "link.xlsx").symlink_to(victim)
    existing = tmp_path / "exists.xlsx"
    existing.write_text("old")
    save = "\n".join([
        "mon.save('')",
        "mon.save(None)",
        f"mon.save({str(link_dir / 'x.xlsx')!r})",
        f"mon.save({str(tmp_path / 'link.xlsx')!r})",
        f"mon.save({str(existing)!r})",
    ])
    r, _, _ = run_workload(tmp_path, save=save)
    assert r.stdout.count("[ERROR] Invalid file path") == 2
    assert f"[ERROR] Failed to save file: {link_dir / 'x.xlsx'}, error: parent directory is a symlink" in r.stdout
    assert f"[ERROR] Failed to save file: {tmp_path / 'link.xlsx'}, error: refusing to write through a symlink" \
        in r.stdout
    assert victim.read_text() == "keep"
    assert not (real / "x.xlsx").exists()
    assert f"[WARNING] File already exists: {existing}, will be overwritten" in r.stdout
    assert openpyxl.load_workbook(existing).sheetnames[0] == "Kernel"
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]   # no temp file left behind


def test_no_data_and_lifecycle_warnings(tmp_path):
    r = run_py("""
from msmonitor import Monitor, ActivityKind as K
m = Monitor()
print(m.get_result())
m.save("nodata.xlsx")
m.start(K.Kernel)
m.start([K.Kernel, "API"])
m.stop()
print("done")""", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "[WARNING] No valid activity kind" in r.stdout
    assert "{}" in r.stdout
    assert "[WARNING] No valid activity data" in r.stdout
    assert r.stdout.count("[ERROR] Invalid activity kind list") == 2
    assert not (tmp_path / "nodata.xlsx").exists()
    logs = "".join(p.read_text() for p in (tmp_path / "msmonitor_log").glob("*.log"))
    assert "MsptiMonitor not started" in logs
