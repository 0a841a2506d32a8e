/* legacy_merge: the wall-time merge of `dyno steps` before the split, the benchmark's baseline. */
#ifndef MSMON_BENCH_LEGACY_MERGE_H
#define MSMON_BENCH_LEGACY_MERGE_H

#include "contract/slowrank.h"

/* Same inputs and result type as slowrank_merge; free with slowrank_result_fini(). */
int legacy_merge(const struct slowrank_in *in, size_t n, const struct slowrank_rule *rule,
                 struct slowrank_result *ret);

#endif
