/* noipv6: LD_PRELOAD shim for tests that makes socket(AF_INET6, ...) fail with EAFNOSUPPORT,
 * as on a kernel booted with ipv6.disable=1, so the daemon's IPv4 fallback (docs/design/rpc.md#transport)
 * runs for real without needing such a kernel. */
#include <dlfcn.h>
#include <errno.h>
#include <sys/socket.h>

int socket(int domain, int type, int protocol)
{
    static int (*real_socket)(int, int, int);
    if (domain == AF_INET6) {
        errno = EAFNOSUPPORT;
        return -1;
    }
    if (!real_socket)
        real_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
    return real_socket(domain, type, protocol);
}
