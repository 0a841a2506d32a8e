/* ipc_client: lazily bound abstract datagram socket of the plugin. Sends retry with
 * exponential backoff because the daemon's receive queue may be momentarily full
 * (EAGAIN) or the daemon may be restarting (ECONNREFUSED); a missing or unwritable socket
 * file fails at once since retrying cannot help. */
#include "plugin/control/ipc_client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/strutil.h"

#define IPC_CLIENT_RECV_CAP (IPC_HDR_SIZE + IPC_CLIENT_MAX_PAYLOAD)

struct ipc_client {
    pthread_mutex_t lock;          /* guards fd creation */
    int fd;                        /* -1 until first use */
    uint64_t refused;              /* datagrams dropped for their sender (atomic) */
    struct log_ratelimit rl_refused;
    char dir[PATH_MAX];
    char ctrl_path[IPC_SOCK_PATH_MAX + 2];
    char bound_path[PATH_MAX + 64]; /* "" unless bound in the socket directory */
    ipc_client_sleep_fn sleep_fn;
    void *sleep_ctx;
    uint8_t rbuf[IPC_CLIENT_RECV_CAP];
};

static void ipc_client_real_sleep(void *ctx, uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull) };
    (void)ctx;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int ipc_client_create(const char *sock_dir, struct ipc_client **ret)
{
    struct ipc_client *c;
    int rc;

    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->fd = -1;
    c->sleep_fn = ipc_client_real_sleep;
    if (sock_dir)
        rc = str_copy(c->dir, sizeof(c->dir), sock_dir, strlen(sock_dir));
    else
        rc = ipc_socket_dir(NULL, c->dir, sizeof(c->dir));
    if (rc != 0)
        goto err_free;
    rc = ipc_socket_path(c->dir, IPC_CLIENT_CTRL, c->ctrl_path, sizeof(c->ctrl_path));
    if (rc != 0)
        goto err_free;
    pthread_mutex_init(&c->lock, NULL);
    *ret = c;
    return 0;

err_free:
    LOG_ERROR("ipc: cannot resolve the daemon socket directory '%s': %s", c->dir, errno_name(-rc));
    free(c);
    return rc;
}

void ipc_client_destroy(struct ipc_client *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    if (c->bound_path[0])
        (void)unlink(c->bound_path);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void ipc_client_set_sleep(struct ipc_client *c, ipc_client_sleep_fn fn, void *ctx)
{
    c->sleep_fn = fn ? fn : ipc_client_real_sleep;
    c->sleep_ctx = ctx;
}

/* Whether the daemon shares our network namespace, by the link it publishes beside its sockets
 * (docs/design/ipc.md#network-namespaces). Without the link (an older or upstream daemon, or one
 * of another user) the abstract socket upstream expects. */
static bool ipc_client_same_netns(const struct ipc_client *c)
{
    char path[PATH_MAX + 32], theirs[64], ours[64];
    struct stat st;
    ssize_t n, m;

    if (snprintf(path, sizeof(path), "%s/" NAMES_NETNS_LINK, c->dir) >= (int)sizeof(path) || lstat(path, &st) != 0 ||
        !S_ISLNK(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0))
        return true;
    n = readlink(path, theirs, sizeof(theirs) - 1);
    m = readlink("/proc/self/ns/net", ours, sizeof(ours) - 1);
    if (n <= 0 || m <= 0)
        return true;
    return n == m && memcmp(theirs, ours, (size_t)n) == 0;
}

/* Create and bind the socket once: abstract, or in the socket directory when the daemon is in
 * another network namespace; returns the fd or -errno. */
static int ipc_client_fd(struct ipc_client *c)
{
    struct sockaddr_un addr;
    socklen_t alen;
    char name[64];
    int fd, rc, via_fd = -1;
    char via_path[IPC_SOCK_PATH_MAX + 2];
    bool in_dir = false;

    pthread_mutex_lock(&c->lock);
    fd = c->fd;
    if (fd >= 0)
        goto out;
    rc = ipc_client_name(name, sizeof(name));
    if (rc == 0 && !ipc_client_same_netns(c)) {
        /* an abstract name is one per network namespace: the daemon's reply would look for it in
         * its own. A file in the shared directory reaches it from any. */
        rc = ipc_socket_path(c->dir, name, c->bound_path, sizeof(c->bound_path));
        if (rc == 0)
            rc = ipc_addr_path(&addr, &alen, c->bound_path);
        if (rc == -ENAMETOOLONG) {
            /* a socket address holds 108 bytes; a deep directory is reached through a
             * descriptor of it instead (the daemon goes by the file name alone) */
            int dfd = open(c->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
            char via[64];
            if (dfd >= 0 && snprintf(via, sizeof(via), "/proc/self/fd/%d", dfd) < (int)sizeof(via) &&
                ipc_socket_path(via, name, via_path, sizeof(via_path)) == 0 && ipc_addr_path(&addr, &alen, via_path) == 0 &&
                snprintf(c->bound_path, sizeof(c->bound_path), "%s/%s.sock", c->dir, name) < (int)sizeof(c->bound_path)) {
                via_fd = dfd;
                rc = 0;
            } else if (dfd >= 0) {
                close(dfd);
            }
        }
        if (rc != 0) {
            LOG_WARN("ipc: the daemon is in another network namespace, but %s/%s.sock is too long a path "
                     "for a socket: replies cannot reach this process (docs/deploy.md)", c->dir, name);
            c->bound_path[0] = '\0';
            rc = ipc_addr_abstract(&addr, &alen, name, true);
        } else {
            in_dir = true;
        }
    } else if (rc == 0) {
        rc = ipc_addr_abstract(&addr, &alen, name, true);
    }
    if (rc != 0) {
        fd = rc;
        goto out;
    }
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fd = -errno;
        LOG_ERROR("ipc: socket() failed: %s", errno_name(-fd));
        goto out;
    }
    /* Before bind, so that no datagram can arrive without its sender's credentials: the
     * reply's source path proves nothing, since another user can bind the same path in a
     * mount namespace of its own (docs/security.md, "Local: the rank trusts only its daemon"). */
    {
        int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0) {
            rc = -errno;
            LOG_ERROR("ipc: setsockopt(SO_PASSCRED) failed: %s", errno_name(-rc));
            close(fd);
            fd = rc;
            goto out;
        }
    }
    rc = bind(fd, (struct sockaddr *)&addr, alen) != 0 ? -errno : 0;
    if (rc != 0) {
        LOG_ERROR("ipc: bind of %s%s failed: %s", in_dir ? "" : "@", in_dir ? c->bound_path : name, errno_name(-rc));
        close(fd);
        c->bound_path[0] = '\0';
        fd = rc;
        goto out;
    }
    if (in_dir) {
        (void)chmod(c->bound_path, 0600); /* the daemon runs as root or as us */
        LOG_INFO("ipc: the daemon is in another network namespace: its replies come to %s", c->bound_path);
    }
    c->fd = fd;
out:
    if (via_fd >= 0)
        close(via_fd);
    pthread_mutex_unlock(&c->lock);
    return fd;
}

int ipc_client_send(struct ipc_client *c, const char *dest, const char *tag, const void *payload,
                    size_t len, unsigned retries, uint64_t first_sleep_ns, unsigned flags)
{
    enum log_level lvl = (flags & IPC_CLIENT_QUIET) ? LOG_LVL_DEBUG : LOG_LVL_ERROR;
    uint8_t stackbuf[IPC_HDR_SIZE + 1024];
    uint8_t *msg = stackbuf;
    char path[IPC_SOCK_PATH_MAX + 2];
    struct sockaddr_un addr;
    socklen_t alen;
    uint64_t sleep_ns = first_sleep_ns;
    long total;
    int fd, rc;

    rc = ipc_socket_path(c->dir, dest, path, sizeof(path));
    if (rc != 0) {
        LOG_ERROR("ipc: socket path for '%s' in '%s' is too long", dest, c->dir);
        return rc;
    }
    if (access(path, W_OK) != 0) {
        if (lvl >= log_get_level())
            log_write(lvl, __FILE__, __LINE__, "UNIX Socket path is not exist or not writable: %s", path);
        return -ENOENT;
    }
    /* in a shared socket directory anyone may have bound the name: talk only to a socket
     * of our own uid or root, so a fake daemon cannot drive this process */
    struct stat st;
    if (lstat(path, &st) != 0)
        return -ENOENT;
    if (!S_ISSOCK(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0)) {
        static struct log_ratelimit rl;
        LOG_RL(&rl, 60000, LOG_LVL_ERROR,
               "ipc: %s is not a socket owned by uid %u or root (owner uid %u); not talking to it",
               path, (unsigned)geteuid(), (unsigned)st.st_uid);
        return -EPERM;
    }
    rc = ipc_addr_path(&addr, &alen, path);
    if (rc != 0)
        return rc;
    fd = ipc_client_fd(c);
    if (fd < 0)
        return fd;
    if (len + IPC_HDR_SIZE > sizeof(stackbuf)) {
        msg = malloc(len + IPC_HDR_SIZE);
        if (!msg)
            return -ENOMEM;
    }
    total = ipc_msg_build(msg, len + IPC_HDR_SIZE, tag, payload, len);
    if (total < 0) {
        rc = (int)total;
        goto out;
    }
    for (unsigned attempt = 0;; attempt++) {
        if (sendto(fd, msg, (size_t)total, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&addr, alen) ==
            total) {
            rc = 0;
            break;
        }
        rc = -errno;
        if ((rc != -EAGAIN && rc != -EWOULDBLOCK && rc != -ECONNREFUSED) || attempt >= retries) {
            if (lvl >= log_get_level())
                log_write(lvl, __FILE__, __LINE__, "ipc: send of '%s' to %s failed after %u attempt(s): %s", tag,
                          path, attempt + 1, errno_name(-rc));
            break;
        }
        LOG_DEBUG("ipc: send of '%s' to %s: %s, retry in %llu ns", tag, path, errno_name(-rc),
                  (unsigned long long)sleep_ns);
        c->sleep_fn(c->sleep_ctx, sleep_ns);
        sleep_ns *= 2;
    }
out:
    if (msg != stackbuf)
        free(msg);
    return rc;
}

/* The kernel's account of who sent the datagram (SO_PASSCRED): false when absent. Any
 * descriptors passed along are closed, never kept. */
static bool ipc_client_sender(struct msghdr *mh, struct ucred *ret)
{
    bool found = false;

    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET)
            continue;
        if (cm->cmsg_type == SCM_CREDENTIALS && cm->cmsg_len >= CMSG_LEN(sizeof(*ret))) {
            memcpy(ret, CMSG_DATA(cm), sizeof(*ret));
            found = true;
        } else if (cm->cmsg_type == SCM_RIGHTS) {
            size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t j = 0; j < k; j++) {
                int xfd;
                memcpy(&xfd, CMSG_DATA(cm) + j * sizeof(int), sizeof(int));
                close(xfd);
            }
        }
    }
    return found;
}

/* Count one refused datagram and say so, rate-limited, with the running total. */
static void ipc_client_refuse(struct ipc_client *c, const char *why, const struct ucred *cred)
{
    uint64_t n = __atomic_add_fetch(&c->refused, 1, __ATOMIC_RELAXED);

    if (cred)
        LOG_RL(&c->rl_refused, 10000, LOG_LVL_WARNING,
               "ipc: refused a datagram from pid %d uid %u: %s (only uid %u or root may configure this "
               "process; %llu refused so far)", (int)cred->pid, (unsigned)cred->uid, why, (unsigned)geteuid(),
               (unsigned long long)n);
    else
        LOG_RL(&c->rl_refused, 10000, LOG_LVL_WARNING, "ipc: refused a datagram: %s (%llu refused so far)", why,
               (unsigned long long)n);
}

uint64_t ipc_client_refused(struct ipc_client *c)
{
    return __atomic_load_n(&c->refused, __ATOMIC_RELAXED);
}

/* The source is <our dir>/dynolog.sock, or a path ending in /dynolog.sock (the same socket as the
 * daemon's mount namespace names it). */
static bool ipc_client_from_ctrl(const struct sockaddr_un *from, socklen_t flen, const char *ctrl_path,
                                 size_t pathlen)
{
    static const char base[] = "/" NAMES_SOCK_FILE(NAMES_SOCK_CTL);
    const size_t off = offsetof(struct sockaddr_un, sun_path);
    size_t n;

    if (flen <= off || from->sun_path[0] == '\0')
        return false;
    n = strnlen(from->sun_path, (size_t)flen - off);
    if (n == pathlen && memcmp(from->sun_path, ctrl_path, pathlen) == 0)
        return true;
    return n >= sizeof(base) - 1 && memcmp(from->sun_path + n - (sizeof(base) - 1), base, sizeof(base) - 1) == 0;
}

int ipc_client_recv(struct ipc_client *c, int timeout_ms, struct ipc_client_msg *ret)
{
    uint64_t deadline = clock_mono_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    int fd = ipc_client_fd(c);

    if (fd < 0)
        return fd;
    for (;;) {
        struct sockaddr_un from;
        struct iovec iov = { c->rbuf, sizeof(c->rbuf) };
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(4 * sizeof(int))];
        } ctl;
        struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov, .msg_iovlen = 1,
                             .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
        struct ucred cred;
        socklen_t flen;
        struct ipc_view v;
        enum ipc_drop why;
        char fromstr[128];
        ssize_t real;
        size_t pathlen = strlen(c->ctrl_path);
        uint64_t now;

        memset(&from, 0, sizeof(from));
        real = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
        if (real < 0) {
            struct pollfd pfd = { .fd = fd, .events = POLLIN };
            int err = errno;
            if (err == EINTR)
                continue;
            if (err != EAGAIN && err != EWOULDBLOCK)
                return -err;
            now = clock_mono_ns();
            if (now >= deadline)
                return -EAGAIN;
            (void)poll(&pfd, 1, (int)((deadline - now + 999999) / 1000000));
            continue;
        }
        flen = mh.msg_namelen;
        /* Who sent it, by the kernel's word: the daemon runs as root or as our own user. */
        if (!ipc_client_sender(&mh, &cred)) {
            ipc_client_refuse(c, "no sender credentials", NULL);
            continue;
        }
        if (cred.uid != 0 && cred.uid != geteuid()) {
            ipc_client_refuse(c, "sender is neither root nor this process's user", &cred);
            continue;
        }
        /* Source check: the daemon's control socket, by its path or, when the socket directory is
         * mounted elsewhere in this container (docs/deploy.md), by its name in the daemon's own
         * directory: the credentials above are what make it the daemon. */
        if (!ipc_client_from_ctrl(&from, flen, c->ctrl_path, pathlen)) {
            ipc_addr_str(&from, flen, fromstr, sizeof(fromstr));
            ipc_client_refuse(c, "unexpected source address", &cred);
            LOG_DEBUG("ipc: dropped datagram from unexpected source %s", fromstr);
            continue;
        }
        why = ipc_msg_parse(c->rbuf, (size_t)real > sizeof(c->rbuf) ? sizeof(c->rbuf) : (size_t)real,
                            (size_t)real, sizeof(c->rbuf), &v);
        if (why != IPC_OK) {
            LOG_WARN("ipc: dropped datagram of %zd bytes from the daemon: %s", real, ipc_drop_reason_str(why));
            continue;
        }
        ret->type = v.type;
        memcpy(ret->type_str, v.type_str, sizeof(ret->type_str));
        ret->payload = v.payload;
        ret->len = v.len;
        return 0;
    }
}

uint64_t ipc_client_dest_stamp(struct ipc_client *c, const char *dest)
{
    char path[IPC_SOCK_PATH_MAX + 2];
    struct stat st;
    uint64_t stamp;

    if (ipc_socket_path(c->dir, dest, path, sizeof(path)) != 0 || stat(path, &st) != 0)
        return 0;
    stamp = (uint64_t)st.st_ino * 0x9E3779B97F4A7C15ull;
    stamp ^= (uint64_t)st.st_ctim.tv_sec * 1000000000ull + (uint64_t)st.st_ctim.tv_nsec;
    return stamp ? stamp : 1;
}
