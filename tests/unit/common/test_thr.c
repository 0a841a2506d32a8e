/* test_thr: the thread helper on real threads: every signal blocked inside, the caller's mask
 * untouched, the name set (cut to 15 bytes) before the function runs, detached and joinable
 * starts, and argument errors. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/thr.h"

struct seen {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    bool all_blocked;
    char name[32];
};

static void *probe(void *arg)
{
    struct seen *s = arg;
    sigset_t cur;
    bool all = pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0;
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM, SIGCHLD};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        all = all && sigismember(&cur, sigs[i]) == 1;
    pthread_mutex_lock(&s->mu);
    s->all_blocked = all;
    if (pthread_getname_np(pthread_self(), s->name, sizeof(s->name)) != 0)
        s->name[0] = '\0';
    s->done = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return s;
}

static void seen_init(struct seen *s)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
}

static void seen_fini(struct seen *s)
{
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

static void test_joinable_masked_named(void **state)
{
    (void)state;
    struct seen s;
    sigset_t before, after, one;
    pthread_t t;
    void *ret = NULL;

    seen_init(&s);
    sigemptyset(&one);
    sigaddset(&one, SIGUSR2);
    pthread_sigmask(SIG_SETMASK, &one, &before); /* a caller mask that must come back as it was */
    assert_int_equal(thr_start(&t, "MsMonitorTest", probe, &s, THR_JOINABLE), 0);
    pthread_sigmask(SIG_BLOCK, NULL, &after);
    assert_int_equal(pthread_join(t, &ret), 0);
    assert_ptr_equal(ret, &s);
    assert_true(s.done);
    assert_true(s.all_blocked);
    assert_string_equal(s.name, "MsMonitorTest");
    assert_int_equal(sigismember(&after, SIGUSR2), 1);
    assert_int_equal(sigismember(&after, SIGUSR1), 0);
    assert_int_equal(sigismember(&after, SIGTERM), 0);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    seen_fini(&s);
}

static void test_detached_long_name(void **state)
{
    (void)state;
    struct seen s;

    seen_init(&s);
    assert_int_equal(thr_start(NULL, "MsMonitorAVeryLongThreadName", probe, &s, THR_DETACHED), 0);
    pthread_mutex_lock(&s.mu);
    while (!s.done)
        pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);
    assert_true(s.all_blocked);
    assert_string_equal(s.name, "MsMonitorAVeryL"); /* the first 15 bytes */
    /* done is read under the lock the thread released last: it no longer touches s */
    seen_fini(&s);
}

static void *stack_probe(void *arg)
{
    pthread_attr_t a;
    size_t *ret = arg;

    *ret = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        (void)pthread_attr_getstacksize(&a, ret);
        pthread_attr_destroy(&a);
    }
    return NULL;
}

/* THR_SMALL_STACK: the CLI's workers get THR_SMALL_STACK_BYTES, others the default. */
static void test_small_stack(void **state)
{
    (void)state;
    size_t small = 0, dflt = 0;
    pthread_t t;

    assert_int_equal(thr_start(&t, "small", stack_probe, &small, THR_JOINABLE | THR_SMALL_STACK), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(thr_start(&t, "default", stack_probe, &dflt, THR_JOINABLE), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(small, THR_SMALL_STACK_BYTES);
    assert_true(dflt > THR_SMALL_STACK_BYTES);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    pthread_t t;
    struct seen s;
    assert_int_equal(thr_start(&t, "x", NULL, NULL, THR_JOINABLE), -EINVAL);
    assert_int_equal(thr_start(NULL, "x", probe, &s, THR_JOINABLE), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_joinable_masked_named),
        cmocka_unit_test(test_detached_long_name),
        cmocka_unit_test(test_small_stack),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
