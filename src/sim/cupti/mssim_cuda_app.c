/* mssim-cuda-app: an unmodified "CUDA" program over the simulated runtime: it knows nothing
 * of msmonitor; the plugin arrives through CUDA_INJECTION64_PATH at cuInit. Each step is an
 * NVTX range with three kernels, an async HtoD copy, a memset, an NCCL all-reduce kernel and
 * an NVTX mark. --ready-file is written after cuInit; --go-file (if given) is awaited before
 * the first step so a test can start collection first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "msmon/mssim_cupti.h"

static void touch(const char *path)
{
    FILE *f = path ? fopen(path, "w") : NULL;
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    const char *ready = NULL, *go = NULL;
    long steps = 20;
    double rate = 50;
    uint64_t addr = 0;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--steps") == 0)
            steps = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--rate") == 0)
            rate = strtod(argv[i + 1], NULL);
        else if (strcmp(argv[i], "--ready-file") == 0)
            ready = argv[i + 1];
        else if (strcmp(argv[i], "--go-file") == 0)
            go = argv[i + 1];
        else {
            fprintf(stderr, "usage: %s [--steps N] [--rate steps/s] [--ready-file F] [--go-file F]\n", argv[0]);
            return 2;
        }
    }
    cuInit(0);
    touch(ready);
    for (int w = 0; go && access(go, F_OK) != 0; w++) {
        if (w > 60000) /* 60 s */
            return 3;
        usleep(1000);
    }
    mssimc_malloc(0, 1 << 20, &addr);
    for (long s = 0; s < steps; s++) {
        uint32_t r = mssimc_nvtx_range_start("step", NULL);
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
