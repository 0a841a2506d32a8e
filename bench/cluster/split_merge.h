/* split_merge: the measured-split merge of `dyno steps` before inference, the benchmark's baseline. */
#ifndef MSMON_BENCH_SPLIT_MERGE_H
#define MSMON_BENCH_SPLIT_MERGE_H

#include "contract/slowrank.h"

/* Same inputs and result type as slowrank_merge (a sample's split is not read); free with
 * slowrank_result_fini(). */
int split_merge(const struct slowrank_in *in, size_t n, const struct slowrank_rule *rule,
                struct slowrank_result *ret);

#endif
