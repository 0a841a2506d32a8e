/* penv: reads the plugin's environment variables once (docs/design/contract.md#environment-variables). The values are
 * copied so later setenv() calls in the host process cannot invalidate them. */
#include "plugin/penv.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const penv_names[PENV_COUNT] = {
    [PENV_USE_DAEMON] = "MSMONITOR_USE_DAEMON",
    [PENV_KINETO_USE_DAEMON] = "KINETO_USE_DAEMON",
    [PENV_LOG_PATH] = "MSMONITOR_LOG_PATH",
    [PENV_LOG_LEVEL] = "MSMONITOR_LOG_LEVEL",
    [PENV_BACKEND] = "MSMONITOR_BACKEND",
    [PENV_MSPTI_LIB] = "MSMONITOR_MSPTI_LIB",
    [PENV_ASCEND_HOME] = "ASCEND_HOME_PATH",
    [PENV_LD_PRELOAD] = "LD_PRELOAD",
    [PENV_JSONL_BUFFER_CAPACITY] = "MSMONITOR_JSONL_BUFFER_CAPACITY",
    [PENV_JSONL_MAX_DUMP_INTERVAL] = "MSMONITOR_JSONL_MAX_DUMP_INTERVAL",
    [PENV_JSONL_ROTATE_LOG_LINES] = "MSMONITOR_JSONL_ROTATE_LOG_LINES",
    [PENV_JSONL_ROTATE_LOG_FILES] = "MSMONITOR_JSONL_ROTATE_LOG_FILES",
    [PENV_METRIC_AGGREGATES] = "MSMONITOR_METRIC_AGGREGATES",
    [PENV_NATIVE_POLL] = "MSMONITOR_NATIVE_POLL",
    [PENV_RANK] = "RANK",
    [PENV_RANK_ID] = "RANK_ID",
    [PENV_SOCKET_DIR] = "MSMONITOR_SOCKET_DIR",
    [PENV_TEST_BUFFER_SIZE] = "MSMONITOR_TEST_BUFFER_SIZE",
    [PENV_SHM_DIR] = "MSMONITOR_SHM_DIR",
    [PENV_POLL_INTERVAL_S] = "MSMONITOR_POLL_INTERVAL_S",
    [PENV_SHM_STALE_S] = "MSMONITOR_SHM_STALE_S",
    [PENV_RETRY_INITIAL_S] = "MSMONITOR_RETRY_INITIAL_S",
    [PENV_RETRY_MAX_S] = "MSMONITOR_RETRY_MAX_S",
    [PENV_CUPTI_LIB] = "MSMONITOR_CUPTI_LIB",
    [PENV_CUDA_HOME] = "CUDA_HOME",
    [PENV_CUDA_INJECTION] = "CUDA_INJECTION64_PATH",
    [PENV_DATA_BACKLOG_BYTES] = "MSMONITOR_DATA_BACKLOG_BYTES",
    [PENV_WORLD_SIZE] = "WORLD_SIZE",
    [PENV_JOB_KEY] = "MSMONITOR_JOB_KEY",
    [PENV_MASTER_ADDR] = "MASTER_ADDR",
    [PENV_MASTER_PORT] = "MASTER_PORT",
    [PENV_TORCHELASTIC_RUN_ID] = "TORCHELASTIC_RUN_ID",
    [PENV_XDG_RUNTIME_DIR] = "XDG_RUNTIME_DIR",
    [PENV_POD_NAME] = "POD_NAME",
    [PENV_POD_NAMESPACE] = "POD_NAMESPACE",
    [PENV_NODE_NAME] = "NODE_NAME",
    [PENV_CONTAINER_NAME] = "CONTAINER_NAME",
};

static char *penv_values[PENV_COUNT];
static pthread_once_t penv_once = PTHREAD_ONCE_INIT;

/* Variables that name a library (or the directory one is searched in) for dlopen: in a
 * set-uid/set-gid process they would let the invoking user load code with the raised
 * privileges, so there secure_getenv() reads them as unset. */
static bool penv_names_library(int id)
{
    return id == PENV_MSPTI_LIB || id == PENV_CUPTI_LIB || id == PENV_ASCEND_HOME ||
           id == PENV_CUDA_HOME;
}

static void penv_read_all(void)
{
    for (int i = 0; i < PENV_COUNT; i++) {
        const char *v = penv_names_library(i) ? secure_getenv(penv_names[i]) : getenv(penv_names[i]);
        free(penv_values[i]);
        penv_values[i] = v ? strdup(v) : NULL; /* strdup failure reads as "unset" */
    }
}

const char *penv_get(enum penv_id id)
{
    if ((int)id < 0 || id >= PENV_COUNT)
        return NULL;
    pthread_once(&penv_once, penv_read_all);
    return penv_values[id];
}

bool penv_set(enum penv_id id)
{
    const char *v = penv_get(id);
    return v && v[0];
}

bool penv_is_one(enum penv_id id)
{
    const char *v = penv_get(id);
    return v && strcmp(v, "1") == 0;
}

const char *penv_name(enum penv_id id)
{
    return ((int)id >= 0 && id < PENV_COUNT) ? penv_names[id] : "?";
}

void penv_reload(void)
{
    pthread_once(&penv_once, penv_read_all);
    penv_read_all();
}
