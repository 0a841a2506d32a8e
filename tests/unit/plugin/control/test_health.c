/* health (plugin side): the PluginHealth payload, step/config bookkeeping (steps since the
 * segment's publish time, the step period) and the reporter thread's start/stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/log.h"
#include "contract/podid.h"
#include "plugin/control/health.h"
#include "plugin/outputs/outfile.h"
#include "plugin/penv.h"

static void test_json(void **state)
{
    struct health_snapshot s = {
        .pid = 7, .rank = 2, .mode = "dyno", .step = 11, .step_age_ms = 5, .step_period_ms = 20,
        .config_age_ms = -1, .steps = 10, .steps_since_config = 0, .backend = "cupti",
        .library = "/l/libcupti.so", .fallback = "CUPTI chosen because msPTI was not found (searched: /a \"b\")",
    };
    char buf[1024];
    size_t n;

    (void)state;
    n = health_json(&s, 99, buf, sizeof(buf));
    assert_true(n > 0 && n < sizeof(buf));
    assert_string_equal(buf,
        "{\"backend\":\"cupti\",\"config_age_ms\":-1,\"deviceId\":-1,\"duration\":0,\"fallback\":\"CUPTI chosen "
        "because msPTI was not found (searched: /a \\\"b\\\")\",\"kind\":\"PluginHealth\",\"library\":"
        "\"/l/libcupti.so\",\"mode\":\"dyno\",\"name\":\"health\",\"pid\":7,\"rank\":2,\"step\":11,"
        "\"step_age_ms\":5,\"step_period_ms\":20,\"steps\":10,\"steps_since_config\":0,\"timestamp\":99}");
    assert_int_equal(health_json(&s, 99, buf, 40), 0); /* too small: nothing */
}

static void test_bookkeeping(void **state)
{
    struct health_snapshot s;
    char note[HEALTH_NOTE_CAP];
    uint64_t now_s = clock_real_ns() / 1000000000ull;

    (void)state;
    health_set_identity("dyno", 4);
    health_snapshot(&s, clock_mono_ns(), note, sizeof(note));
    assert_int_equal(s.rank, 4);
    assert_string_equal(s.mode, "dyno");
    assert_int_equal(s.step, -1);
    assert_int_equal(s.step_age_ms, -1);
    assert_int_equal(s.step_period_ms, -1);
    assert_int_equal(s.config_age_ms, -1);

    health_note_step(1);
    health_note_step(2);
    /* published 3 s ago: the age counts from then, and no step came since */
    health_note_segment((uint32_t)(now_s - 3));
    health_snapshot(&s, clock_mono_ns(), note, sizeof(note));
    assert_int_equal(s.step, 2);
    assert_int_equal(s.steps, 2);
    assert_true(s.step_period_ms >= 0);
    assert_true(s.config_age_ms >= 2000 && s.config_age_ms < 60000);
    assert_int_equal(s.steps_since_config, 0);
    health_note_step(3);
    health_note_segment((uint32_t)(now_s - 3)); /* the same publish: not a new config */
    health_snapshot(&s, clock_mono_ns(), note, sizeof(note));
    assert_int_equal(s.steps_since_config, 1);
    health_note_segment(0);                    /* an empty segment: nothing */
    health_snapshot(&s, clock_mono_ns(), note, sizeof(note));
    assert_int_equal(s.steps_since_config, 1);
    health_note_config();                      /* a config by the poller: counting restarts */
    health_snapshot(&s, clock_mono_ns(), note, sizeof(note));
    assert_int_equal(s.steps_since_config, 0);
    assert_true(s.config_age_ms >= 0 && s.config_age_ms < 60000);
}

static atomic_int ticks;

static void tick(void)
{
    atomic_fetch_add(&ticks, 1);
}

static void test_reporter(void **state)
{
    struct timespec ts = { 0, 5000000 };

    (void)state;
    assert_int_equal(health_reporter_start(0.05, tick), 0);
    assert_int_equal(health_reporter_start(0.05, tick), 0); /* idempotent */
    for (int i = 0; i < 2000 && atomic_load(&ticks) < 3; i++)
        nanosleep(&ts, NULL);
    assert_true(atomic_load(&ticks) >= 3);
    health_reporter_stop();
    health_reporter_stop();                                /* no-op */
    int seen = atomic_load(&ticks);
    nanosleep(&ts, NULL);
    assert_int_equal(atomic_load(&ticks), seen);           /* stopped for good */
    assert_int_equal(health_reporter_start(0.05, NULL), 0); /* and can start again */
    health_reporter_stop();
}

/* The pod a process reports (docs/deploy.md#attribution): penv reads the contract's variables, the
 * report carries them (or the hostname), the outputs' meta line the downward-API ones only. */
static void test_pod(void **state)
{
    (void)state;
    struct health_snapshot s = { .pid = 7, .rank = 0, .mode = "dyno", .step = -1, .step_age_ms = -1,
                                 .step_period_ms = -1, .config_age_ms = -1, .backend = "", .library = "",
                                 .fallback = "" };
    char buf[2048], line[PODID_JSON_CAP + 32];

    for (int f = 0; f < PODID_NFIELDS; f++)
        assert_string_equal(penv_name((enum penv_id)(PENV_POD_NAME + f)), podid_env((enum podid_field)f));
    setenv("POD_NAME", "trainer-a-0", 1);
    setenv("POD_NAMESPACE", "ml", 1);
    setenv("CONTAINER_NAME", "trainer", 1);
    setenv("NODE_NAME", "bad name", 1);
    penv_reload();
    health_pod(&s.pod);
    assert_true(health_json(&s, 1, buf, sizeof(buf)) > 0);
    assert_non_null(strstr(buf, "\"container_name\":\"trainer\""));
    assert_non_null(strstr(buf, "\"pod_name\":\"trainer-a-0\",\"pod_namespace\":\"ml\""));
    assert_null(strstr(buf, "node_name"));          /* not a name: left out */
    assert_null(strstr(buf, "hostname"));
    assert_true(outfile_pod_line(line, sizeof(line)) > 0);
    assert_string_equal(line, "{\"container\":\"trainer\",\"kind\":\"pod\",\"name\":\"trainer-a-0\","
                              "\"namespace\":\"ml\"}");
    /* without POD_NAME: nothing of the pod but the hostname, for the daemon to judge */
    unsetenv("POD_NAME");
    penv_reload();
    health_pod(&s.pod);
    assert_true(health_json(&s, 1, buf, sizeof(buf)) > 0);
    assert_null(strstr(buf, "pod_name"));
    assert_null(strstr(buf, "container_name"));
    assert_true(strstr(buf, "\"hostname\":") != NULL || !s.pod.pod_from_hostname);
    assert_int_equal(outfile_pod_line(line, sizeof(line)), 0);
    unsetenv("POD_NAMESPACE");
    unsetenv("CONTAINER_NAME");
    unsetenv("NODE_NAME");
    penv_reload();
}

int main(void)
{
    char dir[] = "/tmp/mmhealthXXXXXX";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json), cmocka_unit_test(test_bookkeeping), cmocka_unit_test(test_reporter),
        cmocka_unit_test(test_pod),
    };

    /* no daemon: the reports fail quietly into an empty socket directory */
    if (!mkdtemp(dir))
        return 1;
    setenv("MSMONITOR_SOCKET_DIR", dir, 1);
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(dir);
    return rc;
}
