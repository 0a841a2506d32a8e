/* sim_env: parses the MSSIM_* knobs with the strict parsers of common/strutil and writes the
 * simulator's log lines ("[mssim] W msPTI simulator (no NPU): ..."), one write(2) per line. */
#include "sim/sim_env.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/strutil.h"

static _Atomic int g_log_level = SIM_WARN;

void sim_log_set_level(enum sim_lvl lvl) { atomic_store(&g_log_level, (int)lvl); }

void sim_log(enum sim_lvl lvl, const char *fmt, ...)
{
    static const char tag[] = "DIWE";
    char line[1024];
    if ((int)lvl < atomic_load(&g_log_level) || lvl >= SIM_OFF)
        return;
    int n = snprintf(line, sizeof(line), "[mssim] %c msPTI simulator (no NPU): ", tag[lvl]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : ((size_t)m < sizeof(line) - (size_t)n - 1 ? (size_t)m : sizeof(line) - (size_t)n - 2));
    line[len++] = '\n';
    ssize_t w = write(2, line, len);
    (void)w;
}

static void bad(const char *var, const char *val, const char *why)
{
    sim_log(SIM_WARN, "invalid %s=\"%s\" (%s); using the default", var, val, why);
}

/* Tri-state boolean: -1 when unset (or invalid, logged), else 0/1. */
static int env_bool(const char *var)
{
    const char *v = getenv(var);
    if (!v)
        return -1;
    if (strcmp(v, "1") == 0)
        return 1;
    if (strcmp(v, "0") == 0)
        return 0;
    bad(var, v, "expected 0 or 1");
    return -1;
}

static uint64_t env_u64(const char *var, uint64_t def, uint64_t min, uint64_t max)
{
    const char *v = getenv(var);
    uint64_t x;
    if (!v)
        return def;
    if (str_to_u64(v, &x) != 0 || x < min || x > max) {
        bad(var, v, "expected an unsigned integer in range");
        return def;
    }
    return x;
}

static void load_log(struct sim_knobs *k)
{
    static const struct { const char *name; enum sim_lvl lvl; } names[] = {
        {"debug", SIM_DEBUG}, {"info", SIM_INFO}, {"warning", SIM_WARN}, {"warn", SIM_WARN},
        {"error", SIM_ERROR}, {"off", SIM_OFF},
    };
    const char *v = getenv("MSSIM_LOG");
    k->log_level = SIM_WARN;
    if (v) {
        size_t i;
        for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            if (strcasecmp(v, names[i].name) == 0) {
                k->log_level = names[i].lvl;
                break;
            }
        }
        sim_log_set_level(k->log_level);
        if (i == sizeof(names) / sizeof(names[0]))
            bad("MSSIM_LOG", v, "expected debug, info, warning, error or off");
    }
    sim_log_set_level(k->log_level);
}

static void load_profile(struct sim_knobs *k)
{
    static const struct { const char *name; enum sim_profile p; int max_kind; } profiles[] = {
        {"8.0", SIM_P80, 3}, {"8.1", SIM_P81, 8}, {"8.2", SIM_P82, 9}, {"8.3", SIM_P82, 9},
        {"8.5", SIM_P82, 9}, {"26.0", SIM_P260, 12}, {"26.1", SIM_P261, 12},
    };
    const char *v = getenv("MSSIM_PROFILE");
    k->profile = SIM_P261;
    k->max_kind = 12;
    if (!v)
        return;
    for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++) {
        if (strcmp(v, profiles[i].name) == 0) {
            k->profile = profiles[i].p;
            k->max_kind = profiles[i].max_kind;
            return;
        }
    }
    bad("MSSIM_PROFILE", v, "expected 8.0, 8.1, 8.2, 8.3, 8.5, 26.0 or 26.1");
}

static void load_dump(struct sim_knobs *k)
{
    const char *v = getenv("MSSIM_DUMP");
    k->dump_path[0] = '\0';
    if (!v || !*v)
        return;
    size_t o = 0;
    for (const char *p = v; *p; p++) {
        char tmp[24];
        const char *src = p;
        size_t n = 1;
        if (p[0] == '%' && p[1] == 'p') {
            n = (size_t)snprintf(tmp, sizeof(tmp), "%d", (int)getpid());
            src = tmp;
            p++;
        }
        if (o + n >= sizeof(k->dump_path)) {
            bad("MSSIM_DUMP", v, "path too long");
            k->dump_path[0] = '\0';
            return;
        }
        memcpy(k->dump_path + o, src, n);
        o += n;
    }
    k->dump_path[o] = '\0';
}

void sim_knobs_load(struct sim_knobs *k)
{
    memset(k, 0, sizeof(*k));
    load_log(k);
    load_profile(k);

    int quirks = env_bool("MSSIM_QUIRKS");
    bool faithful = quirks != 0;
    int cp = env_bool("MSSIM_CHECK_PRELOAD");
    k->check_preload = cp < 0 ? faithful : cp == 1;
    int nc = env_bool("MSSIM_NULL_COMPLETIONS");
    k->null_completions = nc < 0 ? faithful : nc == 1;
    k->getnext_cursor = faithful;
    const char *g = getenv("MSSIM_GETNEXT");
    if (g) {
        if (strcmp(g, "cursor") == 0)
            k->getnext_cursor = true;
        else if (strcmp(g, "pointer") == 0)
            k->getnext_cursor = false;
        else
            bad("MSSIM_GETNEXT", g, "expected cursor or pointer");
    }
    const char *pre = getenv("LD_PRELOAD");
    k->preload_ok = pre && strstr(pre, "libmspti.so");

    k->buffer_limit = env_u64("MSSIM_BUFFER_LIMIT", 0, 1, UINT64_MAX);
    k->drop_every = env_u64("MSSIM_DROP_EVERY", 0, 0, UINT64_MAX);
    k->seed = env_u64("MSSIM_SEED", 1, 0, UINT64_MAX);
    k->drop_rate = 0;
    const char *dr = getenv("MSSIM_DROP_RATE");
    if (dr) {
        double x;
        if (str_to_decimal(dr, &x) != 0 || x < 0 || x > 1)
            bad("MSSIM_DROP_RATE", dr, "expected a decimal in [0, 1]");
        else
            k->drop_rate = x;
    }
    k->device_lag_ns = env_u64("MSSIM_DEVICE_LAG_MS", 0, 0, 3600000) * 1000000ull;
    k->launch_latency_ns = env_u64("MSSIM_LAUNCH_LATENCY_NS", 5000, 0, 1000000000ull);
    k->api_overhead_ns = env_u64("MSSIM_API_OVERHEAD_NS", 2000, 0, 1000000000ull);
    k->wake_ms = env_u64("MSSIM_WAKE_MS", 60000, 1, 86400000ull);
    k->devices = (uint32_t)env_u64("MSSIM_DEVICES", 8, 1, 1024);
    load_dump(k);
}
