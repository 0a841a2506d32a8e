#!/usr/bin/env python3
"""Benchmark of `python -m msmonitor report` on a large run: a synthetic DB with the real schema
(docs/design/outputs.md#db-schema; default 5 M rows: kernels in TASK + COMPUTE_TASK_INFO, host APIs in CANN_API,
step markers, all-reduces), written fast with executemany. Prints the generation time, two
baselines over the same file (a plain count(*) of every table, and the kernel GROUP BY join the
report also runs), and the report's wall time (best and median of --runs).
Usage: bench_report.py [--rows N] [--runs R] [--keep DIR] [--pythonpath DIR]."""
import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time

KERNELS = [("MatMul", 120), ("MatMulBackward", 400), ("BatchMatMul", 90), ("LayerNorm", 40), ("Softmax", 30),
           ("Gelu", 30), ("Add", 10), ("LayerNormGrad", 50), ("AddN", 15), ("ApplyAdamW", 150)]
SCHEMA = {
    "TASK": "startNs, endNs, deviceId, connectionId, globalTaskId, globalPid, taskType, contextId, streamId, "
            "taskId, modelId",
    "COMPUTE_TASK_INFO": "name, globalTaskId, blockNum, mixBlockNum, taskType, opType, inputFormats, inputDataTypes, "
                         "inputShapes, outputFormats, outputDataTypes, outputShapes, attrInfo, opState, hf32Eligible",
    "CANN_API": "startNs, endNs, type, globalTid, connectionId, name",
    "MSTX_EVENTS": "startNs, endNs, eventType, rangeId, category, message, globalTid, endGlobalTid, domainId, "
                   "connectionId",
    "COMMUNICATION_OP": "opName, startNs, endNs, connectionId, groupName, opId, relay, retry, dataType, algType, "
                        "count NUMERIC, opType, deviceId",
    "SESSION_TIME_INFO": "startTimeNs, endTimeNs",
    "HOST_INFO": "hostUid TEXT, hostName TEXT",
    "META_DATA": "name TEXT, value TEXT",
}


def _cols(spec):
    return ", ".join(c if " " in c.strip() else c.strip() + " INTEGER" for c in spec.split(","))


def generate(path, rows, kernels_per_step=200):
    """rows ≈ 2 * kernels (TASK + COMPUTE_TASK_INFO) + APIs (half the kernels) + markers."""
    kernels = int(rows / 2.5)
    steps = max(kernels // kernels_per_step, 1)
    db = sqlite3.connect(path)
    db.execute("PRAGMA synchronous=OFF")
    db.execute("PRAGMA journal_mode=OFF")
    for t, spec in SCHEMA.items():
        db.execute(f"CREATE TABLE {t} ({_cols(spec)})")
    db.execute("CREATE TABLE STRING_IDS (id INTEGER, value TEXT)")
    strings = [k for k, _ in KERNELS] + ["KERNEL_AICORE", "N/A", "MsTx", "HcclAllReduce", "hccl_world_group",
                                         "RING", "aclnnLaunch", ""]
    sid = {v: i for i, v in enumerate(strings)}
    for n in range(1, steps + 1):
        sid[f"step {n}"] = len(sid)
    db.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", ((i, v) for v, i in sid.items()))
    t0 = 1_800_000_000_000_000_000
    step_ns = 20_000_000
    pid = 4242
    gtid = (pid << 32) | pid

    def tasks():
        for g in range(kernels):
            n, dur = KERNELS[g % len(KERNELS)]
            st = t0 + (g // kernels_per_step) * step_ns + (g % kernels_per_step) * 50_000
            yield (st, st + dur * 1000 + (g % 7) * 100, 0, g, g, pid, sid["KERNEL_AICORE"], 4294967295, g % 2,
                   4294967295, 4294967295)

    db.executemany("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)", tasks())
    na = sid["N/A"]
    db.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,4294967295,4294967295,?,?,?,?,?,?,?,?,?,?,?)",
                   ((sid[KERNELS[g % len(KERNELS)][0]], g, sid["KERNEL_AICORE"]) + (na,) * 10
                    for g in range(kernels)))
    db.executemany("INSERT INTO CANN_API VALUES (?,?,20000,?,?,?)",
                   ((t0 + (g // kernels_per_step) * step_ns + (g % kernels_per_step) * 50_000 - 5000,
                     t0 + (g // kernels_per_step) * step_ns + (g % kernels_per_step) * 50_000 - 2000,
                     gtid, g, sid["aclnnLaunch"]) for g in range(0, kernels, 2)))
    db.executemany("INSERT INTO MSTX_EVENTS VALUES (?,?,2,4294967295,4294967295,?,?,?,0,?)",
                   ((t0 + (n - 1) * step_ns, t0 + n * step_ns - 1000, sid[f"step {n}"], gtid, gtid, 4000000000 + n)
                    for n in range(1, steps + 1)))
    db.executemany("INSERT INTO TASK VALUES (?,?,0,?,?,?,?,4294967295,0,4294967295,4294967295)",
                   ((t0 + (n - 1) * step_ns + 1000, t0 + n * step_ns, 4000000000 + n, kernels + n, pid, sid["MsTx"])
                    for n in range(1, steps + 1)))
    db.executemany("INSERT INTO COMMUNICATION_OP VALUES (?,?,?,?,?,?,0,0,4,?,16777216,?,0)",
                   ((sid["HcclAllReduce"], t0 + n * step_ns - 3_000_000, t0 + n * step_ns - 1_000_000, n,
                     sid["hccl_world_group"], n, sid["RING"], sid["HcclAllReduce"]) for n in range(1, steps + 1)))
    db.execute("INSERT INTO SESSION_TIME_INFO VALUES (?, ?)", (t0, t0 + steps * step_ns))
    db.execute("INSERT INTO HOST_INFO VALUES ('1', 'benchhost')")
    db.execute("INSERT INTO META_DATA VALUES ('SCHEMA_VERSION', '1.2.0')")
    db.commit()
    total = sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in list(SCHEMA) + ["STRING_IDS"])
    db.close()
    return total, steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", help="write the DB and the report into this directory and keep them "
                                   "(a later run with the same --rows reuses the DB)")
    ap.add_argument("--pythonpath", help="directory holding the msmonitor package (default: the source tree)")
    args = ap.parse_args()
    sys.path.insert(0, args.pythonpath or os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    from msmonitor import report  # pylint: disable=import-outside-toplevel

    work = args.keep or tempfile.mkdtemp(prefix="mmbench")
    os.makedirs(work, exist_ok=True)
    db_path = os.path.join(work, "msmonitor_4242_20260101000000000_0.db")
    stamp = db_path + f".rows{args.rows}"
    if args.keep and os.path.exists(stamp) and os.path.exists(db_path):
        print(f"reusing {db_path} ({args.rows} rows requested)")
    else:
        for p in (db_path, stamp):
            if os.path.exists(p):
                os.unlink(p)
        t = time.monotonic()
        total, steps = generate(db_path, args.rows)
        gen = time.monotonic() - t
        open(stamp, "w").close()
        print(f"generated {total} rows ({steps} steps) in {gen:.2f} s, {os.path.getsize(db_path) / 2**20:.0f} MiB")

    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    t = time.monotonic()
    for tname in list(SCHEMA) + ["STRING_IDS"]:
        db.execute(f"SELECT count(*) FROM {tname}").fetchone()
    base_count = time.monotonic() - t
    t = time.monotonic()
    db.execute("SELECT c.name, COUNT(*), SUM(t.endNs - t.startNs) FROM TASK t JOIN COMPUTE_TASK_INFO c "
               "ON c.globalTaskId = t.globalTaskId GROUP BY c.name").fetchall()
    base_join = time.monotonic() - t
    db.close()
    times, cpus = [], []
    out = os.path.join(work, "report.html")
    for _ in range(max(args.runs, 1)):
        c, t = os.times(), time.monotonic()
        data = report.write(work, out)
        times.append(time.monotonic() - t)
        c2 = os.times()
        cpus.append(c2.user - c.user + c2.system - c.system)
    print(f"baseline count(*) of every table: {base_count:.3f} s")
    print(f"baseline kernel GROUP BY join:    {base_join:.3f} s")
    print(f"report ({len(times)} runs): best {min(times):.2f} s, median {statistics.median(times):.2f} s "
          f"(target < 10 s), CPU median {statistics.median(cpus):.2f} s; {os.path.getsize(out) / 1024:.0f} KiB HTML; "
          f"capped: {'; '.join(data['capped']) or '-'}")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
