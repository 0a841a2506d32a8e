/* json_logger: formats records as upstream dynolog's JSON logger does (local time with a
 * literal Z, floats as 3-decimal strings) and logs them through log.h. */
#include "daemon/json_logger.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/jw.h"
#include "common/log.h"

#define MAX_KEYS 256
#define LINE_MAX_BYTES 16384

long json_logger_format(const struct sink_record *rec, char *out, size_t cap)
{
    const struct sink_kv *order[MAX_KEYS];
    size_t n = rec->n < MAX_KEYS ? rec->n : MAX_KEYS;
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        while (j > 0 && strcmp(order[j - 1]->key, rec->kv[i].key) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = &rec->kv[i];
    }
    time_t secs = (time_t)(rec->time_ns / 1000000000ull);
    unsigned ms = (unsigned)((rec->time_ns / 1000000ull) % 1000);
    struct tm tm;
    localtime_r(&secs, &tm);
    int h = snprintf(out, cap, "time = %04d-%02d-%02dT%02d:%02d:%02d.%03uZ data = ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ms);
    if (h < 0 || (size_t)h >= cap)
        return -ENOSPC;
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
    if (w.err)
        return w.err;
    return (long)((size_t)h + w.len);
}

static int jl_write(void *self, const struct sink_record *rec)
{
    char line[LINE_MAX_BYTES];
    (void)self;
    long n = json_logger_format(rec, line, sizeof(line));
    if (n < 0)
        return (int)n;
    LOG_INFO("Logging : %zu values", rec->n);
    LOG_INFO("%s", line);
    return 0;
}

static void jl_flush(void *self) { (void)self; }
static void jl_destroy(void *self) { (void)self; }

static const struct sink_ops jl_ops = { "json", jl_write, jl_flush, jl_destroy };

struct sink json_logger_sink(void)
{
    return (struct sink){ &jl_ops, NULL };
}
