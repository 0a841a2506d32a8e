/* registry: the output table of contract/outputs.h as rows of {name, ops} (registry.h).
 * Test replacements sit beside the table so a session under test is built the same way. */
#include "plugin/outputs/registry.h"

#include <pthread.h>
#include <stddef.h>

#define REGISTRY_ROW_(id, stem, sel, value, help) [MSMON_OUTPUT_##id] = { #stem, &proc_##stem##_ops },
static const struct registry_output reg_rows[MSMON_OUTPUT_COUNT] = { MSMON_OUTPUT_TABLE(REGISTRY_ROW_) };
#undef REGISTRY_ROW_

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct registry_output reg_test[MSMON_OUTPUT_COUNT];

const struct registry_output *registry_get(enum msmon_output id)
{
    const struct registry_output *r;

    if ((unsigned)id >= MSMON_OUTPUT_COUNT)
        return NULL;
    pthread_mutex_lock(&reg_lock);
    r = reg_test[id].ops ? &reg_test[id] : &reg_rows[id];
    pthread_mutex_unlock(&reg_lock);
    return r;
}

void registry_test_replace(enum msmon_output id, const struct proc_ops *ops)
{
    if ((unsigned)id >= MSMON_OUTPUT_COUNT)
        return;
    pthread_mutex_lock(&reg_lock);
    reg_test[id] = (struct registry_output){ reg_rows[id].name, ops };
    pthread_mutex_unlock(&reg_lock);
}
