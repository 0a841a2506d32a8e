/* ext_results: the standalone results' lock and kind names (ext_results.h). */
#include "ext_results.h"

#include "contract/kinds.h"

pthread_mutex_t ext_results_lock = PTHREAD_MUTEX_INITIALIZER;

const char *ext_results_kind_name(int32_t kind)
{
    return kinds_standalone(kind) ? kinds_name(kind) : NULL;
}
