/* bench_ingest: records/s of the plugin's ingestion path — iterate a packed msPTI buffer
 * (same stride walk as msptiActivityGetNextRecord), convert, filter, aggregate in the metric
 * processor — with an empty filter and a 10-item filter. Prints figures, no thresholds.
 * bench_sim.c measures the same path with the simulator producing and msPTI's GetNextRecord. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "msmon/mspti.h"
#include "plugin/backend/mspti_record.h"
#include "plugin/pipeline/filter.h"
#include "plugin/pipeline/pipeline.h"
#include "plugin/pipeline/output.h"

static const char *const names[] = { "MatMul", "BatchMatMul", "MatMulBackward", "Conv2D",
                                     "Conv2DBackpropFilter", "LayerNorm", "Softmax", "Add",
                                     "Gelu", "Transpose", "Cast", "ReduceSum" };
#define NNAMES (sizeof(names) / sizeof(names[0]))
#define BUF_RECS 100000

static int null_send(void *ctx, const char *json, size_t len)
{
    (void)ctx;
    (void)json;
    (void)len;
    return 0;
}

/* Same walk as the real GetNextRecord: kind -> stride. */
static size_t stride_of(int32_t kind)
{
    switch (kind) {
    case 2: return sizeof(msptiActivityKernel);
    case 3: return sizeof(msptiActivityApi);
    default: return 8;
    }
}

static double run(const unsigned char *buf, size_t len, const char *filter, int rounds)
{
    struct filter_state *fs;
    struct output *p;
    struct output_config cfg = { .send = null_send };
    filter_state_create(&fs);
    filter_state_set(fs, filter);
    struct pipeline *pl;
    pipeline_create(&cfg, fs, &proc_metric_ops, &pl);
    p = pipeline_output(pl);
    proc_metric_ops.set_kinds(p, (1u << 2) | (1u << 3));
    struct mon_record batch[256];
    uint64_t t0 = clock_mono_ns(), n = 0;
    for (int r = 0; r < rounds; r++) {
        size_t nb = 0;
        for (size_t off = 0; off < len;) {
            int32_t kind;
            memcpy(&kind, buf + off, 4);
            if (mon_record_from_mspti(buf + off, &batch[nb]) == 0 && ++nb == 256) {
                pipeline_deliver(pl, batch, nb); /* as mon_consume_buffer: per batch */
                nb = 0;
            }
            off += stride_of(kind);
            n++;
        }
        pipeline_deliver(pl, batch, nb);
    }
    uint64_t t1 = clock_mono_ns();
    proc_metric_ops.stop(p, NULL);
    pipeline_destroy(pl);
    filter_state_destroy(fs);
    return (double)n / ((double)(t1 - t0) / 1e9);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 50;
    size_t cap = BUF_RECS * sizeof(msptiActivityKernel);
    unsigned char *buf = aligned_alloc(8, cap);
    size_t len = 0;
    for (size_t i = 0; i < BUF_RECS; i++) {
        if (i % 4 == 3) {
            msptiActivityApi a = { .kind = 3, .start = i, .end = i + 50, .pt = { 1, 2 }, .correlationId = i,
                                   .name = "aclnnMatmul" };
            memcpy(buf + len, &a, sizeof(a));
            len += sizeof(a);
        } else {
            msptiActivityKernel k = { .kind = 2, .start = i, .end = i + 100, .ds = { (uint32_t)(i % 2), 1 },
                                      .correlationId = i, .type = "KERNEL_AICORE", .name = names[i % NNAMES] };
            memcpy(buf + len, &k, sizeof(k));
            len += sizeof(k);
        }
    }
    log_set_level(LOG_LVL_ERROR);
    printf("ingest (convert+filter+metric aggregate), %d x %d records, 1 thread\n", rounds, BUF_RECS);
    printf("  empty filter     : %.1f M records/s\n", run(buf, len, "", rounds) / 1e6);
    printf("  10-item filter   : %.1f M records/s\n",
           run(buf, len, "Kernel:MatMul,Conv2D,Softmax,Gelu,Cast,Foo,Bar,Baz;API:aclnnMatmul,aclnnAdd", rounds) / 1e6);
    free(buf);
    return 0;
}
