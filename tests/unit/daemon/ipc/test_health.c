/* health: PluginHealth validation, the interval fold of the session counters, each status
 * mark with its reason, and the per-sender listing of a rank that reported only its health. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/jw.h"
#include "contract/cjx.h"
#include "daemon/ipc/health.h"
#include "daemon/ipc/status.h"

#define MS 1000000ull

static const char good[] =
    "{\"backend\":\"mspti\",\"config_age_ms\":-1,\"deviceId\":-1,\"duration\":0,\"fallback\":\"\","
    "\"kind\":\"PluginHealth\",\"library\":\"/x/libmspti.so\",\"mode\":\"dyno\",\"name\":\"health\",\"pid\":42,"
    "\"rank\":3,\"step\":7,\"step_age_ms\":10,\"step_period_ms\":100,\"steps\":6,\"steps_since_config\":0,"
    "\"timestamp\":1}";

static int parse(const char *text, struct status_health *h, int32_t *pid)
{
    cJSON *m = NULL;
    int rc;

    assert_int_equal(cjx_parse(text, strlen(text), 10, &m), 0);
    rc = health_parse(m, h, pid);
    cJSON_Delete(m);
    return rc;
}

/* good with one key's value replaced (the key's text followed by ':' in the message) */
static int parse_with(const char *key, const char *value)
{
    char buf[2048], pat[64];
    struct status_health h;
    int32_t pid;
    const char *at, *end;

    snprintf(pat, sizeof(pat), "\"%s\":", key);
    at = strstr(good, pat);
    assert_non_null(at);
    at += strlen(pat);
    end = at;
    if (*end == '"')
        end = strchr(end + 1, '"') + 1;
    else
        while (*end != ',' && *end != '}')
            end++;
    snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - good), good, value, end);
    return parse(buf, &h, &pid);
}

static void test_parse(void **state)
{
    struct status_health h;
    int32_t pid = 0;

    (void)state;
    assert_int_equal(parse(good, &h, &pid), 0);
    assert_int_equal(pid, 42);
    assert_int_equal(h.rank, 3);
    assert_true(h.dyno);
    assert_int_equal(h.step, 7);
    assert_int_equal(h.step_period_ms, 100);
    assert_string_equal(h.library, "/x/libmspti.so");
    /* each field validated: type, range, printable text, the known modes */
    assert_int_equal(parse_with("pid", "0"), -EINVAL);
    assert_int_equal(parse_with("pid", "\"42\""), -EINVAL);
    assert_int_equal(parse_with("rank", "-2"), -EINVAL);
    assert_int_equal(parse_with("step", "4294967296"), -EINVAL);
    assert_int_equal(parse_with("steps", "-1"), -EINVAL);
    assert_int_equal(parse_with("step_age_ms", "1.5"), -EINVAL);
    assert_int_equal(parse_with("mode", "\"other\""), -EINVAL);
    assert_int_equal(parse_with("library", "\"a\\nb\""), -EINVAL);
    assert_int_equal(parse_with("backend", "\"a-backend-name-too-long\""), -EINVAL);
    assert_int_equal(parse_with("fallback", "7"), -EINVAL);
    assert_int_equal(parse_with("mode", "\"native\""), 0);
}

static struct status_stats stats(uint64_t consumed, uint64_t kept, uint64_t filtered)
{
    struct status_stats s;

    memset(&s, 0, sizeof(s));
    s.consumed = consumed;
    s.kept = kept;
    s.filtered = filtered;
    return s;
}

static void test_fold(void **state)
{
    struct status_entry e;
    struct status_stats s;

    (void)state;
    memset(&e, 0, sizeof(e));
    s = stats(10, 10, 0);
    status_fold_stats(&e, &s);
    assert_true(e.has_interval);
    assert_int_equal(e.interval.consumed, 10);
    assert_int_equal(e.quiet_intervals, 0);
    s = stats(25, 20, 5);
    status_fold_stats(&e, &s);
    assert_int_equal(e.interval.consumed, 15);
    assert_int_equal(e.interval.filtered, 5);
    status_fold_stats(&e, &s);
    status_fold_stats(&e, &s);
    assert_int_equal(e.interval.consumed, 0);
    assert_int_equal(e.quiet_intervals, 2);
    /* counters below the previous report: a new session, its first interval */
    s = stats(3, 3, 0);
    status_fold_stats(&e, &s);
    assert_int_equal(e.interval.consumed, 3);
    assert_int_equal(e.quiet_intervals, 0);
}

static const struct health_mark *find(const struct health_mark *m, size_t n, const char *code)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].code, code) == 0)
            return &m[i];
    return NULL;
}

/* The mark `code` is among m[0..n) and its text holds needle. */
static bool says(const struct health_mark *m, size_t n, const char *code, const char *needle)
{
    const struct health_mark *k = find(m, n, code);

    return k && strstr(k->text, needle) != NULL;
}

static void base(struct status_entry *e)
{
    memset(e, 0, sizeof(*e));
    e->pid = 42;
    e->trace = e->monitor = -1;
    e->has_health = true;
    e->health.rank = 0;
    e->health.step = -1;
    e->health.step_age_ms = e->health.step_period_ms = e->health.config_age_ms = -1;
    snprintf(e->health.backend, sizeof(e->health.backend), "mspti");
    e->health.received_ns = 1000 * MS;
}

static void test_marks(void **state)
{
    struct status_entry e;
    struct health_mark m[HEALTH_MAX_MARKS];
    size_t n;

    (void)state;
    base(&e);
    assert_int_equal(health_marks(&e, false, 1000 * MS, m, HEALTH_MAX_MARKS), 0);

    /* gone: the only mark */
    e.stats = stats(5, 0, 5);
    e.has_stats = true;
    n = health_marks(&e, true, 1000 * MS, m, HEALTH_MAX_MARKS);
    assert_int_equal(n, 1);
    assert_string_equal(m[0].code, "gone");
    assert_non_null(strstr(m[0].text, "pid 42"));

    /* the filter keeps nothing */
    n = health_marks(&e, false, 1000 * MS, m, HEALTH_MAX_MARKS);
    assert_non_null(find(m, n, "filter_keeps_nothing"));
    assert_true(says(m, n, "filter_keeps_nothing", "5 records consumed, 5 filtered, 0 kept"));
    e.has_stats = false;

    /* no step since the config: dyno mode only, after the wait, which a slow step lengthens */
    e.health.dyno = true;
    e.health.config_age_ms = 1000;
    e.health.steps_since_config = 0;
    assert_null(find(m, health_marks(&e, false, 1000 * MS, m, HEALTH_MAX_MARKS), "no_step"));
    n = health_marks(&e, false, (1000 + HEALTH_NO_STEP_MIN_MS) * MS, m, HEALTH_MAX_MARKS);
    assert_non_null(find(m, n, "no_step"));
    assert_true(says(m, n, "no_step", "last step: never"));
    assert_true(says(m, n, "no_step", "forward hook"));
    e.health.step_period_ms = 4000; /* 3 periods = 12 s */
    assert_null(find(m, health_marks(&e, false, (1000 + 10000) * MS, m, HEALTH_MAX_MARKS), "no_step"));
    assert_non_null(find(m, health_marks(&e, false, (1000 + 12000) * MS, m, HEALTH_MAX_MARKS), "no_step"));
    e.health.steps_since_config = 1;
    assert_null(find(m, health_marks(&e, false, (1000 + 60000) * MS, m, HEALTH_MAX_MARKS), "no_step"));
    e.health.dyno = false;
    e.health.steps_since_config = 0;
    assert_null(find(m, health_marks(&e, false, (1000 + 60000) * MS, m, HEALTH_MAX_MARKS), "no_step"));

    /* CUPTI because msPTI was not found, and no backend at all */
    snprintf(e.health.fallback, sizeof(e.health.fallback), "CUPTI chosen because msPTI was not found (searched: /a)");
    snprintf(e.health.backend, sizeof(e.health.backend), "cupti");
    n = health_marks(&e, false, 1000 * MS, m, HEALTH_MAX_MARKS);
    assert_non_null(find(m, n, "backend_fallback"));
    assert_true(says(m, n, "backend_fallback", "searched: /a"));
    assert_true(says(m, n, "backend_fallback", "LD_PRELOAD"));
    e.health.backend[0] = '\0';
    assert_non_null(find(m, health_marks(&e, false, 1000 * MS, m, HEALTH_MAX_MARKS), "no_backend"));
    e.health.fallback[0] = '\0';

    /* no records for N intervals, only while npu-monitor runs */
    e.has_interval = true;
    e.quiet_intervals = HEALTH_QUIET_INTERVALS;
    assert_null(find(m, health_marks(&e, false, 1000 * MS, m, HEALTH_MAX_MARKS), "no_records"));
    e.monitor = 1;
    n = health_marks(&e, false, 1000 * MS, m, HEALTH_MAX_MARKS);
    assert_non_null(find(m, n, "no_records"));
    assert_true(says(m, n, "no_records", "no records for 2 report intervals"));

    /* drops by reason, each with its own fix and share */
    e.has_stats = true;
    e.stats = stats(5, 5, 0);
    e.stats.dropped_declined = 95;
    e.stats.dropped_write = 1;
    n = health_marks(&e, false, 1000 * MS, m, HEALTH_MAX_MARKS);
    assert_non_null(find(m, n, "dropping_declined"));
    assert_true(says(m, n, "dropping_declined", "dropping 95% of records"));
    assert_true(says(m, n, "dropping_declined", "buffer"));
    assert_non_null(find(m, n, "dropping_write"));
    assert_true(says(m, n, "dropping_write", "dropping 20% of kept records"));
    assert_true(says(m, n, "dropping_write", "free space"));
    assert_null(find(m, n, "dropping_queue"));
    /* the cap holds */
    assert_int_equal(health_marks(&e, false, 1000 * MS, m, 1), 1);
}

static void test_write(void **state)
{
    struct status_entry e;
    struct jw w;
    cJSON *j = NULL;

    (void)state;
    base(&e);
    e.health.dyno = true;
    e.health.config_age_ms = 0;
    jw_init_dyn(&w, 1u << 20);
    health_write(&w, &e, false, (1000 + 60000) * MS);
    assert_int_equal(w.err, 0);
    assert_int_equal(cjx_parse(w.buf, w.len, 10, &j), 0);
    assert_int_equal(cJSON_GetObjectItem(j, "config_age_ms")->valueint, 60000);
    assert_string_equal(cJSON_GetObjectItem(j, "mode")->valuestring, "dyno");
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(j, "gone")));
    cJSON *marks = cJSON_GetObjectItem(j, "marks");
    assert_int_equal(cJSON_GetArraySize(marks), 1);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(marks, 0), "code")->valuestring, "no_step");
    cJSON_Delete(j);
    jw_fini(&w);
}

static void test_listing(void **state)
{
    struct status_table *st = NULL;
    assert_int_equal(status_create(&st), 0);
    struct status_health h;
    struct status_entry *ents = NULL;
    size_t n = 0;

    (void)state;
    assert_non_null(st);
    memset(&h, 0, sizeof(h));
    h.rank = 5;
    /* not vouched by the kernel: counts only for a pid already listed */
    assert_int_equal(status_set_health(st, 4242, false, &h, 1), -ENOENT);
    assert_int_equal(status_set_health(st, 4242, true, &h, 1), 0);
    assert_int_equal(status_list(st, &ents, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ents[0].pid, 4242);
    assert_true(ents[0].has_health);
    assert_int_equal(ents[0].health.rank, 5);
    assert_int_equal(ents[0].monitor, -1);
    free(ents);
    /* a later status of that pid lands on the same entry */
    struct ipc_status s = { .status = 0, .current_step = 3, .start_step = -1, .stop_step = -1, .pid = 4242 };
    status_update(st, STATUS_MONITOR, &s, 2);
    assert_int_equal(status_list(st, &ents, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ents[0].monitor, 0);
    assert_true(ents[0].has_health);
    free(ents);
    status_destroy(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse), cmocka_unit_test(test_fold), cmocka_unit_test(test_marks),
        cmocka_unit_test(test_write), cmocka_unit_test(test_listing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
