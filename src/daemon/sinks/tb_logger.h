/* tb_logger: the --metric_log_dir sink (docs/design/outputs.md#tensorboard): TFRecord files of tensorflow.Event
 * protobufs, one per device under DIR/device_<device>/tfevents.pb, scalar summaries of each
 * kind's duration (and, with --tensorboard_op_stats, of each op's total/count/avg). */
#ifndef MSMON_DAEMON_TB_LOGGER_H
#define MSMON_DAEMON_TB_LOGGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/sinks/sink.h"

#define TB_MAX_FILES 256       /* devices (+ host metrics) with an open file */
#define TB_MAX_STEPS 16384     /* (device, tag) step counters; beyond: dropped, one WARNING */
#define TB_RECORD_MAX 4096     /* one framed event */

struct tb_cfg {
    const char *dir;      /* --metric_log_dir (copied) */
    bool op_stats;        /* --tensorboard_op_stats */
};

/* Creates the directory if missing (0750) and checks it is a writable directory; otherwise
 * -errno with "Unable to record logs in the target folder: <dir>: <reason>" in err. Logs
 * "Initialized tensorboard logger on = <dir>". *ret takes ownership of the logger. */
int tb_logger_create(const struct tb_cfg *cfg, struct sink *ret, char *err, size_t errcap);

/* Encoders (no I/O; tests use them). Each returns the byte count or -ENOSPC. */
/* Event{wall_time, file_version="brain.Event:2"} */
long tb_encode_version(uint8_t *out, size_t cap, double wall_time);
/* Event{wall_time, step, summary{value{tag, simple_value}}} */
long tb_encode_scalar(uint8_t *out, size_t cap, double wall_time, int64_t step, const char *tag,
                      float value);
/* TFRecord framing of data[0..n): len, masked_crc(len), data, masked_crc(data). */
long tb_frame(uint8_t *out, size_t cap, const uint8_t *data, size_t n);

/* Counters of a logger (self of its sink). */
struct tb_counters {
    uint64_t events;        /* scalar events written */
    uint64_t dropped;       /* records not written: write error, bad device name, caps */
};
void tb_logger_counters(const struct sink *s, struct tb_counters *ret);

#endif
