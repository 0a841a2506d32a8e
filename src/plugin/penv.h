/* penv: the plugin's environment variables (docs/design/contract.md#environment-variables), read once from one table so
 * the hot paths never call getenv() and a value cannot change under a running session.
 * Tests that need other values call penv_reload() before the code under test runs. */
#ifndef MSMON_PLUGIN_PENV_H
#define MSMON_PLUGIN_PENV_H

#include <stdbool.h>

enum penv_id {
    PENV_USE_DAEMON = 0,        /* MSMONITOR_USE_DAEMON */
    PENV_KINETO_USE_DAEMON,     /* KINETO_USE_DAEMON (deprecated alias) */
    PENV_LOG_PATH,              /* MSMONITOR_LOG_PATH */
    PENV_LOG_LEVEL,             /* MSMONITOR_LOG_LEVEL */
    PENV_BACKEND,               /* MSMONITOR_BACKEND */
    PENV_MSPTI_LIB,             /* MSMONITOR_MSPTI_LIB */
    PENV_ASCEND_HOME,           /* ASCEND_HOME_PATH */
    PENV_LD_PRELOAD,            /* LD_PRELOAD */
    PENV_JSONL_BUFFER_CAPACITY, /* MSMONITOR_JSONL_BUFFER_CAPACITY */
    PENV_JSONL_MAX_DUMP_INTERVAL,
    PENV_JSONL_ROTATE_LOG_LINES,
    PENV_JSONL_ROTATE_LOG_FILES,
    PENV_METRIC_AGGREGATES,     /* MSMONITOR_METRIC_AGGREGATES */
    PENV_NATIVE_POLL,           /* MSMONITOR_NATIVE_POLL */
    PENV_RANK,                  /* RANK */
    PENV_RANK_ID,               /* RANK_ID */
    PENV_SOCKET_DIR,            /* MSMONITOR_SOCKET_DIR (read by ipc_socket_dir too) */
    PENV_TEST_BUFFER_SIZE,      /* MSMONITOR_TEST_BUFFER_SIZE: test knob, see bufpool.h */
    PENV_SHM_DIR,               /* MSMONITOR_SHM_DIR: dyno-mode segment directory (dynamic.h) */
    PENV_POLL_INTERVAL_S,       /* MSMONITOR_POLL_INTERVAL_S: dyno-mode poll period */
    PENV_SHM_STALE_S,           /* MSMONITOR_SHM_STALE_S: stale-rule threshold (tests) */
    PENV_RETRY_INITIAL_S,       /* MSMONITOR_RETRY_INITIAL_S: first registration retry delay (control.h) */
    PENV_RETRY_MAX_S,           /* MSMONITOR_RETRY_MAX_S: back-off cap, <= 30 s */
    PENV_CUPTI_LIB,             /* MSMONITOR_CUPTI_LIB (docs/design/session.md#cupti-backend) */
    PENV_CUDA_HOME,             /* CUDA_HOME */
    PENV_CUDA_INJECTION,        /* CUDA_INJECTION64_PATH: set when the driver injected us */
    PENV_DATA_BACKLOG_BYTES,    /* MSMONITOR_DATA_BACKLOG_BYTES: undelivered metric data cap (backlog.h) */
    PENV_WORLD_SIZE,            /* WORLD_SIZE: the job's ranks, for the nputrace header */
    PENV_JOB_KEY,               /* MSMONITOR_JOB_KEY: names this job's dyno-mode segment (dynamic.h) */
    PENV_MASTER_ADDR,           /* MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID: the launcher's */
    PENV_MASTER_PORT,           /*   rendezvous, the default job key */
    PENV_TORCHELASTIC_RUN_ID,
    PENV_XDG_RUNTIME_DIR,       /* XDG_RUNTIME_DIR: fallback home of the segment */
    /* the downward-API variables, in contract/podid.h's field order (test_penv_pod checks the
     * names against it): what the process says about its pod (docs/deploy.md#attribution) */
    PENV_POD_NAME,              /* POD_NAME */
    PENV_POD_NAMESPACE,         /* POD_NAMESPACE */
    PENV_NODE_NAME,             /* NODE_NAME */
    PENV_CONTAINER_NAME,        /* CONTAINER_NAME */
    PENV_COUNT
};

/* Value of the variable as read at first use; NULL when unset. Borrowed for the process. */
const char *penv_get(enum penv_id id);
/* Set and non-empty. */
bool penv_set(enum penv_id id);
/* "1" exactly (the boolean switches of docs/design/contract.md#environment-variables). */
bool penv_is_one(enum penv_id id);
const char *penv_name(enum penv_id id);
/* Re-read every variable (tests only; not thread-safe against concurrent penv_get). */
void penv_reload(void);

#endif
