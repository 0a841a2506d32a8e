/* slowrank: the one slow-rank rule (docs/cluster.md §4), shared by `dyno steps`, the
 * extension behind the HTML report and the benchmark. Pure: ranks' step windows in, the
 * judged range, step-time figures, how the steps' communication was split, and the slow ranks
 * (cause, severity, onset, job-wide cost) out. */
#ifndef MSMON_CONTRACT_SLOWRANK_H
#define MSMON_CONTRACT_SLOWRANK_H

#include <stddef.h>
#include <stdint.h>

#include "contract/datamsg.h"

/* One step of one rank (ns). comm = wait + transfer. split MEASURED: wait and transfer come
 * from the records; otherwise (NONE, and INFERRED read as NONE) wait is 0 and transfer = comm,
 * and the merge infers the split from the other ranks of the step where it can. */
struct slowrank_sample {
    int64_t step;
    uint64_t wall, compute, comm, memcpy, host, wait, transfer;
    enum datamsg_split split;
};

struct slowrank_in {
    const char *host; /* borrowed */
    int32_t rank, pid;
    int64_t job;
    const struct slowrank_sample *s; /* ascending step order, borrowed */
    size_t n;
};

/* The rule's parameters (defaults: SLOWRANK_RULE_DEFAULT). */
struct slowrank_rule {
    double threshold;   /* an excess counts above threshold * the step's median wall (the wall
                           rule) or median wall less wait (compute, host, transfer: a straggler),
                           or above threshold * the component's own median (compute, transfer:
                           a fail-slow device) ... */
    double mad_k;       /* ... and above mad_k * 1.4826 * MAD of the same quantity */
    uint32_t min_steps; /* slow on this many consecutive judged steps, newest included */
    uint32_t min_ranks; /* a step is judged only when at least this many ranks have it */
};
#define SLOWRANK_RULE_DEFAULT { 0.10, 3.0, 3, 3 }

/* A run of slow steps is reported only when its job-wide cost (the others' extra wait, or its
 * own longer step) is at least this share of the excess named as the cause. */
#define SLOWRANK_WAIT_SHARE 0.25

enum slowrank_cause { SLOWRANK_COMPUTE = 0, SLOWRANK_COMMUNICATION, SLOWRANK_HOST };
const char *slowrank_cause_name(enum slowrank_cause c);

/* STRAGGLER: slows the job now (its excess is above the threshold of the step's own work, or
 * its wall above the median's); FAILSLOW: a slower device (its compute or transfer is above
 * the threshold of that component only: the step's other time hides most of it). */
enum slowrank_severity { SLOWRANK_STRAGGLER = 0, SLOWRANK_FAILSLOW };
const char *slowrank_severity_name(enum slowrank_severity s);

struct slowrank_slow {
    size_t rank_index;   /* into the input */
    int64_t since_step;  /* first step of the slow run */
    int64_t last_step;
    uint32_t run;        /* slow steps in the run */
    double ratio;        /* mean over the run of wall / step median */
    enum slowrank_cause cause;
    enum slowrank_severity severity; /* STRAGGLER when most of the run's steps are */
    enum datamsg_split split;        /* how most of the run's steps were split */
    double excess_ms[3]; /* mean excess over the step medians: compute(+memcpy), transfer, host */
    double cost_ms;      /* mean job-wide cost per step: what the others wait for it, or its own
                            wall excess where nobody waits; over the run's steps that every rank
                            has reported (all of the run when none has) */
    double cost_share;   /* cost_ms / the job's step time (mean over those steps of the median wall) */
    int64_t cost_last_step; /* the cost covers since_step .. this step */
};

struct slowrank_result {
    size_t ranks, judged_steps;
    int64_t first_step, last_step; /* of the judged steps; -1 when none */
    double median_ms, p99_ms, max_ms;
    size_t split[DATAMSG_SPLIT_COUNT]; /* the judged samples by how their split was obtained */
    struct slowrank_slow *slow; /* free with slowrank_result_fini() */
    size_t nslow;
};

/* Merge the ranks' windows and apply the rule. 0, -EINVAL or -ENOMEM. */
int slowrank_merge(const struct slowrank_in *in, size_t n, const struct slowrank_rule *rule,
                   struct slowrank_result *ret);
void slowrank_result_fini(struct slowrank_result *r);

#endif
