/* dynolog: the per-node daemon. main() is the start-up sequence of docs/design/daemon.md#flags,
 * each step undone in reverse order by the labels at the bottom. Everything runs on one event
 * loop (loop.h) in the main thread: RPC, the IPC sockets, GC as a timer, signals as events. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/pathnorm.h"
#include "contract/names.h"
#include "daemon/collectors/kmon.h"
#include "daemon/flags.h"
#include "daemon/ipc/data_sink.h"
#include "daemon/ipc/gc.h"
#include "daemon/ipc/ipc_server.h"
#include "daemon/ipc/peer.h"
#include "daemon/ipc/registry.h"
#include "daemon/ipc/sock_file.h"
#include "daemon/ipc/status.h"
#include "daemon/ipc/steps.h"
#include "daemon/loop.h"
#include "daemon/rpc/conn.h"
#include "daemon/rpc/rpc_methods.h"
#include "daemon/rpc/rpc_server.h"
#include "daemon/sinks/json_logger.h"
#include "daemon/sinks/prom_http.h"
#include "daemon/sinks/promfam.h"
#include "daemon/sinks/rw_sender.h"
#include "daemon/sinks/tb_logger.h"
#include "ipc/ipc_msg.h"
#include "tls/tls_ctx.h"

#ifndef MSMON_GIT_HASH
#define MSMON_GIT_HASH "unknown"
#endif

/* --allowed_log_dirs, the IPC peer policy, the registry quota and the per-peer RPC
 * cap, all from flags; start-up fails (exit 1) on a bad list. */
static struct pathnorm_roots allowed_log_dirs;

/* getStatus's gone: the sender cache's pidfd when it has one (a zombie is gone too), else
 * kill(pid, 0) and /proc. The one daemon's cache, set before the loop runs. */
static struct peer_cache *gone_peers;

static bool pid_gone(int32_t pid)
{
    return peer_gone(gone_peers, pid);
}

static void prom_stats(void *store, struct rpc_prom_stats *ret)
{
    struct promfam_stats ps;

    promfam_store_stats(store, &ps);
    ret->series = ps.series;
    ret->folded_process = ps.folded_process;
    ret->folded_daemon = ps.folded_daemon;
    ret->processes_folded = ps.processes_folded;
}

static void sweep_clients(void *ipc)
{
    (void)ipc_server_sweep(ipc);
}

static int security_setup(const struct daemon_flags *f, int tcp_fd)
{
    char err[PATHNORM_MAX + 128];
    if (pathnorm_roots_parse(f->allowed_log_dirs, &allowed_log_dirs, err, sizeof(err)) != 0) {
        LOG_ERROR("%s", err);
        return -EINVAL;
    }
    if (allowed_log_dirs.n) {
        char list[1024];
        pathnorm_roots_str(&allowed_log_dirs, list, sizeof(list));
        LOG_INFO("--log-file of npu-monitor/nputrace configs must resolve below %s", list);
        rpc_set_allowed_log_dirs(&allowed_log_dirs);
    } else if (strcmp(f->certs_dir, "NO_CERTS") == 0 && !rpc_listen_is_loopback(tcp_fd)) {
        LOG_WARN("RPC is served on a non-loopback address without TLS and without --allowed_log_dirs: "
                 "anyone who reaches port %d can make registered processes write files anywhere they "
                 "may write", f->port);
    }
    return 0;
}

static int ipc_peers_setup(const struct daemon_flags *f, struct ipc_server *ipc, struct status_table *st)
{
    uid_t uids[IPC_MAX_ALLOWED_UIDS];
    uint32_t shown[IPC_MAX_ALLOWED_UIDS + 2];
    size_t n = 0, k = 0;
    char err[256];
    if (ipc_parse_uids(f->ipc_allowed_uids, uids, IPC_MAX_ALLOWED_UIDS, &n, err, sizeof(err)) != 0) {
        LOG_ERROR("%s", err);
        return -EINVAL;
    }
    /* getStatus "ipc_uids": dyno doctor compares a container's mapped uid with them */
    shown[k++] = 0;
    if (geteuid() != 0)
        shown[k++] = (uint32_t)geteuid();
    for (size_t i = 0; i < n; i++)
        shown[k++] = (uint32_t)uids[i];
    status_set_ipc_uids(st, shown, k);
    return ipc ? ipc_server_set_peers(ipc, uids, n, f->ipc_peer_pid_check) : 0;
}

/* SIGTERM/SIGINT: stop accepting, let in-flight RPCs finish (<= 3 s each), then leave the loop
 * and tear down in main. A second signal while draining changes nothing. */
struct shutdown {
    struct loop *loop;
    struct rpc_server *rpc;
    bool started;
};

static void on_drained(void *arg)
{
    struct shutdown *sd = arg;
    loop_stop(sd->loop);
}

static void on_stop_signal(struct loop_event *ev, int signo, void *arg)
{
    struct shutdown *sd = arg;
    (void)ev;
    if (sd->started)
        return;
    sd->started = true;
    LOG_INFO("Received signal %d (%s), shutting down", signo, strsignal(signo));
    /* IPC and GC keep being served while the last RPCs drain, as before the loop existed */
    rpc_server_shutdown(sd->rpc, on_drained, sd);
}

static void on_sighup(struct loop_event *ev, int signo, void *arg)
{
    (void)ev;
    (void)arg;
    /* docs/design/daemon.md#flags: SIGHUP is ignored (no config reload); watched only so it cannot kill us */
    LOG_DEBUG("Received signal %d (%s), ignored", signo, strsignal(signo));
}

/* --certs_dir (docs/design/rpc.md#daemon-certificates): NO_CERTS serves plain TCP (*ret NULL); anything else must be a
 * directory whose files pass every check, or start-up fails with the reason. */
static int tls_setup(const struct daemon_flags *f, SSL_CTX **ret)
{
    struct stat st;
    char err[1024];
    *ret = NULL;
    if (strcmp(f->certs_dir, "NO_CERTS") == 0)
        return 0;
    if (stat(f->certs_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        LOG_ERROR("--certs-dir must be a valid directory!");
        return -EINVAL;
    }
    struct tls_ctx_cfg cfg = { .dir = f->certs_dir, .server = true,
                               .passphrase_file = f->certs_passphrase_file };
    int rc = tls_ctx_create(&cfg, ret, err, sizeof(err));
    if (rc) {
        LOG_ERROR("TLS set-up failed: %s", err);
        return rc;
    }
    LOG_INFO("TLS: RPC on TCP requires mutual TLS with certificates from %s", f->certs_dir);
    return 0;
}

int main(int argc, char **argv)
{
    struct daemon_flags flags;
    char err[1280];
    char dir[4096];
    char host[256] = "";
    int tcp_fd = -1, rc = 1;
    struct loop *loop = NULL;
    struct loop_event *sig_term = NULL, *sig_int = NULL, *sig_hup = NULL;
    struct shutdown sd = { 0 };
    struct registry *reg = NULL;
    struct peer_cache *peers = NULL;
    struct status_table *st = NULL;
    struct steps_store *steps = NULL;
    struct sock_file dyno_sock = { .fd = -1 };
    struct data_router data;
    struct ipc_server *ipc = NULL;
    struct rpc_server *rpc = NULL;
    struct gc *gc = NULL;
    SSL_CTX *tls = NULL;
    struct conn_factory tcp_conn = conn_tcp_factory;
    struct promfam_store *prom = NULL;
    struct prom_http *prom_http = NULL;
    struct rw_sender *rw = NULL;
    struct kmon *kmon = NULL;
    uint64_t start_ns = clock_mono_ns();

    /* 1. flags */
    flags_defaults(&flags);
    if (flags_parse(argc, argv, &flags, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (flags.help) {
        flags_print_help(stdout);
        return 0;
    }
    if (flags.version) {
        printf("dynolog version %s\n", MSMON_VERSION);
        return 0;
    }
    log_set_level(flags.v > 0 ? LOG_LVL_DEBUG : LOG_LVL_INFO);
    if (geteuid() == 0)
        LOG_WARN("Security Warning: Do not run this tool as root. Running with elevated privileges may compromise system security.");
    LOG_INFO("Starting Ascend Extension for dynolog, version = %s, build git-hash = %s",
             MSMON_VERSION, MSMON_GIT_HASH);

    /* The loop and its signal events come first, so a SIGTERM during start-up is queued and
     * handled (a clean exit 0) as soon as the loop runs. SIGPIPE is ignored process-wide. */
    signal(SIGPIPE, SIG_IGN);
    /* libcurl's global state must be set up before any thread exists (the send thread) */
    if (flags.remote_write_url[0] && rw_global_init(err, sizeof(err)) != 0) {
        LOG_ERROR("remote write needs libcurl: %s", err);
        return 1;
    }
    if (loop_create(&loop) != 0) {
        LOG_ERROR("cannot create the event loop");
        return 1;
    }
    sd.loop = loop;
    if (loop_signal_add(loop, SIGTERM, on_stop_signal, &sd, &sig_term) != 0 ||
        loop_signal_add(loop, SIGINT, on_stop_signal, &sd, &sig_int) != 0 ||
        loop_signal_add(loop, SIGHUP, on_sighup, NULL, &sig_hup) != 0) {
        LOG_ERROR("cannot watch SIGTERM/SIGINT/SIGHUP");
        goto out_loop;
    }

    /* 2. RPC listener first: on failure nothing else has been touched */
    if (tls_setup(&flags, &tls) != 0)
        goto out_loop;
    if (tls)
        conn_tls_factory_init(&tcp_conn, tls);   /* dyno.sock stays plain (docs/design/rpc.md#local-socket) */
    if (flags.remote_write_url[0]) {
        /* configuration errors are fatal before anything listens */
        struct rw_headers hdr;
        if (rw_url_check(flags.remote_write_url, err, sizeof(err)) != 0 ||
            rw_headers_parse(flags.remote_write_headers, &hdr, err, sizeof(err)) != 0) {
            LOG_ERROR("%s", err);
            goto out_loop;
        }
        rw_headers_fini(&hdr);
    }
    if (rpc_listen_tcp(flags.port, flags.rpc_bind_address, &tcp_fd, err, sizeof(err)) != 0) {
        LOG_ERROR("%s", err);
        goto out_loop;
    }
    if (security_setup(&flags, tcp_fd) != 0) {
        close(tcp_fd);
        goto out_loop;
    }

    /* 3. state shared by RPC and IPC */
    gethostname(host, sizeof(host) - 1);
    /* steps: the per-rank step windows (docs/cluster.md) */
    if (registry_create(host, &reg) != 0 || status_create(&st) != 0 || steps_create(&steps) != 0) {
        close(tcp_fd);
        goto out_state;
    }
    registry_set_policy(reg, flags.registry_uid_quota, flags.ipc_peer_pid_check);
    /* who senders are, across pid namespaces (docs/deploy.md#identity) */
    if (peer_cache_create("/proc", 0, &peers) != 0) {
        close(tcp_fd);
        goto out_state;
    }
    {
        struct stat nsb;
        status_set_namespaces(st, peer_own_pidns(peers), stat("/proc/self/ns/net", &nsb) == 0 ? (uint64_t)nsb.st_ino : 0);
    }
    if (ipc_socket_dir(flags.ipc_socket_dir, dir, sizeof(dir)) != 0) {
        LOG_ERROR("cannot resolve the socket directory (passwd home of uid %u)", (unsigned)getuid());
        dir[0] = '\0';
    }

    /* 4. local RPC socket dyno.sock (always) */
    if (dir[0] && sock_file_create(&dyno_sock, dir, NAMES_SOCK_FILE(NAMES_SOCK_RPC), SOCK_STREAM,
                                   (mode_t)flags.ipc_socket_mode) == -EADDRINUSE) {
        LOG_ERROR("refusing to start: another dynolog serves %s/dyno.sock", dir);
        close(tcp_fd);
        goto out_state;
    }

    /* 5. loggers (sinks for data messages) */
    data_router_init(&data);
    data.st = st;   /* PluginStats counters shown by getStatus */
    data.reg = reg; /* PluginInfo: each process's vendor library */
    data.steps = steps; /* StepSummary: the windows getSteps serves */
    data.peers = peers; /* PluginHealth's pod fields; the pod labels of every record */
    if (flags.use_JSON)
        data_router_add(&data, json_logger_sink());
    /* Prometheus /metrics and remote write read one store of the latest value per series;
     * series expire after 5 minutes or 3 host-metric intervals without an update (op series:
     * or 3 report periods of their process, when that is longer) */
    if (flags.use_prometheus || flags.remote_write_url[0]) {
        uint64_t stale = 3000ull * (uint64_t)flags.kernel_monitor_reporting_interval_s;
        if (promfam_store_create(host, stale > 300000 ? stale : 300000, &prom) != 0) {
            LOG_ERROR("cannot create the Prometheus series store");
            close(tcp_fd);
            goto out_ipc;
        }
        /* the names come from the monitored processes: bound what they may create */
        promfam_store_set_limits(prom, (size_t)flags.prometheus_max_series_per_process,
                                 (size_t)flags.prometheus_max_series);
        data_router_add(&data, promfam_store_sink(prom, !flags.remote_write_url[0] ? "prometheus"
                                                        : flags.use_prometheus ? "prometheus+remote_write"
                                                                               : "remote_write"));
    }
    if (flags.metric_log_dir[0]) { /* docs/design/daemon.md#flags: a TensorBoard directory failure is fatal */
        struct tb_cfg tcfg = { flags.metric_log_dir, flags.tensorboard_op_stats };
        struct sink tb;
        if (tb_logger_create(&tcfg, &tb, err, sizeof(err)) != 0) {
            LOG_ERROR("%s", err);
            close(tcp_fd);
            goto out_sinks;
        }
        data_router_add(&data, tb);
    }

    /* 6. IPC endpoints (non-fatal, except a live daemon on the same control socket) */
    if (flags.enable_ipc_monitor && dir[0]) {
        bool conflict = false;
        const char *kdir = getenv("KINETO_IPC_SOCKET_DIR");
        struct ipc_server_cfg icfg = { dir, (mode_t)flags.ipc_socket_mode, kdir, reg, st, &data, peers };
        (void)ipc_server_create(&icfg, &conflict, &ipc); /* without memory: no IPC, as for a failed endpoint */
        if (conflict) {
            LOG_ERROR("refusing to start: another dynolog serves %s/" NAMES_SOCK_FILE(NAMES_SOCK_CTL), dir);
            close(tcp_fd);
            goto out_ipc;
        }
    }
    if (ipc_peers_setup(&flags, ipc, st) != 0) {
        close(tcp_fd);
        goto out_ipc;
    }

    /* 7. events on the loop: RPC listeners, IPC sockets, the registry GC timer */
    struct rpc_ctx ctx = { .reg = reg, .st = st, .version = MSMON_VERSION, .steps = steps, .peers = peers,
                           .prom_stats = prom ? prom_stats : NULL, .prom_arg = prom };
    gone_peers = peers;
    rpc_set_pid_gone(pid_gone); /* getStatus: a dead pid (a zombie too) reads gone at once */
    if (rpc_server_create(loop, tcp_fd, &tcp_conn, dyno_sock.fd, flags.rpc_max_clients, &ctx, &rpc) != 0) {
        LOG_ERROR("cannot start the RPC server");
        goto out_ipc;
    }
    sd.rpc = rpc;
    rpc_server_set_peer_limit(rpc, flags.rpc_max_clients_per_peer);
    if (ipc && ipc_server_start(ipc, loop) != 0) {
        LOG_ERROR("cannot serve the IPC sockets");
        goto out_rpc;
    }
    if (gc_create(loop, reg, st, (uint64_t)flags.registry_gc_interval_ms,
                  (uint64_t)flags.registry_gc_age_ms, &gc) != 0) {
        LOG_ERROR("cannot start the registry GC timer");
        goto out_rpc;
    }
    gc_set_peers(gc, peers);
    if (ipc)
        gc_set_task(gc, sweep_clients, ipc);
    /* Prometheus HTTP: a bind failure is logged and the daemon runs on without it (docs/design/daemon.md#prometheus-endpoint) */
    if (flags.use_prometheus) {
        if (prom_http_create(loop, flags.prometheus_address, flags.prometheus_port, prom, &prom_http, err,
                             sizeof(err)) != 0)
            LOG_ERROR("%s; continuing without Prometheus exposition", err);
        else
            LOG_INFO("prometheus: serving /metrics on %s:%d", flags.prometheus_address, prom_http_port(prom_http));
    }
    if (flags.remote_write_url[0]) {
        struct rw_cfg rcfg = { flags.remote_write_url, flags.remote_write_interval_s, flags.remote_write_timeout_s,
                               flags.remote_write_headers, (size_t)flags.remote_write_queue_samples,
                               (size_t)flags.remote_write_queue_bytes, flags.remote_write_ca_file,
                               flags.remote_write_insecure_skip_verify };
        if (rw_sender_create(loop, prom, &rcfg, &rw, err, sizeof(err)) != 0) {
            LOG_ERROR("%s", err);
            goto out_gc;
        }
    }

    {   /* the kernel monitor (docs/design/daemon.md#host-metrics): always on, a fixed-cadence timer on the loop */
        struct kmon_cfg kcfg = { flags.procfs_root, flags.extended_host_metrics,
                                 flags.filter_nic_interfaces, flags.allow_interface_prefixes, 0 };
        if (kmon_create(&kcfg, &kmon) != 0 ||
            kmon_start(kmon, loop, (uint64_t)flags.kernel_monitor_reporting_interval_s * 1000u,
                       data_router_sink(&data)) != 0) {
            LOG_ERROR("cannot start the kernel monitor");
            goto out_gc;
        }
    }
    {   /* getStatus: uptime and the loggers enabled above */
        char names[STATUS_LOGGERS_CAP];
        data_router_names(&data, names, sizeof(names));
        status_set_daemon(st, start_ns, names);
    }

    /* 8. run until SIGTERM/SIGINT and the RPC drain */
    if (loop_run(loop) != 0)
        LOG_ERROR("the event loop failed");
    else
        rc = 0;

out_gc:
    kmon_destroy(kmon);
    rw_sender_destroy(rw);        /* stops the send thread; one summary line */
    prom_http_destroy(prom_http);
    gc_destroy(gc);
out_rpc:
    rpc_server_destroy(rpc);      /* closes what is left in flight and the TCP listener */
    ipc_server_stop(ipc);
out_ipc:
    ipc_server_destroy(ipc);      /* unlinks dynolog.sock / dynolog_data.sock if still ours */
out_sinks:
    data_router_fini(&data);      /* flushes the TensorBoard files */
    promfam_store_destroy(prom);  /* after the router: the store's sink destroy is a no-op */
    sock_file_close(&dyno_sock);
out_state:
    peer_cache_destroy(peers);
    steps_destroy(steps);
    status_destroy(st);
    registry_destroy(reg);
out_loop:
    loop_event_free(sig_hup);
    loop_event_free(sig_int);
    loop_event_free(sig_term);
    loop_destroy(loop);
    SSL_CTX_free(tls);
    if (flags.remote_write_url[0])
        rw_global_cleanup();
    return rc;
}
