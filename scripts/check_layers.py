#!/usr/bin/env python3
"""check_layers: the project-root-relative #include graph of src/ against the layering of
docs/design/daemon.md#layout. Each area may include only the areas its rule names; within the
checked areas no two files may reach each other through includes (a circle). One line per
violation and exit 1; exit 0 when clean.

Usage: check_layers.py SRC_DIR AREA...   (e.g. daemon cli tls ipc: an area and its sub-areas)
       check_layers.py --self-test       (the checker finds a planted violation and circle)
"""
import os
import re
import sys
import tempfile

# Areas, most specific first: a path belongs to the first prefix it starts with.
AREAS = [
    "daemon/sinks/", "daemon/ipc/", "daemon/collectors/", "daemon/rpc/", "daemon/loop.",
    "daemon/", "cli/", "tls/", "ipc/", "common/", "contract/", "plugin/", "sim/",
]
# What each area may include besides itself and the public headers (include/msmon/). An entry
# ending in ".h" allows that one header, not its area.
RULES = {
    "common/": [],
    "contract/": ["common/"],
    "ipc/": ["common/"],
    "tls/": ["common/", "contract/"],
    "cli/": ["tls/", "ipc/", "contract/", "common/"],
    "daemon/loop.": [],
    "daemon/sinks/": ["daemon/loop.", "contract/", "common/"],
    "daemon/ipc/": ["daemon/sinks/sink.h", "daemon/loop.", "ipc/", "contract/", "common/"],
    "daemon/collectors/": ["daemon/sinks/sink.h", "daemon/loop.", "common/"],
    "daemon/rpc/": ["daemon/ipc/", "daemon/loop.", "tls/", "contract/", "common/"],
    "daemon/": ["daemon/sinks/", "daemon/ipc/", "daemon/collectors/", "daemon/rpc/", "daemon/loop.",
                "tls/", "ipc/", "contract/", "common/"],
    "plugin/": ["ipc/", "contract/", "common/"],
    "sim/": ["common/"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def area_of(rel):
    return next((a for a in AREAS if rel.startswith(a)), None)


def allowed(src_area, target):
    if area_of(target) == src_area:
        return True
    return any(target == e if e.endswith(".h") else area_of(target) == e for e in RULES[src_area])


def scan(src, roots):
    """Files under the checked areas: {rel path: [included rel paths of known areas]}."""
    files = {}
    for root in roots:
        top = os.path.join(src, root)
        for d, _, names in os.walk(top):
            for n in names:
                if n.endswith((".c", ".h")):
                    path = os.path.join(d, n)
                    rel = os.path.relpath(path, src)
                    with open(path, encoding="utf-8", errors="replace") as f:
                        inc = INCLUDE.findall(f.read())
                    files[rel] = [i for i in inc if area_of(i)]
    return files


def circles(files):
    """Strongly connected groups of more than one module (a.c and a.h are one module)."""
    mod = lambda p: os.path.splitext(p)[0]
    edges = {}
    for rel, incs in files.items():
        edges.setdefault(mod(rel), set()).update(mod(i) for i in incs if mod(i) != mod(rel))
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):  # Tarjan, iterative enough for include depths
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


def check(src, roots):
    files = scan(src, roots)
    problems = []
    for rel in sorted(files):
        a = area_of(rel)
        for inc in files[rel]:
            if a and not allowed(a, inc):
                problems.append(f"{rel}: includes {inc}: {a.rstrip('/.')} may not use {area_of(inc).rstrip('/.')}")
    for group in circles(files):
        problems.append("include circle: " + " <-> ".join(group))
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as d:
        def put(rel, *incs):
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write("".join(f'#include "{i}"\n' for i in incs))
        put("daemon/sinks/tb.c", "daemon/ipc/status.h")           # upward: sinks -> ipc
        put("daemon/ipc/status.h")
        put("daemon/ipc/a.c", "daemon/ipc/b.h", "daemon/sinks/sink.h")
        put("daemon/ipc/b.c", "daemon/ipc/a.h")                    # circle a <-> b
        put("daemon/ipc/a.h")
        put("daemon/ipc/b.h")
        put("daemon/sinks/sink.h")
        put("daemon/collectors/k.c", "daemon/sinks/json.h")        # only sink.h is allowed
        p = check(d, ["daemon"])
    want = ["daemon/collectors/k.c: includes daemon/sinks/json.h", "daemon/sinks/tb.c: includes daemon/ipc/status.h",
            "include circle: daemon/ipc/a <-> daemon/ipc/b"]
    ok = len(p) == len(want) and all(any(line.startswith(w) for line in p) for w in want)
    print("\n".join(p))
    print("self-test", "passed" if ok else "FAILED")
    return 0 if ok else 1


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-2].strip(), file=sys.stderr)
        return 2
    problems = check(argv[1], argv[2:])
    for p in problems:
        print(p)
    print(f"layers: {len(problems)} problem(s) in {', '.join(argv[2:])}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
