#!/bin/sh
# Run one e2e file in a private network namespace (loopback up) when unshare allows it, so
# the abstract @dynolog socket and the loopback addresses are ours alone; else run it as is.
if [ "${MSMON_E2E_NETNS:-1}" = 1 ] && unshare -n true 2>/dev/null; then
  exec unshare -n sh -c 'ip link set lo up && exec "$@"' sh "$@"
fi
exec "$@"
