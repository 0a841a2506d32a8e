/* mssim-train: runs the simulator's built-in transformer workload (docs/design/mspti.md#workload) on machines
 * without an NPU; with --with-plugin it dlopens libmsmonitor.so and, when asked to through
 * MSMONITOR_USE_DAEMON=1 MSMONITOR_NATIVE_POLL=1, runs the plugin's native poller. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/strutil.h"
#include "msmon/mssim.h"

struct opts {
    struct mssim_workload_cfg cfg;
    const char *plugin;
    const char *ready_file;
};

enum flag_type { F_U32, F_DOUBLE, F_OFF, F_PATH, F_HELP, F_WORD };
struct flag {
    const char *name;
    enum flag_type type;
    const char *help;
};
/* One sorted table drives parsing and --help. */
static const struct flag flags[] = {
    {"--device", F_U32, "device id of the workload (default: LOCAL_RANK, RANK % MSSIM_DEVICES, 0)"},
    {"--fabric-dir", F_PATH, "synchronise the all-reduce with the job's other ranks through this shared directory "
                             "(MSSIM_FABRIC_DIR; world size WORLD_SIZE; docs/simulator.md)"},
    {"--help", F_HELP, "print this help"},
    {"--layers", F_U32, "transformer layers, at most 1024 (default 4)"},
    {"--no-comm", F_OFF, "do not emit the gradient all-reduce"},
    {"--no-markers", F_OFF, "do not emit the \"step <n>\" mstx ranges"},
    {"--rate", F_DOUBLE, "steps per second (default 5; 0 = as fast as possible)"},
    {"--ready-file", F_PATH, "create this file once the plugin/poller is started"},
    {"--scale", F_DOUBLE, "multiply every duration (default 1)"},
    {"--slow-factor", F_DOUBLE, "duration factor of the slow rank's slow part, > 0 (default 1)"},
    {"--slow-from-step", F_U32, "first slow step, counted from 1 (default 1)"},
    {"--slow-kind", F_WORD, "compute | communication | host (default compute)"},
    {"--slow-rank", F_U32, "this rank (RANK) is slow; see docs/cluster.md (default: none)"},
    {"--steps", F_U32, "steps to run (default 10; 0 = until SIGTERM/SIGINT)"},
    {"--with-plugin", F_PATH, "dlopen this libmsmonitor.so before running"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: mssim-train [flags]\n"
               "Runs a synthetic transformer training step against the msPTI SIMULATOR (libmspti.so test\n"
               "double for machines without an Ascend NPU). No NPU and no CANN are used.\n\nflags:\n");
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        const char *arg = flags[i].type == F_U32 ? " N" : flags[i].type == F_DOUBLE ? " X"
                          : flags[i].type == F_PATH ? " PATH" : flags[i].type == F_WORD ? " WORD" : "";
        fprintf(f, "  %s%s\n      %s\n", flags[i].name, arg, flags[i].help);
    }
}

static int apply(struct opts *o, const char *name, const char *val)
{
    uint32_t u = 0;
    double d = 0;
    if (strcmp(name, "--steps") == 0 || strcmp(name, "--layers") == 0 || strcmp(name, "--device") == 0) {
        if (str_to_u32(val, &u) != 0 || (name[2] == 'l' && u > 1024))
            goto bad;
        if (name[2] == 's')
            o->cfg.steps = u;
        else if (name[2] == 'l')
            o->cfg.layers = u;
        else
            o->cfg.device = u;
    } else if (strcmp(name, "--rate") == 0 || strcmp(name, "--scale") == 0) {
        if (str_to_double(val, &d) != 0 || d < 0)
            goto bad;
        if (name[2] == 'r')
            o->cfg.steps_per_s = d;
        else
            o->cfg.kernel_scale = d;
    } else if (strcmp(name, "--slow-rank") == 0 || strcmp(name, "--slow-from-step") == 0) {
        if (str_to_u32(val, &u) != 0 || (name[7] == 'r' && u > INT32_MAX))
            goto bad;
        if (name[7] == 'r')
            o->cfg.slow_rank = (int32_t)u;
        else
            o->cfg.slow_from_step = u;
    } else if (strcmp(name, "--slow-factor") == 0) {
        if (str_to_double(val, &d) != 0 || !(d > 0) || d > 1e6)
            goto bad;
        o->cfg.slow_factor = d;
    } else if (strcmp(name, "--slow-kind") == 0) {
        int k = mssim_slow_kind_from_name(val);
        if (k < 0)
            goto bad;
        o->cfg.slow_kind = k;
    } else if (strcmp(name, "--with-plugin") == 0) {
        o->plugin = val;
    } else if (strcmp(name, "--fabric-dir") == 0) {
        /* read by the simulator at the first collective */
        if (!*val || setenv("MSSIM_FABRIC_DIR", val, 1) != 0)
            goto bad;
    } else if (strcmp(name, "--ready-file") == 0) {
        o->ready_file = val;
    }
    return 0;
bad:
    fprintf(stderr, "mssim-train: invalid value for %s: '%s'\n", name, val);
    return -EINVAL;
}

/* 0 = run, 1 = help printed, <0 = error. */
static int parse(struct opts *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        const struct flag *f = NULL;
        for (size_t j = 0; j < sizeof(flags) / sizeof(flags[0]); j++) {
            if (strlen(flags[j].name) == nlen && strncmp(flags[j].name, a, nlen) == 0)
                f = &flags[j];
        }
        if (!f) {
            fprintf(stderr, "mssim-train: unknown flag '%s' (see --help)\n", a);
            return -EINVAL;
        }
        if (f->type == F_HELP) {
            usage(stdout);
            return 1;
        }
        if (f->type == F_OFF) {
            if (eq) {
                fprintf(stderr, "mssim-train: flag %s takes no value\n", f->name);
                return -EINVAL;
            }
            if (strcmp(f->name, "--no-comm") == 0)
                o->cfg.comm = 0;
            else
                o->cfg.step_markers = 0;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) {
            fprintf(stderr, "mssim-train: flag %s needs a value\n", f->name);
            return -EINVAL;
        }
        char name[32];
        snprintf(name, sizeof(name), "%.*s", (int)nlen, a);
        if (apply(o, name, val) != 0)
            return -EINVAL;
    }
    return 0;
}

static void on_signal(int sig)
{
    (void)sig;
    mssim_workload_stop();
}

static int touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "mssim-train: cannot create ready file '%s': %s\n", path, strerror(errno));
        return -errno;
    }
    close(fd);
    return 0;
}

static bool env_is_1(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "1") == 0;
}

int main(int argc, char **argv)
{
    struct opts o = {0};
    void *plugin = NULL;
    void (*poll_stop)(void) = NULL;
    void (*finalize)(void) = NULL;
    int rc = 2, steps;

    if (mssim_workload_default(&o.cfg) != 0)
        return 2;
    int p = parse(&o, argc, argv);
    if (p != 0)
        return p > 0 ? 0 : 2;

    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    if (o.plugin) {
        plugin = dlopen(o.plugin, RTLD_NOW | RTLD_GLOBAL);
        if (!plugin) {
            fprintf(stderr, "mssim-train: cannot load plugin '%s': %s\n", o.plugin, dlerror());
            goto out;
        }
        int (*poll_start)(void) = (int (*)(void))dlsym(plugin, "msmon_native_poll_start");
        poll_stop = (void (*)(void))dlsym(plugin, "msmon_native_poll_stop");
        finalize = (void (*)(void))dlsym(plugin, "msmon_finalize");
        if (poll_start && env_is_1("MSMONITOR_USE_DAEMON") && env_is_1("MSMONITOR_NATIVE_POLL")) {
            int prc = poll_start();
            if (prc != 0)
                fprintf(stderr, "mssim-train: msmon_native_poll_start failed: %d\n", prc);
        }
    }
    if (o.ready_file && touch(o.ready_file) != 0)
        goto out_plugin;

    fprintf(stderr, "mssim-train: msPTI simulator workload (no NPU): %u steps, %u layers, device %u\n",
            o.cfg.steps, o.cfg.layers, o.cfg.device);
    steps = mssim_workload_run(&o.cfg);
    if (steps < 0) {
        /* Flags are range-checked while parsing; the device is the one left to the simulator. */
        fprintf(stderr, "mssim-train: invalid value for --device: '%u' (not below MSSIM_DEVICES)\n", o.cfg.device);
        goto out_plugin;
    }
    fprintf(stderr, "mssim-train: done, %d steps\n", steps);
    rc = 0;
out_plugin:
    if (poll_stop)
        poll_stop();
    if (finalize)
        finalize();
    /* The plugin is not dlclosed: its threads and atexit handlers may still reference it. */
out:
    return rc;
}
