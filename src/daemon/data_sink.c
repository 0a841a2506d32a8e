/* data_sink: validates each metric datagram, logs it compactly and turns it into sink
 * records: one per upstream sum/marker line, one per op entry of an OpStats message. */
#include "daemon/data_sink.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/jw.h"
#include "common/log.h"
#include "daemon/djson.h"

#define DATA_MAX_DEPTH 10

void data_router_init(struct data_router *dr) { memset(dr, 0, sizeof(*dr)); }

int data_router_add(struct data_router *dr, struct sink s)
{
    if (dr->nsinks >= DATA_MAX_SINKS)
        return -ENOSPC;
    dr->sinks[dr->nsinks++] = s;
    return 0;
}

void data_router_fini(struct data_router *dr)
{
    for (size_t i = 0; i < dr->nsinks; i++) {
        if (dr->sinks[i].ops->flush)
            dr->sinks[i].ops->flush(dr->sinks[i].self);
        if (dr->sinks[i].ops->destroy)
            dr->sinks[i].ops->destroy(dr->sinks[i].self);
    }
    dr->nsinks = 0;
}

const char *data_norm_device(const char *text)
{
    if (strcmp(text, "-1") == 0 || strcmp(text, "4294967295") == 0 ||
        strcmp(text, "18446744073709551615") == 0 || strcmp(text, "host") == 0)
        return "host";
    return text;
}

static bool nonneg_int(const struct dj *v)
{
    return v && ((v->type == DJ_INT && v->v.i >= 0) || v->type == DJ_UINT);
}

static void set_num(struct sink_kv *kv, const char *key, const struct dj *v)
{
    kv->key = key;
    if (v->type == DJ_UINT) {
        kv->type = SINK_UINT;
        kv->u = v->v.u;
    } else if (v->type == DJ_DOUBLE) {
        kv->type = SINK_DOUBLE;
        kv->d = v->v.d;
    } else {
        kv->type = SINK_INT;
        kv->i = v->type == DJ_BOOL ? v->v.b : v->v.i;
    }
}

static bool is_num(const struct dj *v)
{
    return v && (v->type == DJ_INT || v->type == DJ_UINT || v->type == DJ_DOUBLE);
}

static void set_str(struct sink_kv *kv, const char *key, const char *s, size_t n)
{
    kv->key = key;
    kv->type = SINK_STR;
    kv->s = s;
    kv->slen = n;
}

static int emit(struct data_router *dr, const struct sink_record *rec)
{
    for (size_t i = 0; i < dr->nsinks; i++)
        dr->sinks[i].ops->write(dr->sinks[i].self, rec);
    return 1;
}

/* OpStats: one record per entry of "ops" (05 §2.2), keys in sorted order. */
static int emit_opstats(struct data_router *dr, const struct dj *msg, const char *dev,
                        uint64_t now_ns)
{
    const struct dj *ops = dj_get(msg, "ops");
    const struct dj *activity = dj_get(msg, "activity");
    const struct dj *ts = dj_get(msg, "timestamp");
    int written = 0;
    if (!ops || ops->type != DJ_ARRAY)
        return 0;
    for (const struct dj *op = ops->child; op; op = op->next) {
        struct sink_kv kv[12];
        size_t n = 0;
        if (op->type != DJ_OBJECT)
            continue;
        const struct dj *f;
        if (activity && activity->type == DJ_STRING)
            set_str(&kv[n++], "activity", activity->str, activity->len);
        if (is_num(f = dj_get(op, "avg")))
            set_num(&kv[n++], "avg", f);
        if (is_num(f = dj_get(op, "bytes")))
            set_num(&kv[n++], "bytes", f);
        if (is_num(f = dj_get(op, "count")))
            set_num(&kv[n++], "count", f);
        set_str(&kv[n++], "deviceId", dev, strlen(dev));
        if ((f = dj_get(op, "domain")) && f->type == DJ_STRING)
            set_str(&kv[n++], "domain", f->str, f->len);
        set_str(&kv[n++], "kind", "OpStats", 7);
        if (is_num(f = dj_get(op, "max")))
            set_num(&kv[n++], "max", f);
        if (is_num(f = dj_get(op, "min")))
            set_num(&kv[n++], "min", f);
        if ((f = dj_get(op, "name")) && f->type == DJ_STRING)
            set_str(&kv[n++], "name", f->str, f->len);
        set_num(&kv[n++], "timestamp", ts);
        if (is_num(f = dj_get(op, "total")))
            set_num(&kv[n++], "total", f);
        struct sink_record rec = { now_ns, dev, kv, n };
        written += emit(dr, &rec);
    }
    return written;
}

int data_handle(struct data_router *dr, const char *payload, size_t len, uint64_t now_ns)
{
    struct dj *msg = NULL;
    const struct dj *kind, *dur, *ts, *devv;
    char devbuf[32];
    const char *dev;
    struct jw w;
    char line[8192];
    int rc = -EINVAL;
    if (dj_parse(payload, len, DATA_MAX_DEPTH, &msg) != 0)
        goto bad;
    kind = dj_get(msg, "kind");
    dur = dj_get(msg, "duration");
    ts = dj_get(msg, "timestamp");
    devv = dj_get(msg, "deviceId");
    if (msg->type != DJ_OBJECT || !kind || kind->type != DJ_STRING || !nonneg_int(dur) ||
        !nonneg_int(ts) || !devv ||
        !(devv->type == DJ_INT || devv->type == DJ_UINT || devv->type == DJ_STRING))
        goto bad;
    if (devv->type == DJ_STRING) {
        dev = data_norm_device(devv->str);
    } else {
        if (devv->type == DJ_INT)
            snprintf(devbuf, sizeof(devbuf), "%" PRId64, devv->v.i);
        else
            snprintf(devbuf, sizeof(devbuf), "%" PRIu64, devv->v.u);
        dev = data_norm_device(devbuf);
    }
    jw_init(&w, line, sizeof(line));
    dj_write(&w, msg);
    LOG_INFO("Received data message : %s", w.err ? "(too long to log)" : line);
    dr->accepted++;
    if (kind->len == 7 && memcmp(kind->str, "OpStats", 7) == 0) {
        rc = emit_opstats(dr, msg, dev, now_ns);
    } else {
        struct sink_kv kv[6];
        size_t n = 0;
        const struct dj *f;
        set_str(&kv[n++], "deviceId", dev, strlen(dev));
        if ((f = dj_get(msg, "domain")) && f->type == DJ_STRING)
            set_str(&kv[n++], "domain", f->str, f->len);
        set_num(&kv[n++], "duration", dur);
        set_str(&kv[n++], "kind", kind->str, kind->len);
        if ((f = dj_get(msg, "name")) && f->type == DJ_STRING)
            set_str(&kv[n++], "name", f->str, f->len);
        set_num(&kv[n++], "timestamp", ts);
        struct sink_record rec = { now_ns, dev, kv, n };
        rc = emit(dr, &rec);
    }
    dj_free(msg);
    return rc;
bad:
    dr->rejected++;
    LOG_ERROR("Error parsing message = %.*s", (int)len, payload);
    dj_free(msg);
    return -EINVAL;
}
