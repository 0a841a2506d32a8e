/* sim_workload: the built-in synthetic transformer training step (docs/design/mspti.md#workload) driven through
 * the public mssim_* API, so its records take exactly the paths a test's records take. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/strutil.h"
#include "contract/names.h"
#include "sim/sim_core.h"
#include "sim/sim_dev.h"
#include "sim/sim_fabric.h"

#define MIB (1024ull * 1024ull)

static volatile sig_atomic_t g_stop;

struct kern {
    const char *name, *api, *type;
    double us;
};

#define K(n, t, us) {n, "aclnn" n, t, us}
static const struct kern k_conv = K("Conv2D", "KERNEL_AICORE", 150);
static const struct kern k_layer_fwd[] = {
    K("LayerNorm", "KERNEL_AIVEC", 40), K("MatMul", "KERNEL_AICORE", 120), K("BatchMatMul", "KERNEL_AICORE", 90),
    K("Softmax", "KERNEL_AIVEC", 30), K("BatchMatMul", "KERNEL_AICORE", 90), K("MatMul", "KERNEL_AICORE", 100),
    K("Add", "KERNEL_AIVEC", 10), K("LayerNorm", "KERNEL_AIVEC", 40), K("MatMul", "KERNEL_AICORE", 200),
    K("Gelu", "KERNEL_AIVEC", 30), K("MatMul", "KERNEL_AICORE", 200), K("Add", "KERNEL_AIVEC", 10),
};
static const struct kern k_loss = K("SoftmaxCrossEntropyWithLogits", "KERNEL_AIVEC", 60);
static const struct kern k_layer_bwd[] = {
    K("MatMulBackward", "KERNEL_AICORE", 400), K("GeluGrad", "KERNEL_AIVEC", 30),
    K("MatMulBackward", "KERNEL_AICORE", 400), K("LayerNormGrad", "KERNEL_AIVEC", 50),
    K("MatMulBackward", "KERNEL_AICORE", 200), K("BatchMatMulBackward", "KERNEL_AICORE", 180),
    K("SoftmaxGrad", "KERNEL_AIVEC", 30), K("BatchMatMulBackward", "KERNEL_AICORE", 180),
    K("MatMulBackward", "KERNEL_AICORE", 240), K("LayerNormGrad", "KERNEL_AIVEC", 50),
    K("AddN", "KERNEL_AIVEC", 15),
};
static const struct kern k_conv_bwd = K("Conv2DBackpropFilter", "KERNEL_AICORE", 300);
static const struct kern k_adam = K("ApplyAdamW", "KERNEL_AIVEC", 150);
#undef K

#define NFWD (sizeof(k_layer_fwd) / sizeof(k_layer_fwd[0]))
#define NBWD (sizeof(k_layer_bwd) / sizeof(k_layer_bwd[0]))

SIM_EXPORT uint32_t mssim_workload_kernels_per_step(uint32_t layers)
{
    return 3 + layers * (uint32_t)(NFWD + NBWD + 1);
}

static void bad_env(const char *var, const char *val)
{
    sim_log(SIM_WARN, "invalid %s=\"%s\"; using the default", var, val);
}

static void env_u32(const char *var, uint32_t *dst, uint32_t max)
{
    const char *v = getenv(var);
    uint32_t x;
    if (!v)
        return;
    if (str_to_u32(v, &x) != 0 || x > max)
        bad_env(var, v);
    else
        *dst = x;
}

static void env_double(const char *var, double *dst, double min, double max)
{
    const char *v = getenv(var);
    double x;
    if (!v)
        return;
    if (str_to_decimal(v, &x) != 0 || x < min || x > max)
        bad_env(var, v);
    else
        *dst = x;
}

static void env_flag(const char *var, int *dst)
{
    const char *v = getenv(var);
    if (!v)
        return;
    if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)
        *dst = v[0] == '1';
    else
        bad_env(var, v);
}

SIM_EXPORT int mssim_workload_default(struct mssim_workload_cfg *cfg)
{
    sim_core_init();
    if (!cfg)
        return -EINVAL;
    uint32_t ndev = sim_knobs()->devices;
    memset(cfg, 0, sizeof(*cfg));
    cfg->steps = 10;
    cfg->steps_per_s = 5;
    cfg->layers = 4;
    cfg->kernel_scale = 1;
    cfg->comm = 1;
    cfg->step_markers = 1;
    uint32_t rank = 0;
    const char *lr = getenv("LOCAL_RANK"), *r = getenv("RANK");
    if (lr && str_to_u32(lr, &rank) == 0 && rank < ndev)
        cfg->device = rank;
    else if (r && str_to_u32(r, &rank) == 0)
        cfg->device = rank % ndev;
    env_u32("MSSIM_WL_DEVICE", &cfg->device, ndev - 1);
    env_u32("MSSIM_WL_STEPS", &cfg->steps, UINT32_MAX);
    env_double("MSSIM_WL_RATE", &cfg->steps_per_s, 0, 1e6);
    env_u32("MSSIM_WL_LAYERS", &cfg->layers, 1024);
    env_double("MSSIM_WL_KERNEL_SCALE", &cfg->kernel_scale, 0, 1e6);
    env_flag("MSSIM_WL_COMM", &cfg->comm);
    env_flag("MSSIM_WL_STEP_MARKERS", &cfg->step_markers);
    cfg->rank = -1;
    cfg->slow_rank = -1;
    cfg->slow_factor = 1;
    cfg->slow_from_step = 1;
    cfg->slow_kind = MSSIM_SLOW_COMPUTE;
    if (r && str_to_u32(r, &rank) == 0 && rank <= INT32_MAX)
        cfg->rank = (int32_t)rank;
    uint32_t u = 0;
    const char *v = getenv("MSSIM_WL_RANK");
    if (v && str_to_u32(v, &u) == 0 && u <= INT32_MAX)
        cfg->rank = (int32_t)u;
    else if (v)
        bad_env("MSSIM_WL_RANK", v);
    v = getenv("MSSIM_WL_SLOW_RANK");
    if (v && str_to_u32(v, &u) == 0 && u <= INT32_MAX)
        cfg->slow_rank = (int32_t)u;
    else if (v)
        bad_env("MSSIM_WL_SLOW_RANK", v);
    env_double("MSSIM_WL_SLOW_FACTOR", &cfg->slow_factor, 0, 1e6);
    env_u32("MSSIM_WL_SLOW_FROM_STEP", &cfg->slow_from_step, UINT32_MAX);
    v = getenv("MSSIM_WL_SLOW_KIND");
    if (v && mssim_slow_kind_from_name(v) >= 0)
        cfg->slow_kind = mssim_slow_kind_from_name(v);
    else if (v)
        bad_env("MSSIM_WL_SLOW_KIND", v);
    return 0;
}

SIM_EXPORT void mssim_workload_stop(void) { g_stop = 1; }

SIM_EXPORT int mssim_slow_kind_from_name(const char *name)
{
    if (!name)
        return -1;
    if (strcmp(name, "compute") == 0)
        return MSSIM_SLOW_COMPUTE;
    if (strcmp(name, "communication") == 0)
        return MSSIM_SLOW_COMMUNICATION;
    if (strcmp(name, "host") == 0)
        return MSSIM_SLOW_HOST;
    return -1;
}

/* kscale: the kernel's duration factor (a compute-slow rank's kernels run longer; its API
 * calls do not). */
static void launch_k(const struct kern *k, double scale, double kscale)
{
    uint64_t ns = (uint64_t)llround(k->us * 1000.0 * scale * kscale);
    mssim_api(k->api, MSSIM_LEVEL_ACL, (uint64_t)llround(3000.0 * scale));
    mssim_launch_kernel(0, k->name, k->type, ns);
}

/* Nominal device time of one step in ns (kernels + the all-reduce), for the host stall. */
static double step_device_ns(const struct mssim_workload_cfg *cfg)
{
    double us = k_conv.us + k_loss.us + k_conv_bwd.us + cfg->layers * k_adam.us;
    for (size_t i = 0; i < NFWD; i++)
        us += cfg->layers * k_layer_fwd[i].us;
    for (size_t i = 0; i < NBWD; i++)
        us += cfg->layers * k_layer_bwd[i].us;
    if (cfg->comm)
        us += 2000.0;
    return us * 1000.0 * cfg->kernel_scale;
}

static void host_stall(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && !g_stop)
        ;
}

static void one_step(const struct mssim_workload_cfg *cfg, uint32_t n)
{
    char label[32];
    uint64_t range = 0, addr = 0;
    double s = cfg->kernel_scale;
    bool slow = cfg->slow_rank >= 0 && cfg->rank == cfg->slow_rank && n >= cfg->slow_from_step &&
                cfg->slow_factor != 1;
    double kf = slow && cfg->slow_kind == MSSIM_SLOW_COMPUTE ? cfg->slow_factor : 1;
    double cf = slow && cfg->slow_kind == MSSIM_SLOW_COMMUNICATION ? cfg->slow_factor : 1;
#define launch(k, sc) launch_k((k), (sc), kf)
    if (cfg->step_markers) {
        if (names_step_format(label, sizeof(label), n) == 0)
            range = mssim_mstx_range_start(label, 0);
    }
    mssim_malloc(16 * MIB, &addr);
    mssim_memcpy(0, MSPTI_ACTIVITY_MEMCPY_KIND_HTOD, 4 * MIB);
    launch(&k_conv, s);
    for (uint32_t l = 0; l < cfg->layers; l++)
        for (size_t i = 0; i < NFWD; i++)
            launch(&k_layer_fwd[i], s);
    launch(&k_loss, s);
    if (slow && cfg->slow_kind == MSSIM_SLOW_HOST && cfg->slow_factor > 1) {
        /* a host-side stall (data loading, Python) while the device has nothing to do */
        mssim_synchronize((int32_t)cfg->device);
        host_stall((uint64_t)llround((cfg->slow_factor - 1) * step_device_ns(cfg)));
    }
    for (uint32_t l = 0; l < cfg->layers; l++)
        for (size_t i = 0; i < NBWD; i++)
            launch(&k_layer_bwd[i], s);
    launch(&k_conv_bwd, s);
    if (cfg->comm) {
        sim_dev_stream_wait(cfg->device, 1, 0);
        mssim_collective(1, "HcclAllReduce", "hccl_world_group", "RING", MSPTI_ACTIVITY_COMMUNICATION_FP32,
                         16777216, 64 * MIB, (uint64_t)llround(2000000.0 * s * cf));
        /* the optimizer needs the reduced gradients */
        sim_dev_stream_wait(cfg->device, 0, 1);
    }
    for (uint32_t l = 0; l < cfg->layers; l++)
        launch(&k_adam, s);
    mssim_memset(0, 0, 64 * MIB);
    mssim_free(addr);
    if (range)
        mssim_mstx_range_end(range);
    mssim_synchronize((int32_t)cfg->device);
#undef launch
}

/* Sleep until the realtime deadline, waking early when asked to stop. */
static void sleep_until(uint64_t deadline)
{
    while (!g_stop) {
        uint64_t now = mssim_now_ns();
        if (now >= deadline)
            return;
        uint64_t left = deadline - now;
        if (left > 20000000ull)
            left = 20000000ull;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)left};
        nanosleep(&ts, NULL);
    }
}

SIM_EXPORT int mssim_workload_run(const struct mssim_workload_cfg *cfg)
{
    sim_core_init();
    if (!cfg || cfg->layers > 1024 || cfg->kernel_scale < 0 || !isfinite(cfg->kernel_scale) ||
        cfg->steps_per_s < 0 || !isfinite(cfg->steps_per_s) || !(cfg->slow_factor > 0) ||
        !isfinite(cfg->slow_factor) || cfg->slow_kind < MSSIM_SLOW_COMPUTE || cfg->slow_kind > MSSIM_SLOW_HOST)
        return -EINVAL;
    if (mssim_set_device(cfg->device) != 0)
        return -EINVAL;
    uint32_t done = 0;
    sim_log(SIM_INFO, "workload: %u steps, %u layers, device %u", cfg->steps, cfg->layers, cfg->device);
    if (cfg->slow_rank >= 0 && cfg->rank == cfg->slow_rank)
        sim_log(SIM_INFO, "workload: this rank (%d) is slow: %s x%g from step %u", (int)cfg->rank,
                cfg->slow_kind == MSSIM_SLOW_COMPUTE ? "compute"
                : cfg->slow_kind == MSSIM_SLOW_COMMUNICATION ? "communication" : "host",
                cfg->slow_factor, cfg->slow_from_step);
    while (!g_stop && (cfg->steps == 0 || done < cfg->steps)) {
        /* Pace from this step's start: a step (or hook) that overran starts the next one at
         * once, without a burst of catch-up steps after it (docs/design/mspti.md#workload item 9). */
        uint64_t step_start = mssim_now_ns();
        one_step(cfg, done + 1);
        done++;
        if (cfg->on_step_end)
            cfg->on_step_end(done, cfg->arg);
        if (cfg->steps_per_s > 0 && sim_fabric_on()) {
            /* Synchronised ranks pace to one wall-clock grid: their steps end together, so
             * they all start the next one at the same tick, as a real job's ranks would. */
            uint64_t period = (uint64_t)(1e9 / cfg->steps_per_s);
            if (period > 0)
                sleep_until((mssim_now_ns() / period + 1) * period);
        } else if (cfg->steps_per_s > 0) {
            sleep_until(step_start + (uint64_t)(1e9 / cfg->steps_per_s));
        }
    }
    g_stop = 0;
    return (int)(done > INT32_MAX ? INT32_MAX : done);
}
