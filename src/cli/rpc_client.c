/* rpc_client: blocking-free client side of the dyno RPC. The socket is non-blocking and
 * every step polls against one monotonic deadline, so a silent server costs at most
 * --timeout-s (getaddrinfo itself cannot be bounded and is the one exception). */
#include "cli/rpc_client.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/hosts.h"
#include "common/log.h"
#include "ipc/ipc_msg.h"

#define CONNECT_MSG "Couldn't connect to the server...: "
#define NO_REPLY_MSG "No reply from the server (the request may be unknown to this dynolog version)"

static const char *err_text(int e, char *buf, size_t cap)
{
    /* GNU strerror_r: thread-safe, returns the message (maybe not in buf). */
    return strerror_r(e, buf, cap);
}

static int remaining_ms(uint64_t deadline_ns)
{
    uint64_t now = clock_mono_ns();
    if (now >= deadline_ns)
        return 0;
    uint64_t ms = (deadline_ns - now + 999999) / 1000000;
    return ms > 3600000 ? 3600000 : (int)ms;
}

/* Wait for `events` on fd; 0 ready, -ETIMEDOUT, or -errno. */
static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
    for (;;) {
        int ms = remaining_ms(deadline_ns);
        if (ms == 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, ms);
        if (n > 0)
            return 0;
        if (n == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

static int connect_addr(const struct sockaddr *sa, socklen_t salen, int family,
                        uint64_t deadline_ns, int *ret_fd)
{
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int r = 0;
    if (connect(fd, sa, salen) < 0) {
        if (errno != EINPROGRESS && errno != EAGAIN) {
            r = -errno;
            goto fail;
        }
        r = wait_fd(fd, POLLOUT, deadline_ns);
        if (r < 0)
            goto fail;
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
            soerr = errno;
        if (soerr) {
            r = -soerr;
            goto fail;
        }
    }
    *ret_fd = fd;
    return 0;
fail:
    close(fd);
    return r;
}

static int connect_target(const char *target, uint16_t port, const char *sock_dir,
                          uint64_t deadline_ns, int timeout_s, int *ret_fd, char *err,
                          size_t errcap)
{
    char ebuf[128];
    int r;
    if (strncmp(target, HOSTS_UNIX_PREFIX, 5) == 0) {
        char dir[256], path[512];
        const char *p = target + 5;
        if (*p == '\0') {
            r = ipc_socket_dir(sock_dir, dir, sizeof(dir));
            if (r == 0)
                r = ipc_socket_path(dir, "dyno", path, sizeof(path));
            if (r < 0) {
                snprintf(err, errcap, CONNECT_MSG "cannot locate dyno.sock: %s",
                         err_text(-r, ebuf, sizeof(ebuf)));
                return r;
            }
            p = path;
        }
        struct sockaddr_un sa;
        socklen_t salen;
        r = ipc_addr_path(&sa, &salen, p);
        if (r == 0)
            r = connect_addr((struct sockaddr *)&sa, salen, AF_UNIX, deadline_ns, ret_fd);
        if (r == -ETIMEDOUT)
            snprintf(err, errcap, CONNECT_MSG "%s: timed out after %d s", p, timeout_s);
        else if (r < 0)
            snprintf(err, errcap, CONNECT_MSG "%s: %s", p, err_text(-r, ebuf, sizeof(ebuf)));
        return r;
    }
    /* "[v6]" -> "v6" for getaddrinfo; the text as given stays the display name. */
    char host[1024];
    size_t n = strlen(target);
    if (n >= 2 && target[0] == '[' && target[n - 1] == ']') {
        target++;
        n -= 2;
    }
    if (n >= sizeof(host)) {
        snprintf(err, errcap, CONNECT_MSG "host name too long");
        return -ENAMETOOLONG;
    }
    memcpy(host, target, n);
    host[n] = '\0';
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%u", (unsigned)port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int g = getaddrinfo(host, portstr, &hints, &ai);
    if (g != 0 || !ai) {
        snprintf(err, errcap, CONNECT_MSG "failed to resolve '%s': %s", host,
                 g == EAI_SYSTEM ? err_text(errno, ebuf, sizeof(ebuf)) : gai_strerror(g));
        if (ai)
            freeaddrinfo(ai);
        return -EHOSTUNREACH;
    }
    /* Upstream uses the first address only. */
    r = connect_addr(ai->ai_addr, ai->ai_addrlen, ai->ai_family, deadline_ns, ret_fd);
    freeaddrinfo(ai);
    if (r == -ETIMEDOUT)
        snprintf(err, errcap, CONNECT_MSG "timed out after %d s", timeout_s);
    else if (r < 0)
        snprintf(err, errcap, CONNECT_MSG "%s", err_text(-r, ebuf, sizeof(ebuf)));
    return r;
}

static int send_all(int fd, const void *buf, size_t len, uint64_t deadline_ns)
{
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN)
            return -errno;
        int r = wait_fd(fd, POLLOUT, deadline_ns);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Read exactly len bytes; *ret_got says how many arrived before EOF/error. */
static int recv_all(int fd, void *buf, size_t len, uint64_t deadline_ns, size_t *ret_got)
{
    char *p = buf;
    size_t got = 0;
    int r = 0;
    while (got < len) {
        ssize_t n = recv(fd, p + got, len - got, 0);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n == 0) {
            r = -ENODATA;
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN) {
            r = -errno;
            break;
        }
        r = wait_fd(fd, POLLIN, deadline_ns);
        if (r < 0)
            break;
    }
    *ret_got = got;
    return r;
}

int rpc_call(const char *target, uint16_t port, const char *sock_dir, int timeout_s,
             const char *body, size_t body_len, char **ret_reply, size_t *ret_len,
             enum rpc_fail *ret_fail, char *err, size_t errcap)
{
    uint64_t deadline = clock_mono_ns() + (uint64_t)timeout_s * 1000000000ull;
    char ebuf[128];
    char *reply = NULL;
    int fd = -1;
    size_t got = 0;
    int r;

    *ret_fail = RPC_OK;
    if (body_len == 0 || body_len > RPC_REQ_MAX) {
        snprintf(err, errcap, "request too large (%zu bytes, limit %d)", body_len, RPC_REQ_MAX);
        *ret_fail = RPC_FAIL_SEND;
        return -EMSGSIZE;
    }
    r = connect_target(target, port, sock_dir, deadline, timeout_s, &fd, err, errcap);
    if (r < 0) {
        *ret_fail = RPC_FAIL_CONNECT;
        return r;
    }
    uint32_t len32 = (uint32_t)body_len;
    char head[4];
    memcpy(head, &len32, 4); /* native byte order, as upstream */
    r = send_all(fd, head, 4, deadline);
    if (r == 0)
        r = send_all(fd, body, body_len, deadline);
    if (r < 0) {
        *ret_fail = r == -ETIMEDOUT ? RPC_FAIL_TIMEOUT : RPC_FAIL_SEND;
        if (r == -ETIMEDOUT)
            snprintf(err, errcap, "Timed out after %d s sending the request", timeout_s);
        else
            snprintf(err, errcap, "Failed to send the request: %s", err_text(-r, ebuf, sizeof(ebuf)));
        goto out;
    }
    r = recv_all(fd, head, 4, deadline, &got);
    if (r < 0) {
        if (r == -ETIMEDOUT) {
            *ret_fail = RPC_FAIL_TIMEOUT;
            snprintf(err, errcap, "Timed out after %d s waiting for the reply", timeout_s);
        } else if (got == 0 && (r == -ENODATA || r == -ECONNRESET)) {
            *ret_fail = RPC_FAIL_NO_REPLY;
            snprintf(err, errcap, NO_REPLY_MSG);
        } else {
            *ret_fail = RPC_FAIL_BAD_REPLY;
            snprintf(err, errcap, "Truncated reply from the server (%zu of 4 length bytes)", got);
        }
        goto out;
    }
    memcpy(&len32, head, 4);
    if (len32 == 0 || len32 > RPC_REPLY_MAX) {
        *ret_fail = RPC_FAIL_BAD_REPLY;
        /* The frame length is an int32 on the wire (01-rpc.md §1.2): show it signed. */
        snprintf(err, errcap, "Invalid reply length %" PRId32 " from the server (limit %u)",
                 (int32_t)len32, RPC_REPLY_MAX);
        r = -EBADMSG;
        goto out;
    }
    reply = malloc((size_t)len32 + 1);
    if (!reply) {
        *ret_fail = RPC_FAIL_BAD_REPLY;
        snprintf(err, errcap, "Out of memory for a %u-byte reply", len32);
        r = -ENOMEM;
        goto out;
    }
    r = recv_all(fd, reply, len32, deadline, &got);
    if (r < 0) {
        if (r == -ETIMEDOUT) {
            *ret_fail = RPC_FAIL_TIMEOUT;
            snprintf(err, errcap, "Timed out after %d s waiting for the reply", timeout_s);
        } else {
            *ret_fail = RPC_FAIL_BAD_REPLY;
            snprintf(err, errcap, "Truncated reply from the server (%zu of %u bytes)", got, len32);
        }
        free(reply);
        reply = NULL;
        goto out;
    }
    reply[len32] = '\0';
    *ret_reply = reply;
    *ret_len = len32;
out:
    close(fd);
    return r;
}
