/* json_logger: the --use_JSON sink (docs/design/outputs.md#json-logger, docs/design/outputs.md#json-logger). Per record
 * two INFO lines: "Logging : <n> values" and "time = <local>.<mmm>Z data = <json>". */
#ifndef MSMON_DAEMON_JSON_LOGGER_H
#define MSMON_DAEMON_JSON_LOGGER_H

#include <stddef.h>

#include "daemon/sinks/sink.h"

/* Format the second line ("time = ... data = {...}", keys sorted, doubles as "%.3f"
 * strings) into out. Returns its length or -ENOSPC. No I/O. */
long json_logger_format(const struct sink_record *rec, char *out, size_t cap);
/* The sink (stateless; self is unused). */
struct sink json_logger_sink(void);

#endif
