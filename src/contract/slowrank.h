/* slowrank: the one slow-rank rule (docs/cluster.md §4), shared by `dyno steps`, the
 * extension behind the HTML report and the benchmark. Pure: ranks' step windows in, the
 * judged range, step-time figures and the slow ranks (cause, onset, job-wide cost) out. */
#ifndef MSMON_CONTRACT_SLOWRANK_H
#define MSMON_CONTRACT_SLOWRANK_H

#include <stddef.h>
#include <stdint.h>

/* One step of one rank (ns). comm = wait + transfer; wait 0 and transfer = comm where the
 * backend does not split the collectives. */
struct slowrank_sample {
    int64_t step;
    uint64_t wall, compute, comm, memcpy, host, wait, transfer;
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
                           rule) or median wall less wait (compute, host, transfer) ... */
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

struct slowrank_slow {
    size_t rank_index;   /* into the input */
    int64_t since_step;  /* first step of the slow run */
    int64_t last_step;
    uint32_t run;        /* slow steps in the run */
    double ratio;        /* mean over the run of wall / step median */
    enum slowrank_cause cause;
    double excess_ms[3]; /* mean excess over the step medians: compute(+memcpy), transfer, host */
    double cost_ms;      /* mean job-wide cost per step: what the others wait for it, or its own
                            wall excess where nobody waits; over the run's steps that every rank
                            has reported (all of the run when none has) */
    int64_t cost_last_step; /* the cost covers since_step .. this step */
};

struct slowrank_result {
    size_t ranks, judged_steps;
    int64_t first_step, last_step; /* of the judged steps; -1 when none */
    double median_ms, p99_ms, max_ms;
    struct slowrank_slow *slow; /* free with slowrank_result_fini() */
    size_t nslow;
};

/* Merge the ranks' windows and apply the rule. 0, -EINVAL or -ENOMEM. */
int slowrank_merge(const struct slowrank_in *in, size_t n, const struct slowrank_rule *rule,
                   struct slowrank_result *ret);
void slowrank_result_fini(struct slowrank_result *r);

#endif
