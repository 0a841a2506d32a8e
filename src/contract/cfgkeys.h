/* cfgkeys: every key of the npu-monitor and nputrace config text (02-cli.md §4.3, §4.4,
 * 04-plugin.md §3), written once. Macros, so the CLI can paste them into its format strings;
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

/* nputrace / gputrace */
#define CFGKEY_ACTIVITIES_LOG_FILE "ACTIVITIES_LOG_FILE"
#define CFGKEY_PROFILE_START_ITERATION "PROFILE_START_ITERATION"
#define CFGKEY_PROFILE_START_ITERATION_ROUNDUP "PROFILE_START_ITERATION_ROUNDUP"
#define CFGKEY_PROFILE_START_STEP "PROFILE_START_STEP"
#define CFGKEY_PROFILE_START_TIME "PROFILE_START_TIME"
#define CFGKEY_ACTIVITIES_ITERATIONS "ACTIVITIES_ITERATIONS"
#define CFGKEY_ACTIVITIES_DURATION_MSECS "ACTIVITIES_DURATION_MSECS"
#define CFGKEY_PROFILE_IS_RANK "PROFILE_IS_RANK"
#define CFGKEY_PROFILE_RANK_LIST "PROFILE_RANK_LIST"

/* Members the handoff adds or the framework passes along; never validated (04-plugin.md §3). */
#define CFGKEY_IS_VALID "is_valid"
#define CFGKEY_REQUEST_TRACE_ID "REQUEST_TRACE_ID"

/* The daemon's classification of a config (01-rpc.md §5.3): npu-monitor when the text starts
 * with the bytes NPU_MONITOR_START, trace otherwise. */
bool cfgkeys_is_npu_monitor_text(const char *text, size_t len);

#endif
