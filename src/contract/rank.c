/* rank: the parsing rule shared by every rank reader; a negative or garbled value is treated
 * as unset so it falls through to the next variable instead of becoming a bogus rank. */
#include "contract/rank.h"

#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"

static int rank_parse(const char *v, int32_t *ret)
{
    char buf[32];
    size_t n;
    int32_t r;

    if (!v)
        return -1;
    n = strlen(v);
    str_trim_view(&v, &n, " \t");
    if (str_copy(buf, sizeof(buf), v, n) != 0 || str_to_i32(buf, &r) != 0 || r < 0)
        return -1;
    *ret = r;
    return 0;
}

int32_t rank_resolve(const char *rank, const char *rank_id)
{
    int32_t r;

    if (rank_parse(rank, &r) == 0 || rank_parse(rank_id, &r) == 0)
        return r;
    return RANK_UNKNOWN;
}

int32_t rank_from_env(void)
{
    return rank_resolve(getenv("RANK"), getenv("RANK_ID"));
}
