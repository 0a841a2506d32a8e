/* datamsg: merges the envelope keys with a kind's extra keys and writes them in key order, so
 * every sender produces the same shape (sorted keys make datagrams comparable byte for byte). */
#include "contract/datamsg.h"

#include <errno.h>
#include <string.h>

#define DATAMSG_ENV_MAX 5

static void put_value(struct jw *w, const struct datamsg_field *f)
{
    switch (f->type) {
    case DATAMSG_INT: jw_int(w, f->i); break;
    case DATAMSG_UINT: jw_uint(w, f->u); break;
    case DATAMSG_STR: /* NULL reads as "", as jw_str has it */
        jw_strn(w, f->s ? f->s : "", !f->s ? 0 : f->slen == SIZE_MAX ? strlen(f->s) : f->slen);
        break;
    case DATAMSG_BOOL: jw_bool(w, f->b); break;
    case DATAMSG_FN: f->fn(w, f->ctx); break;
    }
}

const char *datamsg_split_name(enum datamsg_split s)
{
    switch (s) {
#define DATAMSG_SPLIT_CASE(e, name, code)                                                          \
    case e: return name;
        DATAMSG_SPLITS(DATAMSG_SPLIT_CASE)
#undef DATAMSG_SPLIT_CASE
    }
    return "none";
}

int datamsg_split_parse(const char *s, size_t n, enum datamsg_split *ret)
{
#define DATAMSG_SPLIT_CMP(e, name, code)                                                           \
    if (n == sizeof(name) - 1 && memcmp(s, name, n) == 0) {                                        \
        *ret = e;                                                                                  \
        return 0;                                                                                  \
    }
    DATAMSG_SPLITS(DATAMSG_SPLIT_CMP)
#undef DATAMSG_SPLIT_CMP
    return -EINVAL;
}

void datamsg_step_write(struct jw *w, const struct datamsg_step *r)
{
    bool step_done = false, split_done = false;

    jw_obj_begin(w);
    /* "split" and "step" go where their names sort among the duration keys */
#define DATAMSG_STEP_FIELD(field, key, what)                                                      \
    if (!split_done && strcmp(key, "split") > 0) {                                                \
        jw_key(w, "split");                                                                       \
        jw_str(w, datamsg_split_name(r->split));                                                  \
        split_done = true;                                                                        \
    }                                                                                             \
    if (!step_done && strcmp(key, "step") > 0) {                                                  \
        jw_key(w, "step");                                                                        \
        jw_int(w, r->step);                                                                       \
        step_done = true;                                                                         \
    }                                                                                             \
    jw_key(w, key);                                                                               \
    jw_uint(w, r->field);
    DATAMSG_STEP_FIELDS(DATAMSG_STEP_FIELD)
#undef DATAMSG_STEP_FIELD
    jw_obj_end(w);
}

int datamsg_write(struct jw *w, const struct datamsg *m, const struct datamsg_field *extra, size_t n)
{
    struct datamsg_field all[DATAMSG_ENV_MAX + DATAMSG_EXTRA_MAX];
    size_t k = 0;

    if (!m->kind || n > DATAMSG_EXTRA_MAX)
        return -EINVAL;
    all[k++] = m->device_id < 0 ? (struct datamsg_field){ .key = "deviceId", .type = DATAMSG_INT, .i = -1 }
                                : (struct datamsg_field){ .key = "deviceId", .type = DATAMSG_UINT,
                                                          .u = (uint64_t)m->device_id };
    all[k++] = (struct datamsg_field){ .key = "duration", .type = DATAMSG_UINT, .u = m->duration };
    all[k++] = (struct datamsg_field){ .key = "kind", .type = DATAMSG_STR, .s = m->kind, .slen = SIZE_MAX };
    if (m->name)
        all[k++] = (struct datamsg_field){ .key = "name", .type = DATAMSG_STR, .s = m->name, .slen = m->name_len };
    all[k++] = (struct datamsg_field){ .key = "timestamp", .type = DATAMSG_UINT, .u = m->timestamp };
    for (size_t i = 0; i < n; i++) {
        const struct datamsg_field *f = &extra[i];
        if (!f->key || (f->type == DATAMSG_FN && !f->fn))
            return -EINVAL;
        /* insertion: at most 13 keys, and callers mostly pass them in order already */
        size_t j = k++;
        while (j > 0 && strcmp(all[j - 1].key, f->key) > 0) {
            all[j] = all[j - 1];
            j--;
        }
        all[j] = *f;
    }
    jw_obj_begin(w);
    for (size_t i = 0; i < k; i++) {
        jw_key(w, all[i].key);
        put_value(w, &all[i]);
    }
    jw_obj_end(w);
    return w->err ? w->err : 0;
}
