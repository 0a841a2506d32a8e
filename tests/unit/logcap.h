/* logcap: unit-test helper that captures the log stream (src/common/log.h) in a temp file so
 * tests can assert on the exact log lines a component wrote. Header-only; one capture per test
 * binary (open in the group setup, close in the group teardown). */
#ifndef MSMON_TESTS_LOGCAP_H
#define MSMON_TESTS_LOGCAP_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

static char logcap_path[] = "/tmp/msmon_logcap_XXXXXX";
static int logcap_fd = -1;

static inline int logcap_open(void)
{
    logcap_fd = mkstemp(logcap_path);
    if (logcap_fd < 0)
        return -1;
    log_set_stderr_fd(logcap_fd);
    return 0;
}

static inline void logcap_close(void)
{
    log_set_stderr_fd(-1);
    if (logcap_fd >= 0) {
        close(logcap_fd);
        unlink(logcap_path);
    }
    logcap_fd = -1;
}

/* Everything logged since the last logcap_clear (the first 64 KiB). */
static inline const char *logcap_text(void)
{
    static char buf[1 << 16];
    ssize_t n = logcap_fd >= 0 ? pread(logcap_fd, buf, sizeof(buf) - 1, 0) : -1;
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static inline int logcap_has(const char *text) { return strstr(logcap_text(), text) != NULL; }

static inline void logcap_clear(void)
{
    if (logcap_fd >= 0 && ftruncate(logcap_fd, 0) == 0)
        lseek(logcap_fd, 0, SEEK_SET);
}

/* cmocka group fixtures for a binary that captures for all its tests. */
static inline int logcap_group_setup(void **state)
{
    (void)state;
    return logcap_open();
}

static inline int logcap_group_teardown(void **state)
{
    (void)state;
    logcap_close();
    return 0;
}

#endif
