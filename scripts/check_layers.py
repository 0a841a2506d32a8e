#!/usr/bin/env python3
"""check_layers: the #include graph of src/ and python/ext against the layering of
docs/design/daemon.md#layout (the daemon's rooms, the CLI, TLS, IPC) and
docs/design/session.md#layers (the plugin's layers, the simulator, the Python extension).
Each area may include only the areas its rule names; no two files may reach each other
through includes (a circle); with --all, every C file of src/ and python/ext must belong to an
area that has a rule, so a new folder cannot go unchecked. One line per problem and exit 1;
exit 0 when clean.

Usage: check_layers.py --all REPO_ROOT     (every area: the ctest test_layers)
       check_layers.py SRC_DIR AREA...     (some areas and their sub-areas, e.g. plugin sim)
       check_layers.py --self-test         (the checker finds planted violations and circles)
"""
import os
import re
import sys
import tempfile

# Areas, most specific first: a path belongs to the first prefix it starts with. Paths are
# relative to src/ (as the project-root includes spell them), python/ext's as "python/ext/...".
AREAS = [
    "daemon/sinks/", "daemon/ipc/", "daemon/collectors/", "daemon/rpc/", "daemon/loop.",
    "daemon/", "cli/", "tls/", "ipc/", "common/", "contract/",
    "plugin/backend/", "plugin/pipeline/", "plugin/outputs/", "plugin/control/",
    "plugin/penv.", "plugin/plog.", "plugin/",
    "sim/", "python/ext/", "python/gen/",
]
# What each area may include besides itself and the public headers (include/msmon/). An entry
# ending in ".h" allows that one header, not its area.
RULES = {
    # the ground floor and the shared contract
    "common/": [],
    "contract/": ["common/"],
    "ipc/": ["common/"],
    "tls/": ["common/", "contract/"],
    "cli/": ["tls/", "ipc/", "contract/", "common/"],
    # the daemon's rooms (docs/design/daemon.md#layout)
    "daemon/loop.": [],
    "daemon/sinks/": ["daemon/loop.", "contract/", "common/"],
    "daemon/ipc/": ["daemon/sinks/sink.h", "daemon/loop.", "ipc/", "contract/", "common/"],
    "daemon/collectors/": ["daemon/sinks/sink.h", "daemon/loop.", "common/"],
    "daemon/rpc/": ["daemon/ipc/", "daemon/loop.", "tls/", "contract/", "common/"],
    "daemon/": ["daemon/sinks/", "daemon/ipc/", "daemon/collectors/", "daemon/rpc/", "daemon/loop.",
                "tls/", "ipc/", "contract/", "common/"],
    # the plugin's layers (docs/design/session.md#layers): penv (the environment table) and plog
    # (the log file) are its base; the backend delivers normalised records (the pipeline's
    # record.h); the pipeline defines what an output is (pipeline/output.h), so outputs use the
    # pipeline and the pipeline no output; control drives the session through the backend's
    # interface and the pipeline, never an output's file; the exported API (api.c) is the top.
    "plugin/penv.": ["common/"],
    "plugin/plog.": ["plugin/penv.", "common/"],
    "plugin/backend/": ["plugin/pipeline/record.h", "plugin/penv.", "contract/", "common/"],
    "plugin/pipeline/": ["plugin/penv.", "contract/", "common/"],
    "plugin/outputs/": ["plugin/pipeline/", "plugin/penv.", "contract/", "common/"],
    "plugin/control/": ["plugin/backend/backend.h", "plugin/pipeline/", "plugin/penv.", "plugin/plog.",
                        "ipc/", "contract/", "common/"],
    # proc_memory.h: the standalone results, read by the C API until the session answers for them
    "plugin/": ["plugin/control/", "plugin/outputs/proc_memory.h", "plugin/penv.", "plugin/plog.",
                "contract/", "common/"],
    # the simulated vendor runtimes stand for someone else's library: nothing of the plugin, and
    # of the contract only the kind names its dump prints and the `step <N>` marker its
    # workload writes as a training program would (docs/design/contract.md#names)
    "sim/": ["contract/kinds.h", "contract/names.h", "common/"],
    # the Python extension links libmsmonitor.so: its public API, never the plugin's internals
    "python/ext/": ["contract/", "common/"],
    "python/gen/": ["contract/", "common/"],
}
# Where the C files of each tree are, for --all: (directory under the repository root, the
# prefix its paths carry).
TREES = [("src", ""), ("python/ext", "python/ext/"), ("python/gen", "python/gen/")]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def area_of(rel):
    return next((a for a in AREAS if rel.startswith(a)), None)


def allowed(src_area, target):
    if area_of(target) == src_area:
        return True
    return any(target == e if e.endswith(".h") else area_of(target) == e for e in RULES[src_area])


def scan(root, trees):
    """Files of the trees: {rel path: [included rel paths of known areas]}. An include without
    a '/' names a file beside the includer (python/ext's own headers)."""
    files = {}
    for sub, prefix in trees:
        top = os.path.join(root, sub)
        for d, _, names in os.walk(top):
            for n in sorted(names):
                if not n.endswith((".c", ".h")):
                    continue
                path = os.path.join(d, n)
                rel = prefix + os.path.relpath(path, top)
                with open(path, encoding="utf-8", errors="replace") as f:
                    inc = INCLUDE.findall(f.read())
                here = os.path.dirname(rel)
                inc = [os.path.join(here, i) if "/" not in i and os.path.exists(os.path.join(d, i)) else i
                       for i in inc]
                files[rel] = [i for i in inc if area_of(i)]
    return files


def circles(files):
    """Strongly connected groups of more than one module (a.c and a.h are one module)."""
    mod = lambda p: os.path.splitext(p)[0]
    edges = {}
    for rel, incs in files.items():
        edges.setdefault(mod(rel), set()).update(mod(i) for i in incs if mod(i) != mod(rel))
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):  # Tarjan, recursive: include depths are small
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def check_files(files, every):
    problems = []
    for rel in sorted(files):
        a = area_of(rel)
        if a is None or a not in RULES:
            if every:
                problems.append(f"{rel}: no layer rule covers this file (add its area to scripts/check_layers.py)")
            continue
        for inc in files[rel]:
            if not allowed(a, inc):
                problems.append(f"{rel}: includes {inc}: {a.rstrip('/.')} may not use {area_of(inc).rstrip('/.')}")
    for group in circles(files):
        problems.append("include circle: " + " <-> ".join(group))
    return problems


def check(src, roots):
    """Some areas of src/ (the AREA... form)."""
    return check_files(scan(src, [(r, r.rstrip("/") + "/") for r in roots]), False)


def check_all(repo):
    """Every tree of TREES under the repository root."""
    return check_files(scan(repo, [t for t in TREES if os.path.isdir(os.path.join(repo, t[0]))]), True)


def self_test():
    with tempfile.TemporaryDirectory() as d:
        def put(rel, *incs):
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write("".join(f'#include "{i}"\n' for i in incs))
        # the daemon's rooms
        put("src/daemon/sinks/tb.c", "daemon/ipc/status.h")           # upward: sinks -> ipc
        put("src/daemon/ipc/status.h")
        put("src/daemon/ipc/a.c", "daemon/ipc/b.h", "daemon/sinks/sink.h")
        put("src/daemon/ipc/b.c", "daemon/ipc/a.h")                    # circle a <-> b
        put("src/daemon/ipc/a.h")
        put("src/daemon/ipc/b.h")
        put("src/daemon/sinks/sink.h")
        put("src/daemon/collectors/k.c", "daemon/sinks/json.h")        # only sink.h is allowed
        # the plugin: the pipeline calls an output's file, which includes the pipeline back
        put("src/plugin/pipeline/pipeline.c", "plugin/pipeline/output.h", "plugin/outputs/proc_x.h")
        put("src/plugin/pipeline/output.h", "plugin/pipeline/batch.h")
        put("src/plugin/pipeline/batch.h")
        put("src/plugin/outputs/proc_x.h", "plugin/pipeline/pipeline.h")
        put("src/plugin/outputs/proc_x.c", "plugin/pipeline/output.h", "plugin/penv.h")   # allowed
        put("src/plugin/penv.h")
        put("src/plugin/control/monitor.c", "plugin/pipeline/output.h", "plugin/outputs/outfile.h",
            "plugin/backend/backend_mspti.h", "plugin/backend/backend.h")
        put("src/plugin/outputs/outfile.h")
        put("src/plugin/backend/backend.h")
        put("src/plugin/backend/backend_mspti.h", "plugin/backend/backend.h", "plugin/pipeline/record.h")
        put("src/plugin/pipeline/record.h")
        put("src/plugin/backend/backend.c", "plugin/backend/backend_mspti.h")  # circle backend <-> mspti
        put("src/sim/sim_dump.c", "contract/kinds.h", "contract/cfgkeys.h")     # only kinds/names
        put("src/contract/kinds.h")
        put("src/contract/cfgkeys.h")
        put("python/ext/ext_a.c", "ext_a.h", "contract/kinds.h", "plugin/control/monitor.h")
        put("python/ext/ext_a.h", "ext_b.h")                             # beside: python/ext/ext_b.h
        put("python/ext/ext_b.h", "ext_a.h")                             # circle ext_a <-> ext_b
        put("src/plugin/control/monitor.h")
        put("src/newroom/x.c", "common/log.h")                          # an area without a rule
        put("src/common/log.h")
        p = check_all(d)
        part = check(os.path.join(d, "src"), ["daemon"])
    want = ["daemon/collectors/k.c: includes daemon/sinks/json.h",
            "daemon/sinks/tb.c: includes daemon/ipc/status.h",
            "include circle: daemon/ipc/a <-> daemon/ipc/b",
            "plugin/pipeline/pipeline.c: includes plugin/outputs/proc_x.h: plugin/pipeline may not use plugin/outputs",
            "include circle: plugin/outputs/proc_x <-> plugin/pipeline/pipeline",
            "plugin/control/monitor.c: includes plugin/outputs/outfile.h",
            "plugin/control/monitor.c: includes plugin/backend/backend_mspti.h",
            "include circle: plugin/backend/backend <-> plugin/backend/backend_mspti",
            "sim/sim_dump.c: includes contract/cfgkeys.h",
            "python/ext/ext_a.c: includes plugin/control/monitor.h",
            "include circle: python/ext/ext_a <-> python/ext/ext_b",
            "newroom/x.c: no layer rule"]
    want_part = ["daemon/collectors/k.c: includes daemon/sinks/json.h", "daemon/sinks/tb.c: includes daemon/ipc/status.h",
                 "include circle: daemon/ipc/a <-> daemon/ipc/b"]

    def matches(got, expect):
        return len(got) == len(expect) and all(any(line.startswith(w) for line in got) for w in expect)
    ok = matches(p, want) and matches(part, want_part)
    print("\n".join(p))
    print("self-test", "passed" if ok else "FAILED")
    return 0 if ok else 1


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) == 3 and argv[1] == "--all":
        problems, what = check_all(argv[2]), "every area of src/ and python/"
    elif len(argv) >= 3 and not argv[1].startswith("-"):
        problems, what = check(argv[1], argv[2:]), ", ".join(argv[2:])
    else:
        print("\n".join(__doc__.strip().splitlines()[-3:]), file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    print(f"layers: {len(problems)} problem(s) in {what}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
