/* cmd_steps: `dyno steps` — the merged step view of many hosts and the slow-rank rule
 * (docs/cluster.md §4). The merge is pure (steps_merge) so the unit tests and the benchmark
 * run it on fixed inputs. */
#ifndef MSMON_CLI_CMD_STEPS_H
#define MSMON_CLI_CMD_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* One step of one rank (ns). */
struct steps_sample {
    int64_t step;
    uint64_t wall, compute, comm, memcpy, host;
};

struct steps_in_rank {
    const char *host; /* borrowed */
    int32_t rank, pid;
    int64_t job;
    const struct steps_sample *s; /* ascending step order, borrowed */
    size_t n;
};

/* The rule's parameters (defaults: STEPS_RULE_DEFAULT). */
struct steps_rule {
    double threshold;   /* slow when wall > median * (1 + threshold) ... */
    double mad_k;       /* ... and wall - median > mad_k * 1.4826 * MAD */
    uint32_t min_steps; /* ... on this many consecutive steps, newest included */
    uint32_t min_ranks; /* a step is judged only when at least this many ranks have it */
};
#define STEPS_RULE_DEFAULT { 0.10, 3.0, 3, 3 }

enum steps_cause { STEPS_CAUSE_COMPUTE = 0, STEPS_CAUSE_COMMUNICATION, STEPS_CAUSE_HOST };
const char *steps_cause_name(enum steps_cause c);

struct steps_slow {
    size_t rank_index;    /* into the input */
    int64_t since_step;   /* first step of the slow run */
    int64_t last_step;
    uint32_t run;         /* slow steps in the run */
    double ratio;         /* median over the run of wall / step median */
    enum steps_cause cause;
    double excess_ms[3];  /* mean excess over the step medians: compute(+memcpy), comm, host */
};

struct steps_result {
    size_t ranks, judged_steps;
    int64_t first_step, last_step; /* of the judged steps; -1 when none */
    double median_ms, p99_ms, max_ms;
    struct steps_slow *slow; /* caller frees with steps_result_fini() */
    size_t nslow;
};

/* Merge the ranks' windows and apply the rule. 0 or -ENOMEM. */
int steps_merge(const struct steps_in_rank *in, size_t n, const struct steps_rule *rule, struct steps_result *ret);
void steps_result_fini(struct steps_result *r);

#endif
