/* health: PluginHealth parsing and the status marks (health.h). The texts name the fix; the
 * codes are what scripts and `dyno doctor` match on. */
#include "daemon/ipc/health.h"
#include "common/strutil.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int take_int(const cJSON *msg, const char *key, int64_t lo, int64_t hi, int64_t *ret)
{
    int64_t v = 0;

    if (cjx_number(cjx_get(msg, key), &v, NULL, NULL) != CJX_INT || v < lo || v > hi)
        return -EINVAL;
    *ret = v;
    return 0;
}

static int take_str(const cJSON *msg, const char *key, char *dst, size_t cap)
{
    const cJSON *v = cjx_get(msg, key);

    if (!cJSON_IsString(v) || !str_printable(v->valuestring, cap))
        return -EINVAL;
    snprintf(dst, cap, "%s", v->valuestring);
    return 0;
}

int health_parse(const cJSON *msg, struct status_health *ret, int32_t *ret_pid)
{
    struct status_health h;
    int64_t pid, rank, step, sage, speriod, cage, steps, since;
    const cJSON *mode = cjx_get(msg, "mode");

    memset(&h, 0, sizeof(h));
    if (take_int(msg, "pid", 1, INT32_MAX, &pid) || take_int(msg, "rank", -1, INT32_MAX, &rank) ||
        take_int(msg, "step", -1, INT32_MAX, &step) || take_int(msg, "step_age_ms", -1, INT64_MAX, &sage) ||
        take_int(msg, "step_period_ms", -1, INT64_MAX, &speriod) ||
        take_int(msg, "config_age_ms", -1, INT64_MAX, &cage) || take_int(msg, "steps", 0, INT64_MAX, &steps) ||
        take_int(msg, "steps_since_config", 0, INT64_MAX, &since) ||
        take_str(msg, "backend", h.backend, sizeof(h.backend)) ||
        take_str(msg, "library", h.library, sizeof(h.library)) ||
        take_str(msg, "fallback", h.fallback, sizeof(h.fallback)) || !cJSON_IsString(mode) ||
        (strcmp(mode->valuestring, "dyno") != 0 && strcmp(mode->valuestring, "native") != 0))
        return -EINVAL;
    h.rank = (int32_t)rank;
    h.dyno = strcmp(mode->valuestring, "dyno") == 0;
    h.step = (int32_t)step;
    h.step_age_ms = sage;
    h.step_period_ms = speriod;
    h.config_age_ms = cage;
    h.steps = (uint64_t)steps;
    h.steps_since_config = (uint64_t)since;
    *ret = h;
    *ret_pid = (int32_t)pid;
    return 0;
}

int health_parse_pod(const cJSON *msg, struct podid_self *ret)
{
    int refused = 0;

    memset(ret, 0, sizeof(*ret));
    for (int f = 0; f < PODID_NFIELDS; f++) {
        const cJSON *v = cjx_get(msg, podid_key((enum podid_field)f));
        if (!v)
            continue;
        if (!cJSON_IsString(v) ||
            podid_self_set(ret, (enum podid_field)f, v->valuestring, strlen(v->valuestring)) != 0)
            refused++;
    }
    const cJSON *host = cjx_get(msg, PODID_HOSTNAME_KEY);
    if (host && !ret->v[PODID_POD][0]) {
        if (cJSON_IsString(host) &&
            podid_self_set(ret, PODID_POD, host->valuestring, strlen(host->valuestring)) == 0)
            ret->pod_from_hostname = true;
        else
            refused++;
    }
    return refused;
}

/* A reported age, moved on to now. */
static int64_t aged(int64_t ms, const struct status_health *h, uint64_t now_ns)
{
    if (ms < 0)
        return -1;
    return ms + (now_ns > h->received_ns ? (int64_t)((now_ns - h->received_ns) / 1000000u) : 0);
}

static void mark(struct health_mark *out, size_t cap, size_t *n, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void mark(struct health_mark *out, size_t cap, size_t *n, const char *code, const char *fmt, ...)
{
    va_list ap;

    if (*n >= cap)
        return;
    out[*n].code = code;
    va_start(ap, fmt);
    vsnprintf(out[*n].text, sizeof(out[*n].text), fmt, ap);
    va_end(ap);
    (*n)++;
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* Drops by reason: declined buffers (msPTI asks again for every record while declined, so one
 * request stands for about one record) and full-disk writes need different fixes. The fixes
 * for declines are the measured ones (docs/troubleshooting.md#dropped-records): the pool's
 * bytes against the records that arrive between two buffer completions decide, so full-size
 * buffers help, and fewer kinds by the records they make, while the report interval and the
 * filter (applied after the buffer) change nothing. */
static void drop_marks(const struct status_entry *e, struct health_mark *out, size_t cap, size_t *n)
{
    const struct status_stats *s = &e->stats;

    if (s->dropped_declined)
        mark(out, cap, n, "dropping_declined",
             "dropping %.0f%% of records: %" PRIu64 " buffer requests declined (the buffer pool is full: more "
             "records came than its 32 buffers hold)%s - fix: unset MSMONITOR_TEST_BUFFER_SIZE if the job sets it "
             "(a test knob that shrinks the buffers; full-size ones lost nothing at 10 M records/s), else fewer "
             "--mspti-activity-kind (as much as those kinds make records); a shorter --report-interval-s or a "
             "--filter does not help (job log: 'Buffer allocation exhausted')",
             pct(s->dropped_declined, s->dropped_declined + s->consumed), s->dropped_declined,
             e->has_interval && e->interval.dropped_declined ? ", still in the last interval" : "");
    if (s->dropped_write)
        mark(out, cap, n, "dropping_write",
             "dropping %.0f%% of kept records at write: %" PRIu64 " lost to write errors (a full disk?) - fix: "
             "free space under the --log-file directory or choose another one (dyno doctor --log-dir <dir>)",
             pct(s->dropped_write, s->kept), s->dropped_write);
    if (s->dropped_queue)
        mark(out, cap, n, "dropping_queue",
             "dropping %.0f%% of kept records: %" PRIu64 " dropped at the full output queue - fix: a --filter or "
             "fewer kinds, or an output that keeps up (--export-type)",
             pct(s->dropped_queue, s->kept), s->dropped_queue);
    if (s->dropped_offline)
        mark(out, cap, n, "dropping_offline",
             "%" PRIu64 " metric datagrams dropped while the daemon was unreachable - fix: keep dynolog running "
             "(systemd Restart=always) or raise MSMONITOR_DATA_BACKLOG_BYTES",
             s->dropped_offline);
}

size_t health_marks(const struct status_entry *e, bool gone, uint64_t now_ns, struct health_mark *out, size_t cap)
{
    const struct status_health *h = &e->health;
    size_t n = 0;

    if (gone) {
        /* nothing else about a process that has exited is news */
        mark(out, cap, &n, "gone", "pid %d has exited (gone); its registration is removed at the next clean-up - "
             "fix: nothing, unless it should still be running", (int)e->pid);
        return n;
    }
    if (e->has_health && h->fallback[0])
        mark(out, cap, &n, h->backend[0] ? "backend_fallback" : "no_backend",
             "%s - fix: LD_PRELOAD=<CANN>/lib64/libmspti.so before the job starts (CANN < 9.0.0) or "
             "MSMONITOR_MSPTI_LIB=<path>; MSMONITOR_BACKEND=cupti to choose CUPTI on purpose",
             h->fallback);
    if (e->has_health && h->dyno && h->config_age_ms >= 0 && h->steps_since_config == 0) {
        int64_t cage = aged(h->config_age_ms, h, now_ns), wait = HEALTH_NO_STEP_MIN_MS;
        if (h->step_period_ms > 0 && 3 * h->step_period_ms > wait)
            wait = 3 * h->step_period_ms;
        if (cage > wait) {
            char last[96] = "never";
            if (h->step_age_ms >= 0)
                snprintf(last, sizeof(last), "step %d, %.1f s ago", (int)h->step,
                         (double)aged(h->step_age_ms, h, now_ns) / 1000.0);
            mark(out, cap, &n, "no_step",
                 "no step since the config (published %.1f s ago; last step: %s): a config applies at the next "
                 "step() - fix: call msmonitor.dynamic_profile.step() once per iteration (an optimizer not "
                 "derived from torch.optim.Optimizer is not hooked), or use the forward hook "
                 "(msmonitor.step_hook.install_forward(model) or MSMONITOR_STEP_HOOK=forward)",
                 (double)cage / 1000.0, last);
        }
    }
    if (e->monitor == 1 && e->has_interval && e->quiet_intervals >= HEALTH_QUIET_INTERVALS)
        mark(out, cap, &n, "no_records",
             "no records for %u report intervals while npu-monitor runs (%" PRIu64 " in the session) - fix: check "
             "that the job runs work of the requested --mspti-activity-kind and that the backend could enable "
             "them (job log)",
             e->quiet_intervals, e->stats.consumed);
    if (e->has_stats && e->stats.consumed > 0 && e->stats.kept == 0 && e->stats.filtered > 0)
        mark(out, cap, &n, "filter_keeps_nothing",
             "the filter keeps nothing: %" PRIu64 " records consumed, %" PRIu64 " filtered, 0 kept - fix: check "
             "--filter against the kernel/API names of the job (the job log has 'MsptiMonitor filter:')",
             e->stats.consumed, e->stats.filtered);
    if (e->has_stats)
        drop_marks(e, out, cap, &n);
    return n;
}

bool health_has(const struct status_entry *e, bool gone)
{
    return gone || e->has_health || e->has_interval;
}

static void write_stats(struct jw *w, const struct status_stats *s)
{
    jw_obj_begin(w);
#define HEALTH_KEY(f, ...) \
    jw_key(w, #f);   \
    jw_uint(w, s->f);
    STATUS_STATS_FIELDS(HEALTH_KEY)
#undef HEALTH_KEY
    jw_obj_end(w);
}

void health_write(struct jw *w, const struct status_entry *e, bool gone, uint64_t now_ns)
{
    const struct status_health *h = &e->health;
    struct health_mark marks[HEALTH_MAX_MARKS];
    size_t n = health_marks(e, gone, now_ns, marks, HEALTH_MAX_MARKS);

    /* keys sorted, like every reply */
    jw_obj_begin(w);
    if (e->has_health) {
        jw_kv_str(w, "backend", h->backend);
        jw_kv_int(w, "config_age_ms", aged(h->config_age_ms, h, now_ns));
        jw_kv_str(w, "fallback", h->fallback);
    }
    jw_kv_bool(w, "gone", gone);
    if (e->has_interval) {
        jw_key(w, "interval");
        write_stats(w, &e->interval);
    }
    if (e->has_health) {
        jw_kv_str(w, "library", h->library);
    }
    jw_key(w, "marks");
    jw_arr_begin(w);
    for (size_t i = 0; i < n; i++) {
        jw_obj_begin(w);
        jw_kv_str(w, "code", marks[i].code);
        jw_kv_str(w, "text", marks[i].text);
        jw_obj_end(w);
    }
    jw_arr_end(w);
    if (e->has_health) {
        jw_kv_str(w, "mode", h->dyno ? "dyno" : "native");
    }
    if (e->has_interval) {
        jw_kv_uint(w, "quiet_intervals", e->quiet_intervals);
    }
    if (e->has_health) {
        jw_kv_int(w, "rank", h->rank);
        jw_kv_uint(w, "report_age_ms", now_ns > h->received_ns ? (now_ns - h->received_ns) / 1000000u : 0);
        jw_kv_int(w, "step", h->step);
        jw_kv_int(w, "step_age_ms", aged(h->step_age_ms, h, now_ns));
        jw_kv_uint(w, "steps", h->steps);
        jw_kv_uint(w, "steps_since_config", h->steps_since_config);
    }
    jw_obj_end(w);
}
