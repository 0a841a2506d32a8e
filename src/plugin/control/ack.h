/* ack: the process's answer to one config from the daemon (docs/troubleshooting.md): a
 * ConfigAck `data` message naming the config's REQUEST_TRACE_ID, its outcome (applied,
 * rejected, superseded), a one-line reason and the session state after it. */
#ifndef MSMON_PLUGIN_ACK_H
#define MSMON_PLUGIN_ACK_H

#include <stddef.h>

#define ACK_ID_CAP 24       /* decimal uint64 + NUL */
#define ACK_REASON_CAP 240  /* below the daemon's 256-byte cap */

/* Send the answer for config id (no-op when id is "" — a config not from the daemon — or
 * when this process has no daemon connection). reason may be NULL; it is cut to
 * ACK_REASON_CAP at a UTF-8 boundary and control bytes become '?'. 0 or -errno. */
int ack_send(const char *id, const char *outcome, const char *reason, const char *state);

/* The REQUEST_TRACE_ID value among n key/value pairs into id (ACK_ID_CAP): "" when absent or
 * not a decimal id. */
void ack_find_id(const char *const *keys, const char *const *values, size_t n, char *id);

#endif
