/* health: what this process tells the daemon about itself every poll period (PluginHealth,
 * ours): its rank, last step and how long ago, whether a step came since the last config,
 * and the backend it chose with what was searched when msPTI was not found. The daemon turns
 * it into status marks (docs/daemon.md "Live health"). Thread-safe. */
#ifndef MSMON_PLUGIN_HEALTH_H
#define MSMON_PLUGIN_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "contract/datamsg.h"
#include "contract/podid.h"

#define HEALTH_KIND DATAMSG_PLUGIN_HEALTH
#define HEALTH_JOB_CAP 24

struct health_snapshot {
    int32_t pid, rank;
    const char *mode;             /* "dyno" (step() drives configs) or "native" */
    int32_t step;                 /* last step seen, -1 none */
    int64_t step_age_ms;          /* -1: no step yet */
    int64_t step_period_ms;       /* between the last two steps, -1 before two */
    int64_t config_age_ms;        /* since the last config reached this process, -1 none */
    uint64_t steps;               /* steps seen in total */
    uint64_t steps_since_config;
    const char *backend;          /* "mspti", "cupti", "" when none could be loaded */
    const char *library;          /* "" when none */
    const char *fallback;         /* why the backend is not msPTI ("" when it is, or was pinned) */
    char job[HEALTH_JOB_CAP];     /* dyno mode: the job key of its segment ("" otherwise): the daemon
                                   * groups a job's ranks by it to take each rank's acknowledgement */
    struct podid_self pod;        /* what it says about its pod (docs/deploy.md#attribution); zero: nothing */
};

/* The process's mode and rank, once (shm_mode_init / the native poller). */
void health_set_identity(const char *mode, int32_t rank);
/* Dyno mode: the job key (job_key_of), once. */
void health_set_job(const char *key);
/* The rank health_set_identity gave (-1 before): what `dyno status` shows and every
 * acknowledgement carries. */
int32_t health_rank(void);
/* A step() of the training loop, from one thread at a time (dyno mode's lock). Cheap: one
 * clock read and relaxed stores. Returns that clock reading (CLOCK_MONOTONIC ns), for the
 * caller's own timing of the same step. */
uint64_t health_note_step(int32_t step);
/* A config reached this process (received by its poller). */
void health_note_config(void);
/* Dyno mode: the segment's publish time (wall seconds, 0 = empty). A new value counts as a
 * config reaching this rank at that time, so a rank that never steps still shows its age. */
void health_note_segment(uint32_t published_s);
/* What this process says about its pod: the downward-API variables (read once, penv) and its
 * hostname, by the contract's rules (contract/podid.h). */
void health_pod(struct podid_self *ret);
/* Current values; backend strings borrowed for the process's life, the fallback note copied
 * into note (HEALTH_NOTE_CAP bytes suffice). */
#define HEALTH_NOTE_CAP 1024
void health_snapshot(struct health_snapshot *ret, uint64_t now_mono_ns, char *note, size_t notecap);
/* The `data` payload: the upstream keys every daemon accepts plus ours. Pure; returns the
 * length, 0 if cap is too small. */
size_t health_json(const struct health_snapshot *s, uint64_t now_real_ns, char *buf, size_t cap);
/* Build and send one report: one attempt, never kept for later (the next one replaces it). */
int health_send(void);
/* A thread that calls tick() (may be NULL) and sends a report every period_s: every dyno-mode
 * rank, creator or not, so the daemon lists each of them. Idempotent; 0 or -errno. */
int health_reporter_start(double period_s, void (*tick)(void));
void health_reporter_stop(void);

#endif
