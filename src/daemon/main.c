/* dynolog: the per-node daemon. main() is the start-up sequence of 08-host-metrics.md §1.3,
 * each step undone in reverse order by the labels at the bottom. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/data_sink.h"
#include "daemon/flags.h"
#include "daemon/gc_thread.h"
#include "daemon/ipc_server.h"
#include "daemon/json_logger.h"
#include "daemon/registry.h"
#include "daemon/rpc_methods.h"
#include "daemon/rpc_server.h"
#include "daemon/sock_file.h"
#include "daemon/status.h"
#include "ipc/ipc_msg.h"

#ifndef MSMON_GIT_HASH
#define MSMON_GIT_HASH "unknown"
#endif

static int check_unsupported(const struct daemon_flags *f)
{
    struct stat st;
    if (strcmp(f->certs_dir, "NO_CERTS") != 0) {
        if (stat(f->certs_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            LOG_ERROR("--certs-dir must be a valid directory!");
            return -EINVAL;
        }
        LOG_ERROR("TLS (--certs_dir %s) is not supported yet by this build; use NO_CERTS", f->certs_dir);
        return -ENOTSUP;
    }
    if (f->metric_log_dir[0])
        LOG_WARN("--metric_log_dir is not supported yet by this build; TensorBoard logging is off");
    if (f->use_prometheus)
        LOG_WARN("--use_prometheus is not supported yet by this build; Prometheus exposition is off");
    return 0;
}

int main(int argc, char **argv)
{
    struct daemon_flags flags;
    char err[1280];
    char dir[4096];
    char host[256] = "";
    int tcp_fd = -1, rc = 1, sig = 0;
    sigset_t sigs;

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

    /* Signals: SIGTERM/SIGINT are taken synchronously by main (blocked in every thread). */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    /* 2. RPC listener first: on failure nothing else has been touched */
    if (check_unsupported(&flags) != 0)
        return 1;
    if (rpc_listen_tcp(flags.port, flags.rpc_bind_address, &tcp_fd, err, sizeof(err)) != 0) {
        LOG_ERROR("%s", err);
        return 1;
    }

    /* 3. state shared by RPC and IPC */
    gethostname(host, sizeof(host) - 1);
    struct registry *reg = registry_create(host);
    struct status_table *st = status_create();
    if (!reg || !st) {
        close(tcp_fd);
        goto out_state;
    }
    if (ipc_socket_dir(flags.ipc_socket_dir, dir, sizeof(dir)) != 0) {
        LOG_ERROR("cannot resolve the socket directory (passwd home of uid %u)", (unsigned)getuid());
        dir[0] = '\0';
    }

    /* 4. local RPC socket dyno.sock (always) */
    struct sock_file dyno_sock = { .fd = -1 };
    if (dir[0] && sock_file_create(&dyno_sock, dir, "dyno.sock", SOCK_STREAM,
                                   (mode_t)flags.ipc_socket_mode) == -EADDRINUSE) {
        LOG_ERROR("refusing to start: another dynolog serves %s/dyno.sock", dir);
        close(tcp_fd);
        goto out_state;
    }

    /* 5. loggers (sinks for data messages) */
    struct data_router data;
    data_router_init(&data);
    if (flags.use_JSON)
        data_router_add(&data, json_logger_sink());

    /* 6. IPC endpoints (non-fatal, except a live daemon on the same control socket) */
    struct ipc_server *ipc = NULL;
    if (flags.enable_ipc_monitor && dir[0]) {
        bool conflict = false;
        const char *kdir = getenv("KINETO_IPC_SOCKET_DIR");
        struct ipc_server_cfg icfg = { dir, (mode_t)flags.ipc_socket_mode, kdir, reg, st, &data };
        ipc = ipc_server_create(&icfg, &conflict);
        if (conflict) {
            LOG_ERROR("refusing to start: another dynolog serves %s/dynolog.sock", dir);
            close(tcp_fd);
            goto out_ipc;
        }
    }

    /* 7. threads: RPC loop, IPC control + data, registry GC */
    struct rpc_ctx ctx = { reg, st, MSMON_VERSION };
    struct rpc_server *rpc = rpc_server_create(tcp_fd, dyno_sock.fd, flags.rpc_max_clients, &ctx);
    if (!rpc || rpc_server_start(rpc) != 0) {
        LOG_ERROR("cannot start the RPC server");
        if (!rpc)
            close(tcp_fd);
        goto out_rpc;
    }
    if (ipc && ipc_server_start(ipc) != 0) {
        LOG_ERROR("cannot start the IPC threads");
        goto out_rpc;
    }
    struct gc_thread *gc = gc_thread_create(reg, st, (uint64_t)flags.registry_gc_interval_ms,
                                            (uint64_t)flags.registry_gc_age_ms);
    if (!gc || gc_thread_start(gc) != 0) {
        LOG_ERROR("cannot start the registry GC thread");
        goto out_gc;
    }

    /* 8. run until SIGTERM/SIGINT */
    while (sigwait(&sigs, &sig) != 0)
        ;
    LOG_INFO("Received signal %d (%s), shutting down", sig, strsignal(sig));
    rc = 0;

out_gc:
    gc_thread_destroy(gc);
out_rpc:
    rpc_server_destroy(rpc);      /* stops accepting, finishes in-flight requests */
out_ipc:
    ipc_server_destroy(ipc);      /* unlinks dynolog.sock / dynolog_data.sock if still ours */
    data_router_fini(&data);
    sock_file_close(&dyno_sock);
out_state:
    status_destroy(st);
    registry_destroy(reg);
    return rc;
}
