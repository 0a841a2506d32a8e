/* mssim-cuda-app: an unmodified "CUDA" program over the simulated runtime: it knows nothing
 * of msmonitor; the plugin arrives through CUDA_INJECTION64_PATH at cuInit. Step N (1..) is
 * an NVTX range named `step N` (what annotated training loops emit; nputrace windows of a
 * program without a step call follow these ranges) with three kernels, an async HtoD copy, a
 * memset, an NCCL all-reduce kernel and an NVTX mark. --ready-file is written after cuInit;
 * --go-file (if given) is awaited before the first step so a test can start collection
 * first; --hold N:FILE (repeatable; N = steps + 1: before exit) waits for FILE before step N. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "msmon/mssim_cupti.h"

#define APP_MAX_HOLDS 8

static void touch(const char *path)
{
    FILE *f = path ? fopen(path, "w") : NULL;
    if (f)
        fclose(f);
}

/* Wait for path to exist (60 s at most). 0 or -1. */
static int await_file(const char *path)
{
    for (int w = 0; access(path, F_OK) != 0; w++) {
        if (w > 60000)
            return -1;
        usleep(1000);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *ready = NULL, *go = NULL;
    const char *hold_file[APP_MAX_HOLDS];
    long hold_step[APP_MAX_HOLDS];
    int nholds = 0;
    long steps = 20;
    double rate = 50;
    uint64_t addr = 0;
    char(*names)[24];

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--steps") == 0)
            steps = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--rate") == 0)
            rate = strtod(argv[i + 1], NULL);
        else if (strcmp(argv[i], "--ready-file") == 0)
            ready = argv[i + 1];
        else if (strcmp(argv[i], "--go-file") == 0)
            go = argv[i + 1];
        else if (strcmp(argv[i], "--hold") == 0 && nholds < APP_MAX_HOLDS && strchr(argv[i + 1], ':')) {
            char *end;
            hold_step[nholds] = strtol(argv[i + 1], &end, 10);
            if (*end != ':' || hold_step[nholds] < 1) {
                fprintf(stderr, "%s: --hold '%s': expected STEP:FILE with STEP >= 1\n", argv[0], argv[i + 1]);
                return 2;
            }
            hold_file[nholds++] = end + 1;
        } else {
            fprintf(stderr, "usage: %s [--steps N] [--rate steps/s] [--ready-file F] [--go-file F] "
                    "[--hold STEP:FILE]...\n", argv[0]);
            return 2;
        }
    }
    if (steps < 0 || steps > 1000000) {
        fprintf(stderr, "%s: --steps %ld out of range (0..1000000)\n", argv[0], steps);
        return 2;
    }
    /* The marker names must live as long as the process: CUPTI hands the pointer on. */
    names = calloc((size_t)steps + 1, sizeof(*names));
    if (!names)
        return 1;
    cuInit(0);
    touch(ready);
    if (go && await_file(go) != 0)
        return 3;
    mssimc_malloc(0, 1 << 20, &addr);
    for (long s = 1; s <= steps + 1; s++) {
        uint32_t r;
        for (int h = 0; h < nholds; h++)
            if (hold_step[h] == s && await_file(hold_file[h]) != 0)
                return 3;
        if (s > steps)
            break;
        snprintf(names[s], sizeof(names[s]), "step %ld", s);
        r = mssimc_nvtx_range_start(names[s], NULL);
        mssimc_kernel(0, 7, "gemm_fwd", 20000);
        mssimc_kernel(0, 7, "softmax", 5000);
        mssimc_kernel(0, 7, "gemm_bwd", 30000);
        mssimc_memcpy(0, 7, 1 /* HtoD */, 1 << 20, 1);
        mssimc_memset(0, 7, 0, 4096, 0);
        mssimc_kernel(0, 9, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 50000);
        mssimc_nvtx_mark("iter", "app");
        mssimc_nvtx_range_end(r);
        if (rate > 0)
            usleep((useconds_t)(1e6 / rate));
    }
    mssimc_free(0, addr, 1 << 20);
    return 0;
}
