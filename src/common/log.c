/* log: glog-format line writer with an optional file mirror and lock-free rate limiting.
 * Kept tiny on purpose: it runs inside training processes (plugin) as well as the daemon. */
#include "common/log.h"
#include "common/logesc.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic int g_level = LOG_LVL_INFO;
static _Atomic int g_file_fd = -1;
static _Atomic int g_file_stderr_min = LOG_LVL_ERROR;
static _Atomic int g_stderr_fd = 2;
static _Atomic int g_escape = 0;

void log_set_level(enum log_level min_level) { atomic_store(&g_level, (int)min_level); }
enum log_level log_get_level(void) { return (enum log_level)atomic_load(&g_level); }

int log_parse_level(const char *text, enum log_level *ret_level)
{
    static const struct { const char *name; enum log_level lvl; } names[] = {
        {"DEBUG", LOG_LVL_DEBUG}, {"INFO", LOG_LVL_INFO}, {"WARNING", LOG_LVL_WARNING},
        {"WARN", LOG_LVL_WARNING}, {"ERROR", LOG_LVL_ERROR},
    };
    if (!text)
        return -EINVAL;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcasecmp(text, names[i].name) == 0) {
            *ret_level = names[i].lvl;
            return 0;
        }
    }
    return -EINVAL;
}

void log_set_file(int fd, enum log_level stderr_min)
{
    atomic_store(&g_file_stderr_min, (int)stderr_min);
    int old = atomic_exchange(&g_file_fd, fd);
    if (old >= 0 && old != fd)
        close(old);
}

void log_close_file(void)
{
    int old = atomic_exchange(&g_file_fd, -1);
    if (old >= 0)
        close(old);
}

void log_set_stderr_fd(int fd) { atomic_store(&g_stderr_fd, fd < 0 ? 2 : fd); }
void log_set_escape(int on) { atomic_store(&g_escape, on ? 1 : 0); }

uint64_t clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t clock_real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}

static void emit(enum log_level lvl, const char *buf, size_t len)
{
    int ffd = atomic_load(&g_file_fd);
    if (ffd >= 0) {
        write_all(ffd, buf, len);
        if ((int)lvl >= atomic_load(&g_file_stderr_min))
            write_all(atomic_load(&g_stderr_fd), buf, len);
    } else {
        write_all(atomic_load(&g_stderr_fd), buf, len);
    }
}

/* The glog prefix of a line into buf; its length, or -1. */
static int prefix(enum log_level lvl, const char *file, int line, char *buf, size_t cap)
{
    static const char letters[] = "DIWEF";
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    /* glog has no debug letter; debug lines use 'I' so log parsers keep working. */
    char letter = lvl == LOG_LVL_DEBUG ? 'I' : letters[lvl];
    int n = snprintf(buf, cap, "%c%02d%02d %02d:%02d:%02d.%06ld %ld %s:%d] ", letter,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000, (long)syscall(SYS_gettid), base, line);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

void log_write_long(enum log_level lvl, const char *file, int line, const char *msg, size_t len)
{
    char head[512];
    if ((int)lvl < atomic_load(&g_level))
        return;
    if (atomic_load(&g_escape)) {
        log_write(lvl, file, line, "%.*s", (int)(len < 8000 ? len : 8000), msg); /* escaped there */
        return;
    }
    int n = prefix(lvl, file, line, head, sizeof(head));
    char *buf = n < 0 ? NULL : malloc((size_t)n + len + 1);
    if (!buf) {
        log_write(lvl, file, line, "%.*s", (int)(len < 8000 ? len : 8000), msg); /* cut, as any line */
        return;
    }
    memcpy(buf, head, (size_t)n);
    memcpy(buf + n, msg, len);
    buf[(size_t)n + len] = '\n';
    emit(lvl, buf, (size_t)n + len + 1);
    free(buf);
}

/* The calling thread's capture buffer (log_reason_begin), NULL when none. */
static _Thread_local char *cap_buf;
static _Thread_local size_t cap_len;

void log_reason_begin(char *buf, size_t cap)
{
    cap_buf = cap > 0 ? buf : NULL;
    cap_len = cap;
    if (cap_buf)
        cap_buf[0] = '\0';
}

void log_reason_end(void)
{
    cap_buf = NULL;
    cap_len = 0;
}

void log_vwrite(enum log_level lvl, const char *file, int line, const char *fmt, va_list ap)
{
    if (cap_buf && lvl >= LOG_LVL_ERROR && !cap_buf[0]) {
        va_list cp;
        va_copy(cp, ap);
        (void)vsnprintf(cap_buf, cap_len, fmt, cp);
        va_end(cp);
    }
    if ((int)lvl < atomic_load(&g_level))
        return;
    char buf[8192];
    int n = prefix(lvl, file, line, buf, sizeof(buf));
    if (n < 0)
        return;
    size_t len = (size_t)n;
    int m = vsnprintf(buf + len, sizeof(buf) - len - 1, fmt, ap);
    if (m < 0)
        return;
    len += (size_t)m;
    if (len > sizeof(buf) - 2)
        len = sizeof(buf) - 2; /* truncated; keep the newline */
    if (atomic_load(&g_escape)) {
        char esc[8192];
        logesc(buf + n, len - (size_t)n, esc, sizeof(esc) - (size_t)n - 1);
        len = (size_t)n + strlen(esc);
        memcpy(buf + n, esc, len - (size_t)n);
    }
    buf[len++] = '\n';
    emit(lvl, buf, len);
}

void log_write(enum log_level lvl, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(lvl, file, line, fmt, ap);
    va_end(ap);
}

int64_t log_ratelimit_take(struct log_ratelimit *rl, uint64_t interval_ms)
{
    uint64_t now = clock_mono_ns();
    uint64_t next = __atomic_load_n(&rl->next_ns, __ATOMIC_ACQUIRE);
    if (now < next) {
        __atomic_fetch_add(&rl->suppressed, 1, __ATOMIC_RELAXED);
        return -1;
    }
    if (!__atomic_compare_exchange_n(&rl->next_ns, &next, now + interval_ms * 1000000ull, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        __atomic_fetch_add(&rl->suppressed, 1, __ATOMIC_RELAXED);
        return -1;
    }
    return (int64_t)__atomic_exchange_n(&rl->suppressed, 0, __ATOMIC_ACQ_REL);
}

int64_t log_burst_take(struct log_burst *b, uint32_t per_sec, uint32_t burst)
{
    uint64_t now = clock_mono_ns();
    uint64_t step = 1000000000ull / (per_sec ? per_sec : 1);
    uint64_t slack = step * (burst ? burst - 1 : 0);
    uint64_t tat = __atomic_load_n(&b->tat_ns, __ATOMIC_ACQUIRE);
    for (;;) {
        if (tat > now + slack) {
            __atomic_fetch_add(&b->suppressed, 1, __ATOMIC_RELAXED);
            return -1;
        }
        uint64_t next = (tat > now ? tat : now) + step;
        if (__atomic_compare_exchange_n(&b->tat_ns, &tat, next, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            break;
    }
    return (int64_t)__atomic_exchange_n(&b->suppressed, 0, __ATOMIC_ACQ_REL);
}
