/* cfgkeys: every key of the npu-monitor, nputrace and gputrace config text (docs/design/cli.md#npu-monitor, #gputrace,
 * docs/design/session.md#applying-a-config), written once. Macros, so the CLI can paste them into its format strings;
 * the plugin, the daemon and the extension compare against the same spelling. */
#ifndef MSMON_CONTRACT_CFGKEYS_H
#define MSMON_CONTRACT_CFGKEYS_H

#include <stdbool.h>
#include <stddef.h>

/* npu-monitor, in the order the CLI sends them */
#define CFGKEY_NPU_MONITOR_START "NPU_MONITOR_START"
#define CFGKEY_NPU_MONITOR_STOP "NPU_MONITOR_STOP"
#define CFGKEY_REPORT_INTERVAL_S "REPORT_INTERVAL_S"
#define CFGKEY_DURATION "DURATION"
#define CFGKEY_MSPTI_ACTIVITY_KIND "MSPTI_ACTIVITY_KIND"
#define CFGKEY_NPU_MONITOR_LOG_FILE "NPU_MONITOR_LOG_FILE"
#define CFGKEY_NPU_MONITOR_EXPORT_TYPE "NPU_MONITOR_EXPORT_TYPE"
#define CFGKEY_JSONL_ROTATE_LOG_LINES "JSONL_ROTATE_LOG_LINES"
#define CFGKEY_JSONL_ROTATE_LOG_FILES "JSONL_ROTATE_LOG_FILES"
#define CFGKEY_NPU_MONITOR_FILTER "NPU_MONITOR_FILTER"

/* nputrace, in the order the CLI sends them (docs/design/cli.md#nputrace) */
#define CFGKEY_ACTIVITIES_LOG_FILE "ACTIVITIES_LOG_FILE"
#define CFGKEY_PROFILE_START_ITERATION "PROFILE_START_ITERATION"
#define CFGKEY_PROFILE_START_STEP "PROFILE_START_STEP"
#define CFGKEY_ACTIVITIES_ITERATIONS "ACTIVITIES_ITERATIONS"
#define CFGKEY_PROFILE_RECORD_SHAPES "PROFILE_RECORD_SHAPES"
#define CFGKEY_PROFILE_PROFILE_MEMORY "PROFILE_PROFILE_MEMORY"
#define CFGKEY_PROFILE_WITH_STACK "PROFILE_WITH_STACK"
#define CFGKEY_PROFILE_WITH_FLOPS "PROFILE_WITH_FLOPS"
#define CFGKEY_PROFILE_WITH_MODULES "PROFILE_WITH_MODULES"
#define CFGKEY_PROFILE_ACTIVITIES "PROFILE_ACTIVITIES"
#define CFGKEY_PROFILE_ANALYSE "PROFILE_ANALYSE"
#define CFGKEY_PROFILE_ASYNC_MODE "PROFILE_ASYNC_MODE"
#define CFGKEY_PROFILE_PROFILER_LEVEL "PROFILE_PROFILER_LEVEL"
#define CFGKEY_PROFILE_AIC_METRICS "PROFILE_AIC_METRICS"
#define CFGKEY_PROFILE_L2_CACHE "PROFILE_L2_CACHE"
#define CFGKEY_PROFILE_OP_ATTR "PROFILE_OP_ATTR"
#define CFGKEY_PROFILE_MSPROF_TX "PROFILE_MSPROF_TX"
#define CFGKEY_PROFILE_GC_DETECT_THRESHOLD "PROFILE_GC_DETECT_THRESHOLD"
#define CFGKEY_PROFILE_DATA_SIMPLIFICATION "PROFILE_DATA_SIMPLIFICATION"
#define CFGKEY_PROFILE_EXPORT_TYPE "PROFILE_EXPORT_TYPE"
#define CFGKEY_PROFILE_HOST_SYS "PROFILE_HOST_SYS"
#define CFGKEY_PROFILE_SYS_IO "PROFILE_SYS_IO"
#define CFGKEY_PROFILE_SYS_INTERCONNECTION "PROFILE_SYS_INTERCONNECTION"
#define CFGKEY_PROFILE_MSTX_DOMAIN_INCLUDE "PROFILE_MSTX_DOMAIN_INCLUDE"
#define CFGKEY_PROFILE_MSTX_DOMAIN_EXCLUDE "PROFILE_MSTX_DOMAIN_EXCLUDE"
#define CFGKEY_PROFILE_IS_RANK "PROFILE_IS_RANK"
#define CFGKEY_PROFILE_RANK_LIST "PROFILE_RANK_LIST"

/* gputrace (Kineto, docs/design/cli.md#gputrace) adds these to the shared ACTIVITIES_* / PROFILE_* keys */
#define CFGKEY_PROFILE_START_TIME "PROFILE_START_TIME"
#define CFGKEY_ACTIVITIES_DURATION_MSECS "ACTIVITIES_DURATION_MSECS"
#define CFGKEY_PROFILE_START_ITERATION_ROUNDUP "PROFILE_START_ITERATION_ROUNDUP"
#define CFGKEY_PROFILE_REPORT_INPUT_SHAPES "PROFILE_REPORT_INPUT_SHAPES"
#define CFGKEY_PROFILE_MEMORY "PROFILE_MEMORY"
#define CFGKEY_PROFILE_MEMORY_DURATION_MSECS "PROFILE_MEMORY_DURATION_MSECS"

/* Members the handoff adds or the framework passes along; never validated (docs/design/session.md#applying-a-config). */
#define CFGKEY_IS_VALID "is_valid"
#define CFGKEY_REQUEST_TRACE_ID "REQUEST_TRACE_ID"

/* What a config is, decided here only (docs/design/contract.md#config-classes): npu-monitor when
 * it has the key NPU_MONITOR_START; else an nputrace window when it has ACTIVITIES_LOG_FILE or
 * ACTIVITIES_ITERATIONS; else other (a Kineto gputrace config). keys: n trimmed key names. */
enum cfgkeys_class { CFGKEYS_OTHER = 0, CFGKEYS_NPU_MONITOR, CFGKEYS_NPU_TRACE };
enum cfgkeys_class cfgkeys_classify(const char *const *keys, size_t n);
/* The same over KEY=value text (kvtext.h; unparsable text: CFGKEYS_OTHER). */
enum cfgkeys_class cfgkeys_classify_text(const char *text, size_t len);
/* The daemon's gate (docs/design/rpc.md#status-gate): cfgkeys_classify_text is npu-monitor. */
bool cfgkeys_is_npu_monitor_text(const char *text, size_t len);
/* The one boolean rule of config values: "true" or "false", without regard to case; anything
 * else is -EINVAL (docs/design/contract.md#booleans). */
int cfgkeys_bool(const char *value, bool *ret);
/* A switch under that rule: true only for a value that is `true` (NULL, `false` or anything
 * else: off). */
bool cfgkeys_true(const char *value);

#endif
