"""Helpers of the nputrace end-to-end tests: load a trace file (exact timestamps), the schema
check of docs/nputrace.md (ph/ts/dur/pid/tid, ac2g flows paired), and the comparison key of a
trace event and of a simulator ground-truth record."""
import decimal
import glob
import gzip
import json
import os
import re


def trace_files(d, pid=None):
    pat = f"msmonitor_trace_{pid if pid is not None else '*'}_rank*_step*.json*"
    return sorted(f for f in glob.glob(os.path.join(str(d), pat)) if re.search(r"_step\d+-\d+\.json(\.gz)?$", f))


def load_trace(path):
    """The trace with ts/dur as Decimal, so base + ts*1000 gives back the exact ns."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f, parse_float=decimal.Decimal)


def ns(trace, ts):
    return trace["baseTimeNanoseconds"] + int(decimal.Decimal(ts) * 1000)


def check_schema(trace):
    """Assert the structure HTA/Perfetto rely on; returns the X events."""
    assert list(trace)[:5] == ["schemaVersion", "distributedInfo", "deviceProperties", "baseTimeNanoseconds",
                               "msmonitor"], list(trace)
    assert isinstance(trace["traceEvents"], list)
    di = trace["distributedInfo"]
    assert isinstance(di["rank"], int) and isinstance(di["world_size"], int) and di["world_size"] >= 1
    flows_s, flows_f, xs = {}, {}, []
    for e in trace["traceEvents"]:
        assert e["ph"] in ("X", "i", "s", "f", "M"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        assert isinstance(e["ts"], (int, decimal.Decimal)), e
        if e["ph"] == "X":
            assert e["dur"] >= 0 and "kind" in e["args"], e
            xs.append(e)
        elif e["ph"] == "s":
            assert e["cat"] == "ac2g"
            flows_s.setdefault(e["id"], []).append(e)
        elif e["ph"] == "f":
            assert e["cat"] == "ac2g" and e["bp"] == "e"
            flows_f.setdefault(e["id"], []).append(e)
        elif e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index")
    assert sorted(flows_s) == sorted(flows_f), "unpaired ac2g flows"
    for k in flows_s:
        assert len(flows_s[k]) == len(flows_f[k])
    return xs


def event_keys(trace):
    """(kind, name, start ns, end ns) of every X event but markers."""
    out = []
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and e["args"]["kind"] != "Marker":
            s = ns(trace, e["ts"])
            out.append((e["args"]["kind"], e["name"], s, s + int(decimal.Decimal(e["dur"]) * 1000)))
    return sorted(out)


def truth_keys(dump, kinds_named=None):
    """The same keys from MSSIM_DUMP lines (markers and external correlation left out)."""
    out = []
    for d in dump:
        k = d["kind"]
        if k in ("Marker", "ExternalCorrelation"):
            continue
        name = d.get("name", "")
        if k == "MemCpy":
            name = "Memcpy " + {0: "UNKNOWN", 1: "HTOH", 2: "HTOD", 3: "DTOH", 4: "DTOD", 5: "DEFAULT"}.get(
                d.get("copyKind"), "UNKNOWN")
        elif k == "MemSet":
            name = "Memset"
        elif k == "Memory":
            name = f"Memory op {d.get('memoryOperationType', 0)}"
        out.append((k, name, d["start"], d["end"]))
    return sorted(out)


def in_window(trace, keys):
    """Ground-truth keys of records that started before the window closed (the simulator
    still dumps records of the next step until the session thread has unsubscribed)."""
    end = trace["msmonitor"]["windowEndNanoseconds"] or float("inf")
    return sorted(k for k in keys if k[2] < end)


def step_ranges(trace):
    """Names of the host `step <N>` ranges in the trace."""
    return sorted(e["name"] for e in trace["traceEvents"]
                  if e["ph"] == "X" and e["cat"] == "user_annotation" and e["name"].startswith("step "))
