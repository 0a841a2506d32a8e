/* rank: the one rank reader for the C side (docs/design/session.md#python-surface, docs/design/contract.md#environment-variables): RANK (PyTorch), then
 * RANK_ID (MindSpore). Default RANK_UNKNOWN (-1), the value get_rank_id() and the DB file
 * name use for "unknown" (docs/design/outputs.md#db-file). Callers that need a non-negative number (an
 * init_dyno id, a rank-list match) decide at their call site what -1 means for them. */
#ifndef MSMON_CONTRACT_RANK_H
#define MSMON_CONTRACT_RANK_H

#include <stdint.h>

#define RANK_UNKNOWN (-1)

/* Rank from the two variables' values (NULL = unset): the first that is a decimal integer in
 * [0, INT32_MAX] after trimming spaces and tabs wins; otherwise RANK_UNKNOWN. Pure, so the
 * plugin passes its read-once environment table (penv) and tests pass literals. */
int32_t rank_resolve(const char *rank, const char *rank_id);
/* rank_resolve(getenv("RANK"), getenv("RANK_ID")), for components without an env table. */
int32_t rank_from_env(void);

#endif
