/* sock_file: the existence/ownership/liveness rules of docs/design/ipc.md#socket-files in one place, used for
 * dynolog.sock, dynolog_data.sock and dyno.sock. */
#include "daemon/ipc/sock_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/strutil.h"
#include "ipc/ipc_msg.h"

#define RPC_BACKLOG 50

/* Is a live peer serving this socket path? Probe with a throw-away socket. */
static bool probe_live(const char *path, int type)
{
    struct sockaddr_un addr;
    socklen_t alen;
    bool live = false;
    if (ipc_addr_path(&addr, &alen, path) != 0)
        return false;
    int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return false;
    /* non-blocking stream connect to a live listener succeeds or gets EAGAIN (full backlog) */
    if (connect(fd, (struct sockaddr *)&addr, alen) == 0 || errno == EAGAIN || errno == EINPROGRESS)
        live = true;
    close(fd);
    return live;
}

int sock_file_create(struct sock_file *sf, const char *dir, const char *name, int type,
                     mode_t mode)
{
    struct stat st;
    struct sockaddr_un addr;
    socklen_t alen;
    int rc, fd = -1;
    memset(sf, 0, sizeof(*sf));
    sf->fd = -1;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        LOG_ERROR("socket directory %s does not exist or is not a directory; %s not created", dir, name);
        return -ENOTDIR;
    }
    /* Trailing slashes are dropped (as the plugin and dyno do in ipc_socket_path): the
     * bound name is the source address of every reply, and the plugin accepts a reply only
     * from exactly <dir>/dynolog.sock, so "<dir>//dynolog.sock" would lose them all. */
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    int n = snprintf(sf->path, sizeof(sf->path), "%.*s/%s", (int)dl, dir, name);
    if (n < 0 || n > IPC_SOCK_PATH_MAX) {
        LOG_ERROR("socket path %s/%s is longer than %d bytes; endpoint not created", dir, name,
                  IPC_SOCK_PATH_MAX);
        sf->path[0] = '\0';
        return -ENAMETOOLONG;
    }
    if (lstat(sf->path, &st) == 0) {
        if (st.st_uid != geteuid()) {
            LOG_ERROR("%s exists and is not owned by us (uid %u)", sf->path, (unsigned)st.st_uid);
            rc = -EPERM;
            goto fail;
        }
        if (S_ISSOCK(st.st_mode) && probe_live(sf->path, type)) {
            LOG_ERROR("another dynolog instance is serving %s", sf->path);
            rc = -EADDRINUSE;
            goto fail;
        }
        if (unlink(sf->path) != 0 && errno != ENOENT) {
            rc = -errno;
            LOG_ERROR("cannot remove stale %s: %s", sf->path, errno_name(errno));
            goto fail;
        }
        LOG_INFO("removed stale socket file %s", sf->path);
    }
    fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        rc = -errno;
        LOG_ERROR("socket(AF_UNIX) for %s failed: %s", sf->path, errno_name(errno));
        goto fail;
    }
    rc = ipc_addr_path(&addr, &alen, sf->path);
    if (rc)
        goto fail_fd;
    /* datagram endpoints judge senders by their kernel credentials (ipc_server.c); set before
     * bind, so no datagram can be queued without them once the name exists */
    int one = 1;
    if (type == SOCK_DGRAM && setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0) {
        rc = -errno;
        LOG_ERROR("SO_PASSCRED on %s failed: %s", sf->path, errno_name(errno));
        goto fail_fd;
    }
    if (bind(fd, (struct sockaddr *)&addr, alen) != 0) {
        rc = -errno;
        LOG_ERROR("bind %s failed: %s (%s)", sf->path, errno_name(errno), strerror(errno));
        goto fail_fd;
    }
    if (chmod(sf->path, mode) != 0 || stat(sf->path, &st) != 0) {
        rc = -errno;
        LOG_ERROR("chmod %s failed: %s", sf->path, errno_name(errno));
        unlink(sf->path);
        goto fail_fd;
    }
    sf->dev = st.st_dev;
    sf->ino = st.st_ino;
    if (type == SOCK_STREAM && listen(fd, RPC_BACKLOG) != 0) {
        rc = -errno;
        LOG_ERROR("listen %s failed: %s", sf->path, errno_name(errno));
        unlink(sf->path);
        goto fail_fd;
    }
    sf->fd = fd;
    return 0;
fail_fd:
    close(fd);
fail:
    sf->path[0] = '\0';
    return rc;
}

void sock_file_close(struct sock_file *sf)
{
    struct stat st;
    if (sf->fd >= 0) {
        close(sf->fd);
        sf->fd = -1;
    }
    if (sf->path[0] && stat(sf->path, &st) == 0 && st.st_dev == sf->dev && st.st_ino == sf->ino)
        unlink(sf->path);
    sf->path[0] = '\0';
}
