/* flags: the daemon's gflags-compatible command line (docs/design/daemon.md#flags). One sorted,
 * typed table drives parsing, --help and docs/daemon.md; layers are defaults -> flagfile ->
 * argv, later occurrences win. Errors are one line naming the flag and the bad value. */
#ifndef MSMON_DAEMON_FLAGS_H
#define MSMON_DAEMON_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FLAGS_STR_MAX 1024

struct daemon_flags {
    char allow_interface_prefixes[FLAGS_STR_MAX];
    char allowed_log_dirs[FLAGS_STR_MAX]; /* empty = no allow-list */
    char certs_dir[FLAGS_STR_MAX];
    char certs_passphrase_file[FLAGS_STR_MAX];   /* TLS: key passphrase, no prompt */
    bool enable_ipc_monitor;
    bool extended_host_metrics;
    bool filter_nic_interfaces;
    bool help;
    char ipc_allowed_uids[FLAGS_STR_MAX]; /* extra uids beyond ours and root */
    bool ipc_peer_pid_check;
    char ipc_socket_dir[FLAGS_STR_MAX];
    int32_t ipc_socket_mode;              /* octal text on the command line */
    int32_t kernel_monitor_reporting_interval_s;
    bool logtostderr;
    char metric_log_dir[FLAGS_STR_MAX];
    int32_t port;
    char procfs_root[FLAGS_STR_MAX];
    char prometheus_address[FLAGS_STR_MAX];
    int32_t prometheus_max_series;              /* series of all monitored processes together */
    int32_t prometheus_max_series_per_process;  /* ... of one process; beyond: <other> */
    int32_t prometheus_port;
    int64_t registry_gc_age_ms;           /* test knob: process age before GC (60000) */
    int64_t registry_gc_interval_ms;      /* test knob: GC period (60000) */
    char remote_write_ca_file[FLAGS_STR_MAX];
    char remote_write_headers[FLAGS_STR_MAX];
    bool remote_write_insecure_skip_verify;
    int32_t remote_write_interval_s;
    int64_t remote_write_queue_bytes;
    int32_t remote_write_queue_samples;
    int32_t remote_write_timeout_s;
    char remote_write_url[FLAGS_STR_MAX];
    char rpc_bind_address[FLAGS_STR_MAX];
    int32_t registry_uid_quota;
    int32_t rpc_max_clients;
    int32_t rpc_max_clients_per_peer;
    bool tensorboard_op_stats;
    bool use_JSON;
    bool use_prometheus;
    int32_t v;
    bool version;
};

/* Fill f with the defaults of the table. */
void flags_defaults(struct daemon_flags *f);
/* Parse argv[1..argc) (flagfiles expanded in place). Returns 0, or -EINVAL with the one-line
 * message (e.g. "ERROR: unknown command line flag 'x'") in err. Warnings (ignored upstream
 * flags, positional arguments) are logged through log.h. */
int flags_parse(int argc, char **argv, struct daemon_flags *f, char *err, size_t errcap);
/* --help text: every flag with its type, default and meaning. */
void flags_print_help(FILE *out);

#endif
