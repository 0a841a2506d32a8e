/* ipc_msg: datagram codec and address helpers shared by daemon and plugin.
 * Validation is strict (exact tags, NUL inside the 32-byte tag, size never trusted). */
#include "ipc/ipc_msg.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static const char *const tags[] = {
    [IPC_T_UNKNOWN] = "",
    [IPC_T_CTXT] = IPC_TYPE_CTXT,
    [IPC_T_REQ] = IPC_TYPE_REQ,
    [IPC_T_TRACE_STATUS] = IPC_TYPE_TRACE_STATUS,
    [IPC_T_MONITOR_STATUS] = IPC_TYPE_MONITOR_STATUS,
    [IPC_T_DATA] = IPC_TYPE_DATA,
};

const char *ipc_drop_reason_str(enum ipc_drop d)
{
    switch (d) {
    case IPC_OK: return "ok";
    case IPC_DROP_TOO_BIG: return "exceeds max size";
    case IPC_DROP_TOO_SMALL: return "shorter than the 40-byte header";
    case IPC_DROP_NO_NUL: return "type tag is not NUL-terminated";
    case IPC_DROP_TRUNCATED: return "truncated";
    }
    return "?";
}

enum ipc_type ipc_type_from_tag(const char *tag)
{
    for (int t = IPC_T_CTXT; t <= IPC_T_DATA; t++)
        if (strcmp(tag, tags[t]) == 0)
            return (enum ipc_type)t;
    return IPC_T_UNKNOWN;
}

const char *ipc_type_tag(enum ipc_type t)
{
    return (t >= IPC_T_CTXT && t <= IPC_T_DATA) ? tags[t] : "";
}

enum ipc_drop ipc_msg_parse(const uint8_t *buf, size_t got, size_t real_len, size_t cap,
                            struct ipc_view *v)
{
    memset(v, 0, sizeof(*v));
    if (real_len > cap || got < real_len)
        return IPC_DROP_TOO_BIG;
    if (real_len < IPC_HDR_SIZE)
        return IPC_DROP_TOO_SMALL;
    struct ipc_metadata md;
    memcpy(&md, buf, sizeof(md));
    if (!memchr(md.type, '\0', IPC_TYPE_LEN))
        return IPC_DROP_NO_NUL;
    memcpy(v->type_str, md.type, IPC_TYPE_LEN);
    if (md.size > real_len - IPC_HDR_SIZE)
        return IPC_DROP_TRUNCATED;
    v->type = ipc_type_from_tag(md.type);
    v->payload = buf + IPC_HDR_SIZE;
    v->len = (size_t)md.size;
    return IPC_OK;
}

long ipc_msg_build(uint8_t *out, size_t cap, const char *tag, const void *payload, size_t len)
{
    size_t tl = strlen(tag);
    if (tl >= IPC_TYPE_LEN)
        return -EINVAL;
    if (len > cap || IPC_HDR_SIZE > cap - len)
        return -ENOSPC;
    struct ipc_metadata md;
    memset(&md, 0, sizeof(md));
    md.size = len;
    memcpy(md.type, tag, tl);
    memcpy(out, &md, sizeof(md));
    if (len)
        memcpy(out + IPC_HDR_SIZE, payload, len);
    return (long)(IPC_HDR_SIZE + len);
}

int ipc_parse_ctxt(const struct ipc_view *v, struct ipc_ctxt *ret)
{
    if (v->len < sizeof(*ret))
        return -EMSGSIZE;
    memcpy(ret, v->payload, sizeof(*ret));
    return 0;
}

int ipc_parse_status(const struct ipc_view *v, struct ipc_status *ret)
{
    if (v->len < sizeof(*ret))
        return -EMSGSIZE;
    memcpy(ret, v->payload, sizeof(*ret));
    return 0;
}

int ipc_parse_req(const struct ipc_view *v, struct ipc_req *hdr, int32_t *pids, int *n_used)
{
    if (v->len < sizeof(*hdr))
        return -EMSGSIZE;
    memcpy(hdr, v->payload, sizeof(*hdr));
    int n = hdr->n;
    if (n > IPC_REQ_MAX_PIDS)
        n = IPC_REQ_MAX_PIDS;
    if (n < 0)
        n = 0;
    if (v->len < sizeof(*hdr) + 4 * (size_t)n)
        return -EMSGSIZE;
    memcpy(pids, v->payload + sizeof(*hdr), 4 * (size_t)n);
    *n_used = n;
    return 0;
}

int ipc_addr_abstract(struct sockaddr_un *addr, socklen_t *ret_len, const char *name,
                      bool trailing_nul)
{
    size_t n = strlen(name);
    if (n + 2 > sizeof(addr->sun_path))
        return -ENAMETOOLONG;
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    memcpy(addr->sun_path + 1, name, n);
    *ret_len = (socklen_t)(sizeof(sa_family_t) + 1 + n + (trailing_nul ? 1 : 0));
    return 0;
}

int ipc_addr_path(struct sockaddr_un *addr, socklen_t *ret_len, const char *path)
{
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(addr->sun_path))
        return -ENAMETOOLONG;
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    memcpy(addr->sun_path, path, n);
    *ret_len = (socklen_t)(sizeof(sa_family_t) + n + 1);
    return 0;
}

int ipc_socket_dir(const char *override, char *out, size_t cap)
{
    const char *dir = override && *override ? override : getenv("MSMONITOR_SOCKET_DIR");
    if (!dir || !*dir) {
        struct passwd pw, *res = NULL;
        char buf[4096];
        if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) != 0 || !res || !pw.pw_dir)
            return -ENOENT;
        dir = pw.pw_dir;
        if (snprintf(out, cap, "%s", dir) >= (int)cap)
            return -ENAMETOOLONG;
        return 0;
    }
    if (snprintf(out, cap, "%s", dir) >= (int)cap)
        return -ENAMETOOLONG;
    return 0;
}

int ipc_socket_path(const char *dir, const char *name, char *out, size_t cap)
{
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    int n = snprintf(out, cap, "%.*s/%s.sock", (int)dl, dir, name);
    if (n < 0 || (size_t)n >= cap || n > IPC_SOCK_PATH_MAX)
        return -ENAMETOOLONG;
    return 0;
}

void ipc_addr_str(const struct sockaddr_un *addr, socklen_t len, char *out, size_t cap)
{
    size_t plen = len > sizeof(sa_family_t) ? (size_t)len - sizeof(sa_family_t) : 0;
    if (plen == 0) {
        snprintf(out, cap, "(unnamed)");
        return;
    }
    if (plen > sizeof(addr->sun_path))
        plen = sizeof(addr->sun_path);
    size_t o = 0;
    for (size_t i = 0; i < plen && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)addr->sun_path[i];
        if (i == 0 && c == 0) {
            out[o++] = '@';
        } else if (c == 0) {
            if (i + 1 == plen && addr->sun_path[0] == '\0')
                out[o++] = '@';   /* trailing NUL of an abstract name, shown like ss -x */
            else if (addr->sun_path[0] != '\0')
                break;            /* end of a filesystem path */
            else
                out[o++] = '@';
        } else if (c < 0x20 || c >= 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o < cap ? o : cap - 1] = '\0';
}

int ipc_client_name(char *out, size_t cap)
{
    uint8_t r[16];
    size_t got = 0;
    while (got < sizeof(r)) {
        ssize_t n = getrandom(r + got, sizeof(r) - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        got += (size_t)n;
    }
    r[6] = (uint8_t)((r[6] & 0x0F) | 0x40);
    r[8] = (uint8_t)((r[8] & 0x3F) | 0x80);
    int n = snprintf(out, cap,
                     "dynoconfigclient%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                     "%02x%02x%02x%02x%02x%02x",
                     r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
                     r[12], r[13], r[14], r[15]);
    return (n < 0 || (size_t)n >= cap) ? -ENOSPC : 0;
}

bool ipc_client_name_valid(const char *s, size_t n)
{
    static const char prefix[] = "dynoconfigclient";
    const size_t pl = sizeof(prefix) - 1;
    if (n != pl + 36 || memcmp(s, prefix, pl) != 0)
        return false;
    for (size_t i = pl; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || s[i] == '-'))
            return false;
    return true;
}
