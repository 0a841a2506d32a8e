/* ack: the process's answer to one config from the daemon (docs/troubleshooting.md): a
 * ConfigAck `data` message naming the config's REQUEST_TRACE_ID, its outcome (applied,
 * partly, rejected, superseded), a one-line reason, the session state after it and this
 * process's rank. Every rank of a dyno-mode job answers the configs it applied from the
 * segment (docs/design/ipc.md#ranks). apply.c is its one caller. */
#ifndef MSMON_PLUGIN_ACK_H
#define MSMON_PLUGIN_ACK_H

#include <stddef.h>

#define ACK_ID_CAP 24       /* decimal uint64 + NUL */
#define ACK_REASON_CAP 240  /* below the daemon's 256-byte cap */

/* Send the answer for config id (no-op when id is "" — a config not from the daemon — or
 * when this process has no daemon connection). reason may be NULL; it is cut to
 * ACK_REASON_CAP at a UTF-8 boundary and control bytes become '?'. 0 or -errno. */
int ack_send(const char *id, const char *outcome, const char *reason, const char *state);

#endif
