/* sock_file: filesystem Unix socket endpoints created by the daemon (docs/design/ipc.md#socket-files):
 * directory and length checks, ownership and live-daemon probe of an existing file, stale
 * unlink, bind + chmod, and an inode-checked unlink at shutdown. */
#ifndef MSMON_DAEMON_SOCK_FILE_H
#define MSMON_DAEMON_SOCK_FILE_H

#include <stdbool.h>
#include <sys/types.h>

struct sock_file {
    char path[128];
    dev_t dev;
    ino_t ino;
    int fd;            /* bound socket (stream sockets also listening), -1 if none */
};

/* Create <dir>/<name> (name includes ".sock") as a socket of `type` (SOCK_DGRAM or
 * SOCK_STREAM, the latter listening with backlog 50), non-blocking, close-on-exec, mode
 * `mode`. Returns 0, or a negative errno after logging the ERROR: -ENOTDIR (dir missing),
 * -ENAMETOOLONG (> 106 bytes), -EPERM (existing file not ours), -EADDRINUSE (another live
 * daemon serves it), or the failing syscall's error. */
int sock_file_create(struct sock_file *sf, const char *dir, const char *name, int type,
                     mode_t mode);
/* Close the socket and unlink the path if it still is the inode we created. Idempotent. */
void sock_file_close(struct sock_file *sf);

#endif
