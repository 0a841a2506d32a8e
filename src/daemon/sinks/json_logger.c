/* json_logger: formats records as upstream dynolog's JSON logger does (local time with a
 * literal Z, floats as 3-decimal strings) and logs them through log.h. */
#include "daemon/sinks/json_logger.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/jw.h"
#include "common/log.h"

/* A record has at most this many keys (the kernel monitor's cap is ~3700 on a host with 256
 * interfaces and 256 disks) and one line at most LINE_MAX_BYTES; larger ones are refused with
 * a rate-limited error instead of being cut. */
#define MAX_KEYS 4096
#define LINE_MAX_BYTES (1024 * 1024)

static int by_key(const void *a, const void *b)
{
    const struct sink_kv *const *x = a, *const *y = b;
    return strcmp((*x)->key, (*y)->key);
}

long json_logger_format(const struct sink_record *rec, char *out, size_t cap)
{
    const struct sink_kv **order;
    size_t n = rec->n;
    long rc;
    if (n > MAX_KEYS)
        return -E2BIG;
    order = malloc((n ? n : 1) * sizeof(*order));
    if (!order)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        order[i] = &rec->kv[i];
    qsort(order, n, sizeof(*order), by_key);
    time_t secs = (time_t)(rec->time_ns / 1000000000ull);
    unsigned ms = (unsigned)((rec->time_ns / 1000000ull) % 1000);
    struct tm tm;
    localtime_r(&secs, &tm);
    int h = snprintf(out, cap, "time = %04d-%02d-%02dT%02d:%02d:%02d.%03uZ data = ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ms);
    if (h < 0 || (size_t)h >= cap) {
        rc = -ENOSPC;
        goto out_order;
    }
    struct jw w;
    jw_init(&w, out + h, cap - (size_t)h);
    jw_obj_begin(&w);
    for (size_t i = 0; i < n; i++) {
        const struct sink_kv *kv = order[i];
        char tmp[64];
        jw_key(&w, kv->key);
        switch (kv->type) {
        case SINK_INT: jw_int(&w, kv->i); break;
        case SINK_UINT: jw_uint(&w, kv->u); break;
        case SINK_DOUBLE:
            snprintf(tmp, sizeof(tmp), "%.3f", kv->d);
            jw_str(&w, tmp);
            break;
        case SINK_STR: jw_strn(&w, kv->s, kv->slen); break;
        }
    }
    jw_obj_end(&w);
    rc = w.err ? w.err : (long)((size_t)h + w.len);
out_order:
    free(order);
    return rc;
}

/* Room for the line: the time prefix plus, per key, the key, a value (strings escaped up to
 * 6 bytes per byte) and punctuation. */
static size_t line_size(const struct sink_record *rec)
{
    size_t sz = 128;
    for (size_t i = 0; i < rec->n; i++)
        sz += strlen(rec->kv[i].key) * 6 + 8 + (rec->kv[i].type == SINK_STR ? rec->kv[i].slen * 6 : 32);
    return sz < LINE_MAX_BYTES ? sz : LINE_MAX_BYTES;
}

static int jl_write(void *self, const struct sink_record *rec)
{
    static struct log_ratelimit rl;
    size_t cap = line_size(rec);
    char *line = malloc(cap);
    long n;
    (void)self;
    if (!line)
        return -ENOMEM;
    n = json_logger_format(rec, line, cap);
    if (n < 0) {
        LOG_RL(&rl, 60000, LOG_LVL_ERROR, "json logger: a record of %zu values was not logged: %s",
               rec->n, strerror((int)-n));
    } else {
        LOG_INFO("Logging : %zu values", rec->n);
        log_write_long(LOG_LVL_INFO, __FILE__, __LINE__, line, (size_t)n);
    }
    free(line);
    return n < 0 ? (int)n : 0;
}

static void jl_flush(void *self) { (void)self; }
static void jl_destroy(void *self) { (void)self; }

static const struct sink_ops jl_ops = { "json", jl_write, jl_flush, jl_destroy };

struct sink json_logger_sink(void)
{
    return (struct sink){ &jl_ops, NULL };
}
