/* test_backend: msPTI library search order (docs/design/session.md#backends, docs/plugin.md) over fake
 * libraries built by this test's CMakeLists: explicit path is authoritative, LD_PRELOAD entry,
 * already-mapped copy, ASCEND_HOME_PATH, and last the loader's search path (LD_LIBRARY_PATH:
 * checked in a re-executed child, the loader reads it only at process start); a library
 * lacking a mandatory symbol is rejected by name; MSMONITOR_BACKEND selection. */
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
#include <sys/wait.h>
#include <unistd.h>

#include "../../logcap.h"
#include "common/log.h"
#include "plugin/backend/backend.h"
#include "plugin/backend/mspti_lib.h"
#include "plugin/penv.h"

#define log_has logcap_has

static int id_of(const struct mspti_lib *be)
{
    int (*f)(void) = (int (*)(void))dlsym(be->dl, "fake_id");
    return f ? f() : -1;
}

static void clear_env(void)
{
    unsetenv("MSMONITOR_MSPTI_LIB");
    unsetenv("LD_PRELOAD");
    unsetenv("ASCEND_HOME_PATH");
    unsetenv("MSMONITOR_BACKEND");
    logcap_clear();
}

static void test_explicit_authoritative(void **state)
{
    struct mspti_lib be;
    (void)state;
    clear_env();
    setenv("MSMONITOR_MSPTI_LIB", FAKE_DIR "/fake_b/libmspti.so", 1);
    setenv("ASCEND_HOME_PATH", FAKE_DIR "/fake_a", 1);
    penv_reload();
    assert_int_equal(mspti_lib_load(&be), 0);
    assert_int_equal(id_of(&be), 2);
    assert_string_equal(be.path, FAKE_DIR "/fake_b/libmspti.so");
    assert_null(be.flush_period);   /* optional symbol absent */
    /* explicit but missing mandatory symbol: no fallback to ASCEND_HOME_PATH */
    setenv("MSMONITOR_MSPTI_LIB", FAKE_DIR "/fake_c/libmspti.so", 1);
    penv_reload();
    assert_int_equal(mspti_lib_load(&be), -ENOENT);
    assert_true(log_has("libmspti.so at " FAKE_DIR "/fake_c/libmspti.so lacks mandatory symbol msptiActivityFlushAll"));
    assert_true(log_has("msPTI library not found"));
}

static void test_preload_then_home(void **state)
{
    struct mspti_lib be;
    (void)state;
    clear_env();
    /* the C library is listed first and skipped; only a libmspti.so basename counts */
    setenv("LD_PRELOAD", "/nonexistent/libfoo.so " FAKE_DIR "/fake_c/libmspti.so:" FAKE_DIR "/fake_a/libmspti.so", 1);
    setenv("ASCEND_HOME_PATH", FAKE_DIR "/fake_b", 1);
    penv_reload();
    assert_int_equal(mspti_lib_load(&be), 0);
    assert_int_equal(id_of(&be), 1);
    assert_true(log_has("lacks mandatory symbol msptiActivityFlushAll"));
}

static void test_home_and_not_found(void **state)
{
    struct mspti_lib be;
    (void)state;
    clear_env();
    setenv("ASCEND_HOME_PATH", FAKE_DIR "/fake_b", 1);
    penv_reload();
    /* fake_a may already be mapped from the previous test (RTLD_NOLOAD wins over ASCEND_HOME):
     * only check that a complete library was chosen. */
    assert_int_equal(mspti_lib_load(&be), 0);
    assert_true(id_of(&be) == 1 || id_of(&be) == 2);
    clear_env();
    setenv("MSMONITOR_MSPTI_LIB", "/nonexistent/libmspti.so", 1);
    penv_reload();
    assert_int_equal(mspti_lib_load(&be), -ENOENT);
    assert_true(log_has("msPTI library not found (searched: MSMONITOR_MSPTI_LIB=/nonexistent/libmspti.so)"));
    assert_string_equal(mspti_lib_result_name(6), "MSPTI_ERROR_WITHOUT_LD_PRELOAD");
    assert_string_equal(mspti_lib_result_name(999), "MSPTI_ERROR_INNER");
}

/* Child mode (argv[1] == "--ldpath-child"): nothing set but LD_LIBRARY_PATH; exit with the
 * id of the library found (0 none), and the path it names in its log on stdout. */
static int ldpath_child(void)
{
    struct mspti_lib be;
    penv_reload();
    if (mspti_lib_load(&be) != 0)
        return 0;
    printf("%s\n", be.path);
    return id_of(&be);
}

/* Run ourselves with LD_LIBRARY_PATH=ldpath; returns the child's exit status. */
static int run_child(const char *ldpath, char *ret_out, size_t cap)
{
    int pfd[2], st = -1;
    pid_t pid;
    ssize_t n;
    assert_int_equal(pipe(pfd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(pfd[1], 1);
        dup2(pfd[1], 2); /* the not-found ERROR goes to stderr */
        close(pfd[0]);
        unsetenv("MSMONITOR_MSPTI_LIB");
        unsetenv("LD_PRELOAD");
        unsetenv("ASCEND_HOME_PATH");
        if (ldpath)
            setenv("LD_LIBRARY_PATH", ldpath, 1);
        else
            unsetenv("LD_LIBRARY_PATH");
        execl("/proc/self/exe", "test_pc_backend", "--ldpath-child", (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    size_t len = 0;
    while (len + 1 < cap && (n = read(pfd[0], ret_out + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    ret_out[len] = '\0';
    close(pfd[0]);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* CANN's set_env.sh only puts the library on LD_LIBRARY_PATH: found by the plain dlopen after
 * every fixed candidate failed, and the log names the file actually mapped. */
static void test_loader_search_path_last(void **state)
{
    char out[4096];
    (void)state;
    assert_int_equal(run_child(FAKE_DIR "/fake_b", out, sizeof(out)), 2);
    assert_non_null(strstr(out, FAKE_DIR "/fake_b/libmspti.so\n"));
    /* nothing reachable: not found, and the loader search is in the list of what was tried */
    assert_int_equal(run_child(NULL, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "libmspti.so via the loader search path (LD_LIBRARY_PATH))"));
}

/* MSMONITOR_BACKEND: mspti by default, cupti (its own tests: test_backend_cupti.c), anything
 * else refused. */
static void test_backend_selection(void **state)
{
    struct backend *be = NULL;
    (void)state;
    clear_env();
    setenv("MSMONITOR_MSPTI_LIB", FAKE_DIR "/fake_a/libmspti.so", 1);
    penv_reload();
    assert_int_equal(backend_create(&be), 0);
    assert_string_equal(be->ops->name, "mspti");
    be->ops->destroy(be);
    setenv("MSMONITOR_BACKEND", "cupti", 1);
    setenv("MSMONITOR_CUPTI_LIB", "/nonexistent/libcupti.so", 1);
    penv_reload();
    assert_int_equal(backend_create(&be), -ENOENT);
    assert_true(log_has("CUPTI library not found (searched: MSMONITOR_CUPTI_LIB=/nonexistent/libcupti.so)"));
    unsetenv("MSMONITOR_CUPTI_LIB");
    setenv("MSMONITOR_BACKEND", "rocm", 1);
    penv_reload();
    assert_int_equal(backend_create(&be), -EINVAL);
    assert_true(log_has("MSMONITOR_BACKEND=rocm is not a backend (use mspti or cupti)"));
    clear_env();
    penv_reload();
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

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--ldpath-child") == 0)
        return ldpath_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_explicit_authoritative),
        cmocka_unit_test(test_preload_then_home),
        cmocka_unit_test(test_home_and_not_found),
        cmocka_unit_test(test_loader_search_path_last),
        cmocka_unit_test(test_backend_selection),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
