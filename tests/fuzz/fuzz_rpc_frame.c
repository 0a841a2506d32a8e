/* fuzz_rpc_frame: the daemon's RPC transport as a client sees it — a real rpc_server on the
 * real loop behind a dyno.sock listener; each input is the byte stream of one connection
 * (4-byte native length, body, anything after), then end of stream. Invariants: the server
 * always closes (no hang), and whatever it sends is exactly one well-formed frame. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/ipc/registry.h"
#include "daemon/ipc/sock_file.h"
#include "daemon/ipc/status.h"
#include "daemon/loop.h"
#include "daemon/rpc/rpc_methods.h"
#include "daemon/rpc/rpc_server.h"

/* Seeds hold NUL bytes (the length prefix), so they live only in corpus/fuzz_rpc_frame/
 * (tests/fuzz/make_corpus.py), not in a fuzz_seeds string table. */

struct client {
    struct loop *loop;
    uint8_t buf[1 << 16];
    size_t got;
    bool overflow;
};

static void on_client(struct loop_event *ev, int fd, unsigned events, void *arg)
{
    struct client *c = arg;
    (void)ev;
    (void)events;
    for (;;) {
        uint8_t tmp[4096];
        ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
        if (n > 0) {
            if (c->got + (size_t)n > sizeof(c->buf))
                c->overflow = true;
            else
                memcpy(c->buf + c->got, tmp, (size_t)n);
            c->got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        loop_stop(c->loop);   /* EOF or reset: the server closed */
        return;
    }
}

static void on_hang(struct loop_event *ev, void *arg)
{
    (void)ev;
    (void)arg;
    fprintf(stderr, "fuzz_rpc_frame: the server neither replied nor closed within 10 s\n");
    abort();
}

static struct sock_file sf = { .fd = -1 };
static char sockdir[] = "/tmp/fuzz_rpcXXXXXX";

static void cleanup(void)
{
    sock_file_close(&sf);
    rmdir(sockdir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct loop *loop;
    static struct registry *reg;
    static struct status_table *st;
    static struct rpc_ctx ctx;
    static struct rpc_server *srv; /* lives for the process, like the loop */
    static struct client cl;
    if (!loop) {
        log_set_level(LOG_LVL_FATAL);
        if (registry_create("fuzz", &reg) != 0 || status_create(&st) != 0)
            abort();
        ctx = (struct rpc_ctx){ .reg = reg, .st = st, .version = "0.3.2" };
        if (!mkdtemp(sockdir) || loop_create(&loop) != 0 ||
            sock_file_create(&sf, sockdir, "dyno.sock", SOCK_STREAM, 0600) != 0 ||
            rpc_server_create(loop, -1, NULL, sf.fd, 64, &ctx, &srv) != 0)
            abort();
        cl.loop = loop;
        atexit(cleanup);
    }
    if (size > 16384)
        return 0;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t pl = strnlen(sf.path, sizeof(sf.path));
    if (pl >= sizeof(sa.sun_path))
        abort();
    memcpy(sa.sun_path, sf.path, pl);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        abort();
    /* the whole input fits the socket buffer; then end of stream */
    if (size && send(fd, data, size, MSG_NOSIGNAL) != (ssize_t)size)
        abort();
    shutdown(fd, SHUT_WR);
    struct loop_event *cev = NULL, *hang = NULL;
    cl.got = 0;
    cl.overflow = false;
    if (loop_fd_add(loop, fd, LOOP_READ, on_client, &cl, &cev) != 0 ||
        loop_timer_add(loop, 10000, false, on_hang, NULL, &hang) != 0)
        abort();
    loop_run(loop);
    loop_event_free(cev);
    loop_event_free(hang);
    close(fd);
    /* nothing, or exactly one frame: int32 length in 1..64 MiB, then that many bytes */
    if (cl.got) {
        int32_t n;
        if (cl.overflow || cl.got < 4)
            abort();
        memcpy(&n, cl.buf, 4);
        if (n <= 0 || (size_t)n != cl.got - 4)
            abort();
    }
    registry_gc(reg, UINT64_MAX, 0);
    return 0;
}
