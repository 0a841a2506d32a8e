/* mssim_cupti: driver API of our simulated CUPTI (src/sim/cupti), exported by its libcupti.so
 * next to the CUPTI activity subset the plugin uses, and the tiny simulated CUDA entry
 * (libmssim_cuda.so: cuInit with CUDA_INJECTION64_PATH handling). It exists so the CUPTI
 * backend can be tested end to end WITHOUT an NVIDIA GPU; it is never a production library.
 * Records are appended when the call is made, with the real CUDA 13 layouts (cupti_abi.h);
 * device work is timed on a simulated per-(device, stream) timeline. */
#ifndef MSMON_MSSIM_CUPTI_H
#define MSMON_MSSIM_CUPTI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSSIMC_API __attribute__((visibility("default")))

/* Runtime cbids our cuptiGetCallbackName names (the suffixes are the real ones). */
enum {
    MSSIMC_CBID_LAUNCH_KERNEL = 211,    /* cudaLaunchKernel_v7000 */
    MSSIMC_CBID_MEMCPY = 31,            /* cudaMemcpy_v3020 */
    MSSIMC_CBID_MEMCPY_ASYNC = 41,      /* cudaMemcpyAsync_v3020 */
    MSSIMC_CBID_MEMSET = 48,            /* cudaMemset_v3020 */
    MSSIMC_CBID_MALLOC = 20,            /* cudaMalloc_v3020 */
    MSSIMC_CBID_FREE = 22,              /* cudaFree_v3020 */
    MSSIMC_CBID_DEVICE_SYNCHRONIZE = 165, /* cudaDeviceSynchronize_v3020 */
};
enum { MSSIMC_CBID_DRV_LAUNCH_KERNEL = 307 /* cuLaunchKernel */ };

MSSIMC_API int mssimc_is_simulator(void);  /* always 1 */
MSSIMC_API uint64_t mssimc_now_ns(void);   /* CLOCK_REALTIME ns, CUPTI's Linux default */

/* Host API record [now, now + duration_ns] (domain 1 driver, 2 runtime) with a new
 * correlation id, returned (0 when the kind is off). */
MSSIMC_API uint32_t mssimc_api(int domain, uint32_t cbid, uint64_t duration_ns);
/* Runtime cudaLaunchKernel + a CONCURRENT_KERNEL record of duration_ns on (device, stream),
 * sharing one correlation id (returned). NCCL kernels are kernels with NCCL's names. */
MSSIMC_API uint32_t mssimc_kernel(uint32_t device, uint32_t stream, const char *name, uint64_t duration_ns);
/* cudaMemcpy(Async) + MEMCPY record; copy_kind is CUPTI's (1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH);
 * the device time is bytes / 10 GB/s. */
MSSIMC_API uint32_t mssimc_memcpy(uint32_t device, uint32_t stream, int copy_kind, uint64_t bytes, int async);
MSSIMC_API uint32_t mssimc_memset(uint32_t device, uint32_t stream, uint32_t value, uint64_t bytes, int async);
/* cudaMalloc / cudaFree + MEMORY2 records (device memory). */
MSSIMC_API uint32_t mssimc_malloc(uint32_t device, uint64_t bytes, uint64_t *ret_address);
MSSIMC_API uint32_t mssimc_free(uint32_t device, uint64_t address, uint64_t bytes);
/* NVTX through CUPTI (MARKER records, thread objects); domain NULL = default. */
MSSIMC_API uint32_t mssimc_nvtx_mark(const char *name, const char *domain);
MSSIMC_API uint32_t mssimc_nvtx_range_start(const char *name, const char *domain);
MSSIMC_API void mssimc_nvtx_range_end(uint32_t id);

/* Test knobs: records CUPTI "dropped" (reported by cuptiActivityGetNumDroppedRecords), the
 * version cuptiGetVersion reports (default 130001: declining a buffer is allowed). */
MSSIMC_API void mssimc_add_dropped(uint64_t n);
MSSIMC_API void mssimc_set_version(uint32_t v);

struct mssimc_stats {
    uint64_t appended, dropped_declined, dropped_injected, buffers_requested, buffers_completed;
};
MSSIMC_API void mssimc_get_stats(struct mssimc_stats *ret);
/* Benchmark producer: n records through the real buffer path, alternating kernels (names
 * cycling over 8, one an NCCL kernel) and runtime API records, no dump. Returns the number
 * appended (only enabled kinds are). */
MSSIMC_API int64_t mssimc_bench_fill(uint64_t n);

/* ---- libmssim_cuda.so: the simulated CUDA entry ---- */
/* First call: if CUDA_INJECTION64_PATH names a library, dlopen it and call its
 * `int InitializeInjection(void)`, as the CUDA driver does. Always 0 (CUDA_SUCCESS). */
MSSIMC_API int cuInit(unsigned int flags);

#ifdef __cplusplus
}
#endif
#endif
