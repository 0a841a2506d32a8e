/* sim_env: the simulator's knobs (MSSIM_* environment, spec docs/design/mspti.md#knobs), strictly validated, and
 * its "[mssim]" stderr logger. Every line says it comes from a simulator (no NPU involved). */
#ifndef MSMON_SIM_ENV_H
#define MSMON_SIM_ENV_H

#include <stdbool.h>
#include <stdint.h>

enum sim_profile { SIM_P80 = 0, SIM_P81, SIM_P82, SIM_P260, SIM_P261 };
enum sim_lvl { SIM_DEBUG = 0, SIM_INFO, SIM_WARN, SIM_ERROR, SIM_OFF };

struct sim_knobs {
    enum sim_profile profile;
    int max_kind;              /* highest kind the profile knows */
    bool check_preload;        /* MSSIM_CHECK_PRELOAD */
    bool preload_ok;           /* LD_PRELOAD contains libmspti.so */
    bool getnext_cursor;       /* MSSIM_GETNEXT: cursor (true) or pointer */
    bool null_completions;     /* MSSIM_NULL_COMPLETIONS */
    uint64_t buffer_limit;     /* 0 = unset */
    uint64_t drop_every;
    double drop_rate;
    uint64_t seed;
    uint64_t device_lag_ns;
    uint64_t launch_latency_ns;
    uint64_t api_overhead_ns;
    uint64_t wake_ms;
    uint32_t devices;
    enum sim_lvl log_level;
    char dump_path[4096];      /* "" = off */
};

/* Read every knob from the environment; a bad value is logged once, naming the variable and
 * the value, and its default is used. */
void sim_knobs_load(struct sim_knobs *k);

/* Kind enabled by the profile (1..max_kind). */
static inline bool sim_kind_in_profile(const struct sim_knobs *k, int kind)
{
    return kind >= 1 && kind <= k->max_kind;
}

void sim_log_set_level(enum sim_lvl lvl);
void sim_log(enum sim_lvl lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
