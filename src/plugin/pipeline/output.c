/* output: the registry of the pipeline's outputs (output.h), one row of ops per row of the
 * output table (contract/outputs.h). Test replacements sit beside the table so a session under
 * test is built the same way. */
#include "plugin/pipeline/output.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>

#define OUTPUT_ROW_(id, stem, sel, value, help) [MSMON_OUTPUT_##id] = &proc_##stem##_ops,
static const struct output_ops *const out_rows[MSMON_OUTPUT_COUNT] = { MSMON_OUTPUT_TABLE(OUTPUT_ROW_) };
#undef OUTPUT_ROW_

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct output_ops *out_test[MSMON_OUTPUT_COUNT];

const struct output_ops *output_ops_of(enum msmon_output id)
{
    const struct output_ops *ops;

    if ((unsigned)id >= MSMON_OUTPUT_COUNT)
        return NULL;
    pthread_mutex_lock(&out_lock);
    ops = out_test[id] ? out_test[id] : out_rows[id];
    pthread_mutex_unlock(&out_lock);
    return ops;
}

int output_prepare_dir(enum msmon_output id, const char *path, char *ret_abs, size_t cap)
{
    const struct output_ops *ops = output_ops_of(id);

    if (!ops || !ops->prepare_dir)
        return -EINVAL;
    return ops->prepare_dir(path, ret_abs, cap);
}

void output_test_replace(enum msmon_output id, const struct output_ops *ops)
{
    if ((unsigned)id >= MSMON_OUTPUT_COUNT)
        return;
    pthread_mutex_lock(&out_lock);
    out_test[id] = ops;
    pthread_mutex_unlock(&out_lock);
}
