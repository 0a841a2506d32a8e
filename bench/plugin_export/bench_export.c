/* bench_export: throughput of the file exporters. A producer thread feeds synthetic kernel
 * records straight into consume() in batches (faster than any sink); the DB figure is rows
 * written per second through tick()/stop(), the JSONL figure lines per second through the
 * queue and the writer thread (drops reported). Prints each run, then best and median;
 * no thresholds. Usage: bench_export [records per run] [runs] [all|db|jsonl]. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/pipeline.h"

#define BATCH 1024

static void fill(struct mon_record *r, uint64_t base)
{
    static const char *names[8] = {"MatMul", "Conv2D", "Add", "Mul", "ReduceSum", "Softmax", "LayerNorm", "Gelu"};
    for (int i = 0; i < BATCH; i++) {
        uint64_t t = 2000000000000ULL + (base + (uint64_t)i) * 10;
        r[i].kind = MON_KIND_KERNEL;
        r[i].u.kernel = (struct mon_kernel){t, t + 5, (uint32_t)(i & 7), 3, base + (uint64_t)i, "AI_CORE",
                                            names[i & 7]};
    }
}

static char *mkdir_tmp(void)
{
    char tmpl[] = "/tmp/mmbenchXXXXXX";
    return strdup(mkdtemp(tmpl));
}

static void rm_dir(const char *d)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", d);
}

static double bench_db(uint64_t total)
{
    char *dir = mkdir_tmp();
    struct output_config cfg = {.log_dir = dir, .rank = 0, .session_start_ns = 1};
    struct output *p;
    struct pipeline *pl;
    struct mon_record *r = malloc(sizeof(*r) * BATCH);
    if (pipeline_create(&cfg, NULL, &proc_db_ops, &pl) < 0)
        return 0;
    p = pipeline_output(pl);
    proc_db_ops.start(p);
    uint64_t t0 = clock_mono_ns(), tick_every = 200000;
    for (uint64_t n = 0; n < total; n += BATCH) {
        fill(r, n);
        pipeline_deliver(pl, r, BATCH);
        if ((n + BATCH) % tick_every < BATCH)
            proc_db_ops.tick(p);
    }
    proc_db_ops.stop(p, NULL);
    double secs = (double)(clock_mono_ns() - t0) / 1e9;
    pipeline_destroy(pl);
    free(r);
    rm_dir(dir);
    free(dir);
    /* each kernel record is two rows: TASK and COMPUTE_TASK_INFO */
    printf("db: %llu kernel records (%llu rows) in %.3f s: %.0f rows/s, %.0f records/s\n",
           (unsigned long long)total, (unsigned long long)total * 2, secs, 2.0 * (double)total / secs,
           (double)total / secs);
    return 2.0 * (double)total / secs;
}

struct prod { struct pipeline *pl; uint64_t n; };
static void *producer(void *a)
{
    struct prod *pr = a;
    struct mon_record *r = malloc(sizeof(*r) * BATCH);
    for (uint64_t n = 0; n < pr->n; n += BATCH) {
        fill(r, n);
        pipeline_deliver(pr->pl, r, BATCH);
    }
    free(r);
    return NULL;
}

static double bench_jsonl(uint64_t total)
{
    char *dir = mkdir_tmp();
    struct output_config cfg = {.log_dir = dir, .rank = 0, .session_start_ns = 1,
                              .jsonl_rotate_lines = "500000"};
    struct output *p;
    struct pipeline *pl;
    if (pipeline_create(&cfg, NULL, &proc_jsonl_ops, &pl) < 0)
        return 0;
    p = pipeline_output(pl);
    proc_jsonl_ops.start(p);
    struct prod pr = {pl, total};
    pthread_t th;
    uint64_t t0 = clock_mono_ns();
    pthread_create(&th, NULL, producer, &pr);
    pthread_join(th, NULL);
    double prod_secs = (double)(clock_mono_ns() - t0) / 1e9;
    proc_jsonl_ops.stop(p, NULL);
    double secs = (double)(clock_mono_ns() - t0) / 1e9;
    pipeline_destroy(pl);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "cat %s/*.jsonl | wc -l", dir);
    FILE *f = popen(cmd, "r");
    unsigned long long lines = 0;
    if (f) {
        if (fscanf(f, "%llu", &lines) != 1)
            lines = 0;
        pclose(f);
    }
    printf("jsonl: %llu records offered in %.3f s (producer %.0f records/s); %llu lines written in %.3f s: "
           "%.0f lines/s, %llu dropped (queue full)\n",
           (unsigned long long)total, prod_secs, (double)total / prod_secs, lines, secs, (double)lines / secs,
           (unsigned long long)(total + 1 > lines ? total + 1 - lines : 0)); /* +1: rank_device_map */
    rm_dir(dir);
    free(dir);
    return (double)lines / secs;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summary(const char *what, const char *unit, double *v, int n)
{
    if (n == 0)
        return;
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    printf("%s over %d runs: best %.0f %s, median %.0f %s\n", what, n, v[n - 1], unit, median, unit);
}

int main(int argc, char **argv)
{
    /* bench_export [records per run] [runs] [all|db|jsonl] */
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000000;
    int runs = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 3;
    const char *which = argc > 3 ? argv[3] : "all";
    double db[64], js[64];
    if (runs < 1 || runs > 64)
        runs = 3;
    n = (n + BATCH - 1) / BATCH * BATCH; /* whole batches */
    log_set_level(LOG_LVL_ERROR);
    for (int i = 0; i < runs; i++) {
        if (strcmp(which, "jsonl") != 0)
            db[i] = bench_db(n);
        if (strcmp(which, "db") != 0)
            js[i] = bench_jsonl(n);
    }
    if (strcmp(which, "jsonl") != 0)
        summary("db", "rows/s", db, runs);
    if (strcmp(which, "db") != 0)
        summary("jsonl", "lines/s", js, runs);
    return 0;
}
