/* test_bufpool: 32 outstanding buffers, the 33rd declined with one rate-limited log line,
 * returned buffers (also empty ones) always decrement the counter and are reused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "plugin/backend/bufpool.h"

static int count_in_file(int fd, const char *text)
{
    char buf[16384];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    int c = 0;
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    for (const char *p = buf; (p = strstr(p, text)); p++)
        c++;
    return c;
}

static void test_cap_and_decline(void **state)
{
    char path[] = "/tmp/pc_bufpool_XXXXXX";
    int fd = mkstemp(path);
    struct bufpool *bp;
    struct bufpool_stats st;
    uint8_t *bufs[BUFPOOL_CAP];
    size_t size;
    (void)state;

    log_set_stderr_fd(fd);
    assert_int_equal(bufpool_create(4096, &bp), 0);
    for (int i = 0; i < BUFPOOL_CAP; i++) {
        bufs[i] = bufpool_get(bp, &size);
        assert_non_null(bufs[i]);
        assert_int_equal(size, 4096);
        assert_int_equal((uintptr_t)bufs[i] % 8, 0);
    }
    for (int i = 0; i < 100; i++) {
        assert_null(bufpool_get(bp, &size));
        assert_int_equal(size, 0);
    }
    assert_int_equal(count_in_file(fd, "Buffer allocation exhausted, allocCnt: 32"), 1);
    bufpool_stats(bp, &st);
    assert_int_equal(st.outstanding, 32);
    assert_int_equal(st.declined_total, 100);
    for (int i = 0; i < BUFPOOL_CAP; i++)
        bufpool_put(bp, bufs[i]);
    bufpool_put(bp, NULL);
    bufpool_stats(bp, &st);
    assert_int_equal(st.outstanding, 0);
    assert_int_equal(st.free_list, 32);
    /* reuse: no new allocation */
    bufs[0] = bufpool_get(bp, &size);
    assert_non_null(bufs[0]);
    bufpool_stats(bp, &st);
    assert_int_equal(st.allocated_total, 32);
    bufpool_put(bp, bufs[0]);
    bufpool_destroy(bp);
    log_set_stderr_fd(-1);
    close(fd);
    unlink(path);
}

static void test_bad_size(void **state)
{
    struct bufpool *bp;
    (void)state;
    assert_int_equal(bufpool_create(0, &bp), -22);
    assert_int_equal(bufpool_create(4097, &bp), -22);
    assert_int_equal(bufpool_default_size(), BUFPOOL_SIZE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap_and_decline),
        cmocka_unit_test(test_bad_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
