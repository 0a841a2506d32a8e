/* names: the step marker codec and the record value name lookups over recnames.def. The
 * marker is written and parsed only here, so every reader applies the same range. */
#include "contract/names.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/strutil.h"
#include "msmon/ipc_wire.h"

const char *names_ipc_status(int32_t s)
{
    switch (s) {
    case IPC_STATUS_UNINITIALIZED: return "Uninitialized";
    case IPC_STATUS_IDLE: return "Idle";
    case IPC_STATUS_RUNNING: return "Running";
    case IPC_STATUS_READY: return "Ready";
    }
    return "unknown";
}

int names_export_file(char *buf, size_t cap, const char *dir, int pid, const char *stamp, unsigned ms, int32_t rank,
                      const char *ext)
{
    int w = snprintf(buf, cap, "%s/" NAMES_FILE_PREFIX "%d_%s%03u_%d.%s", dir, pid, stamp, ms % 1000u, (int)rank,
                     ext);

    return w >= 0 && (size_t)w < cap ? 0 : -ENAMETOOLONG;
}

int names_trace_file(char *buf, size_t cap, const char *dir, const char *who, int pid, int32_t rank, int32_t start,
                     int32_t stop, bool gz)
{
    int w = snprintf(buf, cap, "%s/" NAMES_FILE_PREFIX "%s_%d" NAMES_TRACE_RANK "%d" NAMES_TRACE_STEPS "%d-%d"
                     NAMES_TRACE_SUFFIX "%s", dir, who, pid, (int)(rank < 0 ? 0 : rank), (int)start, (int)stop,
                     gz ? NAMES_GZ_SUFFIX : "");

    return w >= 0 && (size_t)w < cap ? 0 : -ENAMETOOLONG;
}

int names_step_parse(const char *name, int64_t *ret_n)
{
    const size_t plen = sizeof(NAMES_STEP_PREFIX) - 1;
    uint64_t n;

    /* digits only: no sign, no spaces */
    if (!name || strncmp(name, NAMES_STEP_PREFIX, plen) != 0 || str_to_u64(name + plen, &n) != 0 ||
        n > NAMES_STEP_MAX)
        return -EINVAL;
    *ret_n = (int64_t)n;
    return 0;
}

/* Written by hand, not by snprintf: dyno mode names a marker at every training step. */
int names_step_format(char *buf, size_t cap, int64_t n)
{
    char digits[20];
    size_t k = 0, len = sizeof(NAMES_STEP_PREFIX) - 1;

    if (n < 0 || n > NAMES_STEP_MAX)
        return -EINVAL;
    do {
        digits[k++] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    if (len + k >= cap)
        return -ENOSPC;
    memcpy(buf, NAMES_STEP_PREFIX, len);
    while (k > 0)
        buf[len++] = digits[--k];
    buf[len] = '\0';
    return 0;
}

static const char *by_value(const char *const *tbl, size_t n, int32_t v, const char *other)
{
    return v >= 0 && (size_t)v < n && tbl[v] ? tbl[v] : other;
}

static const char *const dtype_names[] = {
#define DTYPE(value, name, bytes) [value] = #name,
#include "contract/recnames.def"
#undef DTYPE
};

static const char *const memcpy_kind_names[] = {
#define MEMCPY_KIND(value, name) [value] = #name,
#include "contract/recnames.def"
#undef MEMCPY_KIND
};

const char *names_dtype(int32_t dt)
{
    return by_value(dtype_names, sizeof(dtype_names) / sizeof(dtype_names[0]), dt, "INVALID_TYPE");
}

const char *names_memcpy_kind(int32_t k)
{
    return by_value(memcpy_kind_names, sizeof(memcpy_kind_names) / sizeof(memcpy_kind_names[0]), k, "UNKNOWN");
}
