/* dyn_rank: a non-Python training rank for the end-to-end test of the dyno-mode C API. The
 * simulator's built-in workload (MSSIM_WL_* env) runs with its own step markers off; the
 * rank calls msmon_dynamic_init() once and msmon_dynamic_step() after every step, so the
 * `step <N>` ranges come from libmsmonitor. SIGTERM/SIGINT end the run normally, so the
 * atexit clean-up (session stop, poller join, segment unlink) runs. DYN_RANK_NO_STEP=1: the
 * rank never calls msmon_dynamic_step() (a loop whose step source is missing). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "msmon/msmonitor.h"
#include "msmon/mssim.h"

static void dyn_rank_on_step(uint32_t step, void *arg)
{
    (void)step;
    if (!*(const int *)arg)
        (void)msmon_dynamic_step();
}

static void dyn_rank_on_signal(int sig)
{
    (void)sig;
    mssim_workload_stop(); /* async-signal-safe */
}

int main(void)
{
    struct mssim_workload_cfg cfg;
    struct sigaction sa;
    int rc, steps;
    const char *no_step = getenv("DYN_RANK_NO_STEP");
    static int skip;

    setvbuf(stdout, NULL, _IOLBF, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = dyn_rank_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (mssim_workload_default(&cfg) != 0) {
        fprintf(stderr, "dyn_rank: bad MSSIM_WL_* environment\n");
        return 2;
    }
    cfg.step_markers = 0;
    skip = no_step && no_step[0] == '1';
    cfg.on_step_end = dyn_rank_on_step;
    cfg.arg = &skip;
    rc = msmon_dynamic_init();
    printf("dyn_rank: pid %d init %d\n", (int)getpid(), rc);
    steps = mssim_workload_run(&cfg);
    printf("dyn_rank: finished %d steps\n", steps);
    return steps < 0 ? 1 : 0;
}
