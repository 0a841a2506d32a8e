/* bench_trace: nputrace trace write throughput. A window of synthetic records (one API launch
 * + its kernel per pair, so every kernel also gets an ac2g flow) is delivered through the
 * pipeline into proc_trace, then stop() writes the file; the figure is events per second over
 * deliver + write. Baseline, measured in the same run: a trivial writer that fwrite()s the
 * same number of fixed 200-byte pre-formatted lines (the cost of the bytes alone). Prints
 * each run, then best and median; no thresholds. Usage: bench_trace [pairs per run] [runs]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "plugin/pipeline/output.h"
#include "plugin/outputs/proc_trace.h"
#include "plugin/pipeline/pipeline.h"

#define BATCH 1024

static void fill(struct mon_record *r, uint64_t base)
{
    static const char *names[8] = { "MatMul", "Conv2D", "Add", "Mul", "ReduceSum", "Softmax", "LayerNorm", "Gelu" };
    for (int i = 0; i < BATCH; i += 2) {
        uint64_t t = 2000000000000ULL + (base + (uint64_t)i) * 1000, corr = base + (uint64_t)i + 1;
        r[i].kind = MON_KIND_RUNTIME_API;
        r[i].u.api = (struct mon_api){ t, t + 300, 4242, 4243, corr, "aclrtLaunchKernel" };
        r[i + 1].kind = MON_KIND_KERNEL;
        r[i + 1].u.kernel = (struct mon_kernel){ t + 500, t + 900, (uint32_t)(i & 3), 3 + (uint32_t)(i & 1), corr,
                                                 "AI_CORE", names[(i / 2) & 7] };
    }
}

static char *mkdir_tmp(void)
{
    char tmpl[] = "/tmp/mmbtraceXXXXXX";
    return strdup(mkdtemp(tmpl));
}

static void rm_dir(const char *d)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", d);
    free((void *)d);
}

/* Events written per second (records + flow halves count as the file's events). */
static double bench_trace(uint64_t pairs, uint64_t *ret_bytes)
{
    char *dir = mkdir_tmp();
    struct output_trace_opts o = { .world_size = 1, .backend = "mspti" };
    struct window_opts w = { .start_step = 5, .stop_step = 7 }; /* the session's window, as nputrace's */
    struct output_config cfg = { .log_dir = dir, .rank = 0, .session_start_ns = 1, .trace = &o };
    struct pipeline_stats st;
    struct pipeline *pl;
    struct mon_record *r = malloc(sizeof(*r) * BATCH);
    uint64_t total = 2 * pairs, t0;

    if (!r || pipeline_create(&cfg, NULL, &proc_trace_ops, &pl) < 0 || pipeline_set_window(pl, &w) < 0)
        return 0;
    pipeline_start(pl);
    t0 = clock_mono_ns();
    for (uint64_t n = 0; n < total; n += BATCH) {
        fill(r, n);
        pipeline_deliver(pl, r, BATCH);
    }
    pipeline_stop(pl, NULL);
    double s = (double)(clock_mono_ns() - t0) / 1e9;
    pipeline_stats(pl, &st);
    *ret_bytes = st.bytes_written;
    pipeline_destroy(pl);
    free(r);
    rm_dir(dir);
    return (double)(total + pairs * 2) / s; /* records + one s/f pair per kernel */
}

static double bench_baseline(uint64_t events)
{
    char *dir = mkdir_tmp(), path[256], line[201];
    FILE *f;
    uint64_t t0;

    snprintf(path, sizeof(path), "%s/baseline.json", dir);
    memset(line, 'x', 199);
    line[199] = '\n';
    line[200] = '\0';
    t0 = clock_mono_ns();
    f = fopen(path, "w");
    if (!f)
        return 0;
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    for (uint64_t i = 0; i < events; i++)
        fwrite(line, 1, 200, f);
    fflush(f);
    fsync(fileno(f));
    fclose(f);
    double s = (double)(clock_mono_ns() - t0) / 1e9;
    rm_dir(dir);
    return (double)events / s;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int main(int argc, char **argv)
{
    uint64_t pairs = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000, bytes = 0;
    int runs = argc > 2 ? atoi(argv[2]) : 3;
    double tr[16], gz[16], bl[16];
    uint64_t gzbytes = 0;

    if (runs < 1 || runs > 16)
        runs = 3;
    log_set_level(LOG_LVL_WARNING);
    for (int i = 0; i < runs; i++) {
        proc_trace_test_set_limits(0, UINT64_MAX); /* plain .json */
        tr[i] = bench_trace(pairs, &bytes);
        proc_trace_test_set_limits(0, 1);          /* .json.gz */
        gz[i] = bench_trace(pairs, &gzbytes);
        bl[i] = bench_baseline(4 * pairs);
        printf("run %d: trace .json %.0f events/s (%llu bytes, %.0f B/event); .json.gz %.0f events/s; baseline "
               "fwrite of 200-byte lines %.0f lines/s\n", i + 1, tr[i], (unsigned long long)bytes,
               (double)bytes / (4.0 * (double)pairs), gz[i], bl[i]);
    }
    qsort(tr, (size_t)runs, sizeof(double), cmp);
    qsort(bl, (size_t)runs, sizeof(double), cmp);
    qsort(gz, (size_t)runs, sizeof(double), cmp);
    printf("trace write: best %.0f events/s, median %.0f events/s (%llu events per run: API + kernel + ac2g pair)\n",
           tr[0], tr[runs / 2], (unsigned long long)(4 * pairs));
    printf("trace write .json.gz: best %.0f events/s, median %.0f events/s\n", gz[0], gz[runs / 2]);
    printf("baseline (fwrite 200-byte lines): best %.0f lines/s, median %.0f lines/s\n", bl[0], bl[runs / 2]);
    return 0;
}
