/* bench_sim_emit: records/s the simulated libmspti.so appends into consumer buffers with a
 * trivial consumer (8 MiB buffers recycled from a pool; complete just returns them), for the
 * bulk producer mssim_bench_fill, mssim_emit_raw, mssim_api and mssim_launch_kernel. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "msmon/mspti.h"
#include "msmon/mssim.h"

#define BUF_SIZE (8u << 20)
#define POOL 64

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *g_pool[POOL];
static int g_npool;

static void on_request(uint8_t **buffer, size_t *size, size_t *maxn)
{
    pthread_mutex_lock(&g_lock);
    *buffer = g_npool > 0 ? g_pool[--g_npool] : aligned_alloc(8, BUF_SIZE);
    pthread_mutex_unlock(&g_lock);
    *size = BUF_SIZE;
    *maxn = 0;
}

static void on_complete(uint8_t *buffer, size_t size, size_t valid)
{
    (void)size;
    (void)valid;
    if (!buffer)
        return;
    pthread_mutex_lock(&g_lock);
    if (g_npool < POOL)
        g_pool[g_npool++] = buffer;
    else
        free(buffer);
    pthread_mutex_unlock(&g_lock);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void report(const char *what, uint64_t n, double secs)
{
    struct mssim_stats st;
    mssim_get_stats(&st);
    printf("%-34s %12.2f M records/s  (%llu records, %.3f s, %llu buffers)\n", what, (double)n / secs / 1e6,
           (unsigned long long)n, secs, (unsigned long long)st.buffers_completed);
}

/* Pre-touched buffers: the figure is the simulator's append rate, not the kernel zeroing fresh
 * pages of a newly mapped 8 MiB buffer (which otherwise dominates the profile). */
static void warm_pool(void)
{
    pthread_mutex_lock(&g_lock);
    while (g_npool < POOL) {
        uint8_t *b = aligned_alloc(8, BUF_SIZE);
        if (!b)
            break;
        memset(b, 0, BUF_SIZE);
        g_pool[g_npool++] = b;
    }
    pthread_mutex_unlock(&g_lock);
}

static void setup(void)
{
    msptiSubscriberHandle h;
    warm_pool();
    mssim_reset();
    msptiSubscribe(&h, NULL, NULL);
    msptiActivityRegisterCallbacks(on_request, on_complete);
    msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL);
    msptiActivityEnable(MSPTI_ACTIVITY_KIND_API);
    msptiActivityEnable(MSPTI_ACTIVITY_KIND_ACL_API);
    msptiActivityEnable(MSPTI_ACTIVITY_KIND_RUNTIME_API);
    msptiActivityEnable(MSPTI_ACTIVITY_KIND_MARKER);
}

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 50000000ull;
    double t;

    setup();
    t = now_s();
    int64_t got = mssim_bench_fill((1u << 2) | (1u << 10), n);
    msptiActivityFlushAll(0);
    report("mssim_bench_fill (Kernel+AclAPI)", (uint64_t)got, now_s() - t);

    setup();
    msptiActivityKernel k = {.kind = MSPTI_ACTIVITY_KIND_KERNEL, .start = 1, .end = 2, .type = "KERNEL_AIVEC",
                             .name = "MatMul"};
    uint64_t nraw = n / 5;
    t = now_s();
    for (uint64_t i = 0; i < nraw; i++)
        mssim_emit_raw(&k, sizeof(k));
    msptiActivityFlushAll(0);
    report("mssim_emit_raw (Kernel)", nraw, now_s() - t);

    setup();
    uint64_t napi = n / 20;
    t = now_s();
    for (uint64_t i = 0; i < napi; i++)
        mssim_api("aclnnMatMul", MSSIM_LEVEL_ACL, 3000);
    msptiActivityFlushAll(0);
    report("mssim_api", napi, now_s() - t);

    setup();
    uint64_t nk = n / 50;
    t = now_s();
    for (uint64_t i = 0; i < nk; i++)
        mssim_launch_kernel(0, "MatMul", "KERNEL_AICORE", 0);
    mssim_synchronize(-1);
    msptiActivityFlushAll(0);
    report("mssim_launch_kernel (API+Kernel)", 2 * nk, now_s() - t);
    return 0;
}
