/* test_backend: msPTI library search order (04-plugin.md §9) over fake libraries built by
 * this test's CMakeLists: explicit path is authoritative, LD_PRELOAD entry, already-mapped
 * copy, ASCEND_HOME_PATH; a library lacking a mandatory symbol is rejected by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../logcap.h"
#include "common/log.h"
#include "plugin/backend/backend.h"
#include "plugin/penv.h"

#define log_has logcap_has

static int id_of(const struct backend *be)
{
    int (*f)(void) = (int (*)(void))dlsym(be->dl, "fake_id");
    return f ? f() : -1;
}

static void clear_env(void)
{
    unsetenv("MSMONITOR_MSPTI_LIB");
    unsetenv("LD_PRELOAD");
    unsetenv("ASCEND_HOME_PATH");
    logcap_clear();
}

static void test_explicit_authoritative(void **state)
{
    struct backend be;
    (void)state;
    clear_env();
    setenv("MSMONITOR_MSPTI_LIB", FAKE_DIR "/fake_b/libmspti.so", 1);
    setenv("ASCEND_HOME_PATH", FAKE_DIR "/fake_a", 1);
    penv_reload();
    assert_int_equal(backend_mspti_load(&be), 0);
    assert_int_equal(id_of(&be), 2);
    assert_string_equal(be.path, FAKE_DIR "/fake_b/libmspti.so");
    assert_null(be.flush_period);   /* optional symbol absent */
    /* explicit but missing mandatory symbol: no fallback to ASCEND_HOME_PATH */
    setenv("MSMONITOR_MSPTI_LIB", FAKE_DIR "/fake_c/libmspti.so", 1);
    penv_reload();
    assert_int_equal(backend_mspti_load(&be), -ENOENT);
    assert_true(log_has("libmspti.so at " FAKE_DIR "/fake_c/libmspti.so lacks mandatory symbol msptiActivityFlushAll"));
    assert_true(log_has("msPTI library not found"));
}

static void test_preload_then_home(void **state)
{
    struct backend be;
    (void)state;
    clear_env();
    /* the C library is listed first and skipped; only a libmspti.so basename counts */
    setenv("LD_PRELOAD", "/nonexistent/libfoo.so " FAKE_DIR "/fake_c/libmspti.so:" FAKE_DIR "/fake_a/libmspti.so", 1);
    setenv("ASCEND_HOME_PATH", FAKE_DIR "/fake_b", 1);
    penv_reload();
    assert_int_equal(backend_mspti_load(&be), 0);
    assert_int_equal(id_of(&be), 1);
    assert_true(log_has("lacks mandatory symbol msptiActivityFlushAll"));
}

static void test_home_and_not_found(void **state)
{
    struct backend be;
    (void)state;
    clear_env();
    setenv("ASCEND_HOME_PATH", FAKE_DIR "/fake_b", 1);
    penv_reload();
    /* fake_a may already be mapped from the previous test (RTLD_NOLOAD wins over ASCEND_HOME):
     * only check that a complete library was chosen. */
    assert_int_equal(backend_mspti_load(&be), 0);
    assert_true(id_of(&be) == 1 || id_of(&be) == 2);
    clear_env();
    setenv("MSMONITOR_MSPTI_LIB", "/nonexistent/libmspti.so", 1);
    penv_reload();
    assert_int_equal(backend_mspti_load(&be), -ENOENT);
    assert_true(log_has("msPTI library not found (searched: MSMONITOR_MSPTI_LIB=/nonexistent/libmspti.so)"));
    assert_string_equal(backend_result_name(NULL, 6), "MSPTI_ERROR_WITHOUT_LD_PRELOAD");
    assert_string_equal(backend_result_name(NULL, 999), "MSPTI_ERROR_INNER");
}

static int setup(void **state)
{
    (void)state;
    return logcap_open();
}

static int teardown(void **state)
{
    (void)state;
    logcap_close();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_explicit_authoritative),
        cmocka_unit_test(test_preload_then_home),
        cmocka_unit_test(test_home_and_not_found),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
