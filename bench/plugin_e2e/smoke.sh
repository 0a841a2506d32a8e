#!/bin/sh
# smoke.sh PATTERN... -- COMMAND...: run COMMAND, show its output, and fail unless every
# extended-regex PATTERN matches a line of it (the benchmarks' own exit codes say little).
set -u
pats=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    pats="$pats
$1"
    shift
done
[ $# -gt 1 ] || { echo "usage: smoke.sh PATTERN... -- COMMAND..." >&2; exit 2; }
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] || { echo "smoke: command exited with $rc" >&2; exit 1; }
printf '%s\n' "$pats" | while IFS= read -r p; do
    [ -z "$p" ] && continue
    printf '%s\n' "$out" | grep -Eq -- "$p" || { echo "smoke: no line matches: $p" >&2; exit 1; }
done
