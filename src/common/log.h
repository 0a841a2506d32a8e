/* log: one glog-style line per event, shared by the daemon, the CLI and the plugin.
 * Line: "<L><MMDD> <HH:MM:SS.uuuuuu> <tid> <file>:<line>] <message>" written with one write(2),
 * so concurrent threads never interleave. Rate-limited variants keep repeating errors quiet. */
#ifndef MSMON_COMMON_LOG_H
#define MSMON_COMMON_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_LVL_DEBUG = 0, LOG_LVL_INFO = 1, LOG_LVL_WARNING = 2, LOG_LVL_ERROR = 3, LOG_LVL_FATAL = 4 };

/* Where lines go. Default: everything >= INFO to stderr, no file. */
void log_set_level(enum log_level min_level);
enum log_level log_get_level(void);
/* Parse "DEBUG|INFO|WARNING|ERROR" (case-insensitive); -EINVAL on anything else. */
int log_parse_level(const char *text, enum log_level *ret_level);
/* Mirror lines into fd (plugin log file). Lines >= stderr_min also go to stderr.
 * Takes ownership of fd (closed by log_close_file or the next call). */
void log_set_file(int fd, enum log_level stderr_min);
void log_close_file(void);
/* Redirect the stderr stream (tests); -1 restores fd 2. */
void log_set_stderr_fd(int fd);
/* Escape every message (common/logesc.h) before it is written: for processes whose log
 * lines carry values from peers they do not control (the plugin: remote config values),
 * so no value can forge a line or reach a terminal as control bytes. Default off. */
void log_set_escape(int on);

void log_write(enum log_level lvl, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void log_vwrite(enum log_level lvl, const char *file, int line, const char *fmt, va_list ap);

/* One line of any length (msg[0..len), no format): the daemon's JSON logger, whose records on
 * a big host exceed the 8 KiB cut of log_write. */
void log_write_long(enum log_level lvl, const char *file, int line, const char *msg, size_t len);

/* While a capture is active on the calling thread, the first ERROR message it logs (without
 * the prefix, cut to cap) is copied into buf as well: the plugin tells a rejected config's
 * reason back to dyno in the very words of the job log. buf[0] is cleared at begin. */
void log_reason_begin(char *buf, size_t cap);
void log_reason_end(void);

#define LOG_DEBUG(...) do { if (log_get_level() <= LOG_LVL_DEBUG) log_write(LOG_LVL_DEBUG, __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define LOG_INFO(...)  log_write(LOG_LVL_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define LOG_WARN(...)  log_write(LOG_LVL_WARNING, __FILE__, __LINE__, __VA_ARGS__)
#define LOG_ERROR(...) log_write(LOG_LVL_ERROR, __FILE__, __LINE__, __VA_ARGS__)

/* Rate limiter: at most one line per `interval_ms`; the next line that passes carries
 * " (suppressed N similar messages)". Zero-initialise (static storage is fine). Lock-free. */
struct log_ratelimit {
    uint64_t next_ns;       /* monotonic ns before which lines are suppressed */
    uint64_t suppressed;
};
/* Returns the number of suppressed lines to report (>= 0) if the caller may log now, -1 if not. */
int64_t log_ratelimit_take(struct log_ratelimit *rl, uint64_t interval_ms);

#define LOG_RL(rl, interval_ms, lvl, fmt, ...)                                              \
    do {                                                                                    \
        int64_t log_rl_n_ = log_ratelimit_take((rl), (interval_ms));                        \
        if (log_rl_n_ == 0)                                                                 \
            log_write((lvl), __FILE__, __LINE__, fmt, ##__VA_ARGS__);                       \
        else if (log_rl_n_ > 0)                                                             \
            log_write((lvl), __FILE__, __LINE__, fmt " (suppressed %lld similar messages)", \
                      ##__VA_ARGS__, (long long)log_rl_n_);                                 \
    } while (0)

/* Burst limiter for events an outsider can trigger at will but that a legitimate client also
 * causes now and then ("Received connection from ..."): up to `burst` lines at once, then
 * `per_sec` lines a second (GCRA: one 64-bit state, lock-free). The next line that passes after
 * suppression carries " (suppressed N similar messages)". Zero-initialise. */
struct log_burst {
    uint64_t tat_ns;        /* theoretical arrival time of the next line */
    uint64_t suppressed;
};
/* Returns the number of suppressed lines to report (>= 0) if the caller may log now, -1 if not.
 * per_sec and burst are >= 1. */
int64_t log_burst_take(struct log_burst *b, uint32_t per_sec, uint32_t burst);

#define LOG_BURST(b, per_sec, burst, lvl, fmt, ...)                                         \
    do {                                                                                    \
        int64_t log_b_n_ = log_burst_take((b), (per_sec), (burst));                         \
        if (log_b_n_ == 0)                                                                  \
            log_write((lvl), __FILE__, __LINE__, fmt, ##__VA_ARGS__);                       \
        else if (log_b_n_ > 0)                                                              \
            log_write((lvl), __FILE__, __LINE__, fmt " (suppressed %lld similar messages)", \
                      ##__VA_ARGS__, (long long)log_b_n_);                                  \
    } while (0)

/* Monotonic and realtime clocks in ns (used everywhere for deadlines and timestamps). */
uint64_t clock_mono_ns(void);
uint64_t clock_real_ns(void);

#endif
