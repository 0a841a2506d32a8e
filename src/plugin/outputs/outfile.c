/* outfile: names, modes and path checks shared by the DB and JSONL exporters (docs/design/outputs.md#db-file, #jsonl)
 * and the start-time log directory check (docs/design/session.md#applying-a-config prepare_dir). Directories are created 0750
 * and files 0640 with an explicit chmod, so the application's umask never changes them. */
#include "plugin/outputs/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/strutil.h"
#include "contract/names.h"
#include "contract/podid.h"
#include "plugin/penv.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/pipeline.h"

/* Last millisecond stamp handed out: the reason for this global is that names must be unique
 * and ordered across every exporter and session of the process (docs/design/outputs.md#jsonl). Atomic, no lock. */
static _Atomic uint64_t last_name_ms;

static int make_absolute(const char *path, char *out, size_t cap)
{
    size_t n = strlen(path);
    if (path[0] == '/') {
        if (n >= cap)
            return -ENAMETOOLONG;
        memcpy(out, path, n + 1);
        return 0;
    }
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd)))
        return -errno;
    int w = snprintf(out, cap, "%s/%s", cwd, path);
    if (w < 0 || (size_t)w >= cap)
        return -ENAMETOOLONG;
    return 0;
}

/* mkdir -p with 0750 for every component we create; existing ones are left alone. */
static int create_components(char *abs)
{
    for (char *p = abs + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(abs, OUTFILE_DIR_MODE) == 0) {
            if (chmod(abs, OUTFILE_DIR_MODE) != 0) {
                int err = -errno;
                *p = saved;
                return err;
            }
        } else if (errno != EEXIST) {
            int err = -errno;
            *p = saved;
            return err;
        }
        *p = saved;
        if (saved == '\0')
            return 0;
    }
}

int outfile_prepare_dir(const char *path, char *ret_abs, size_t cap)
{
    char abs[OUTFILE_PATH_MAX + 2];
    char resolved[PATH_MAX];
    struct stat st;
    int rc;

    if (!path || !*path) {
        LOG_ERROR("outfile: log path is empty");
        return -EINVAL;
    }
    if (strlen(path) > OUTFILE_PATH_MAX) {
        LOG_ERROR("outfile: log path is longer than %d bytes: %.64s...", OUTFILE_PATH_MAX, path);
        return -ENAMETOOLONG;
    }
    rc = make_absolute(path, abs, sizeof(abs));
    if (rc == 0 && strlen(abs) > OUTFILE_PATH_MAX)
        rc = -ENAMETOOLONG;
    if (rc < 0) {
        LOG_ERROR("outfile: cannot make log path '%s' absolute: %s", path, errno_name(-rc));
        return rc;
    }
    /* Strip trailing slashes so the last component can be lstat'ed and created. */
    for (size_t n = strlen(abs); n > 1 && abs[n - 1] == '/'; n--)
        abs[n - 1] = '\0';
    if (lstat(abs, &st) == 0) {
        if (S_ISLNK(st.st_mode))
            LOG_WARN("outfile: log path '%s' is a symlink", abs);
        if (stat(abs, &st) != 0) {
            rc = -errno;
            LOG_ERROR("outfile: log path '%s' is a dangling symlink: %s", abs, errno_name(-rc));
            return rc;
        }
        if (!S_ISDIR(st.st_mode)) {
            LOG_ERROR("outfile: log path '%s' is not a directory", abs);
            return -ENOTDIR;
        }
    } else if (errno == ENOENT) {
        rc = create_components(abs);
        if (rc < 0) {
            LOG_ERROR("outfile: cannot create log directory '%s': %s", abs, errno_name(-rc));
            return rc;
        }
    } else {
        rc = -errno;
        LOG_ERROR("outfile: cannot access log path '%s': %s", abs, errno_name(-rc));
        return rc;
    }
    if (!realpath(abs, resolved)) {
        rc = -errno;
        LOG_ERROR("outfile: cannot resolve log path '%s': %s", abs, errno_name(-rc));
        return rc;
    }
    if (stat(resolved, &st) != 0 || !S_ISDIR(st.st_mode)) {
        LOG_ERROR("outfile: log path '%s' is not a directory", resolved);
        return -ENOTDIR;
    }
    if (access(resolved, W_OK | X_OK) != 0) {
        rc = -errno;
        LOG_ERROR("outfile: log directory '%s' is not writable: %s", resolved, errno_name(-rc));
        return rc;
    }
    if (str_copy(ret_abs, cap, resolved, strlen(resolved)) < 0) {
        LOG_ERROR("outfile: resolved log path '%s' does not fit in %zu bytes", resolved, cap);
        return -ENAMETOOLONG;
    }
    return 0;
}

int outfile_format_name(char *buf, size_t cap, const char *dir, int pid, uint64_t epoch_ms, int32_t rank,
                        const char *ext)
{
    time_t secs = (time_t)(epoch_ms / 1000);
    struct tm tm;
    char stamp[32];

    if (!localtime_r(&secs, &tm) || strftime(stamp, sizeof(stamp), "%Y%m%d%H%M%S", &tm) == 0)
        return -EINVAL;
    return names_export_file(buf, cap, dir, pid, stamp, (unsigned)(epoch_ms % 1000), rank, ext);
}

int outfile_make_name(char *buf, size_t cap, const char *dir, int32_t rank, const char *ext)
{
    uint64_t now = clock_real_ns() / 1000000u;
    uint64_t prev = atomic_load(&last_name_ms);
    uint64_t ms;
    do {
        ms = now > prev ? now : prev + 1;
    } while (!atomic_compare_exchange_weak(&last_name_ms, &prev, ms));
    return outfile_format_name(buf, cap, dir, (int)getpid(), ms, rank, ext);
}

int outfile_create(const char *path, int truncate)
{
    int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (truncate ? O_TRUNC : O_EXCL);
    int fd = open(path, flags, OUTFILE_FILE_MODE);
    if (fd < 0)
        return -errno;
    if (fchmod(fd, OUTFILE_FILE_MODE) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

uint64_t outfile_hash_id(const char *s, size_t n)
{
    uint32_t a = 0, c = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b = (unsigned char)s[i];
        a = a * 29u + b;
        c = c * 131u + b;
    }
    return ((uint64_t)a << 32) | c;
}

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

#define MAX_IFACES 256

int outfile_host_uid(char *buf, size_t cap)
{
    struct ifaddrs *ifs = NULL;
    char macs[2][MAX_IFACES][3 * 32];  /* [0] universal, [1] local */
    char *sorted[MAX_IFACES];
    size_t count[2] = {0, 0};
    char joined[MAX_IFACES * 3 * 32];
    size_t jlen = 0;
    int rc = 0;

    if (cap == 0)
        return -EINVAL;
    buf[0] = '\0';
    if (getifaddrs(&ifs) != 0)
        return -errno;
    for (struct ifaddrs *it = ifs; it; it = it->ifa_next) {
        if (!it->ifa_addr || it->ifa_addr->sa_family != AF_PACKET || (it->ifa_flags & IFF_LOOPBACK))
            continue;
        const struct sockaddr_ll *ll = (const struct sockaddr_ll *)(const void *)it->ifa_addr;
        if (ll->sll_halen == 0 || ll->sll_halen > 31)
            continue;
        int which = (ll->sll_addr[0] & 0x02) ? 1 : 0;
        if (count[which] >= MAX_IFACES)
            continue;
        char *m = macs[which][count[which]++];
        for (int i = 0; i < ll->sll_halen; i++)
            snprintf(m + 2 * i, 3, "%02x", ll->sll_addr[i]);
    }
    freeifaddrs(ifs);
    int which = count[0] > 0 ? 0 : 1;
    if (count[which] == 0)
        return 0;
    for (size_t i = 0; i < count[which]; i++)
        sorted[i] = macs[which][i];
    qsort(sorted, count[which], sizeof(sorted[0]), cmp_str);
    for (size_t i = 0; i < count[which]; i++) {
        size_t l = strlen(sorted[i]);
        if (i > 0)
            joined[jlen++] = '-';
        memcpy(joined + jlen, sorted[i], l);
        jlen += l;
    }
    int w = snprintf(buf, cap, "%llu", (unsigned long long)outfile_hash_id(joined, jlen));
    if (w < 0 || (size_t)w >= cap)
        rc = -ENOSPC;
    return rc;
}

int outfile_sess_init(struct outfile_sess *s, const struct output_config *cfg)
{
    memset(s, 0, sizeof(*s));
    if (!cfg->log_dir || !*cfg->log_dir)
        return -EINVAL;
    s->log_dir = strdup(cfg->log_dir);
    if (!s->log_dir)
        return -ENOMEM;
    s->rank = cfg->rank;
    s->session_start_ns = cfg->session_start_ns;
    s->pl = cfg->pl;
    s->ctr = pipeline_counters(cfg->pl);
    return 0;
}

void outfile_sess_fini(struct outfile_sess *s)
{
    free(s->log_dir);
    s->log_dir = NULL;
}

static void pod_fields(struct podid_self *ret)
{
    const char *v[PODID_NFIELDS] = { [PODID_POD] = penv_get(PENV_POD_NAME),
                                     [PODID_NAMESPACE] = penv_get(PENV_POD_NAMESPACE),
                                     [PODID_NODE] = penv_get(PENV_NODE_NAME),
                                     [PODID_CONTAINER] = penv_get(PENV_CONTAINER_NAME) };
    (void)podid_self_from_values(ret, v, NULL); /* no hostname: HOST_INFO has it */
}

size_t outfile_pod_json(char *buf, size_t cap)
{
    struct podid_self me;
    pod_fields(&me);
    return podid_json(&me, buf, cap);
}

size_t outfile_pod_line(char *buf, size_t cap)
{
    /* the object with "kind" spliced in after "container" (keys sorted, like every line) */
    char obj[PODID_JSON_CAP];
    size_t n = outfile_pod_json(obj, sizeof(obj));
    static const char kind[] = "\"kind\":\"" NAMES_META_POD "\"";
    const char *after = n ? strstr(obj, ",\"name\":") : NULL;
    int w;
    if (n == 0)
        return 0;
    if (strncmp(obj, "{\"container\":", 13) == 0 && after)
        w = snprintf(buf, cap, "%.*s,%s%s", (int)(after - obj), obj, kind, after);
    else
        w = snprintf(buf, cap, "{%s,%s", kind, obj + 1);
    return w > 0 && (size_t)w < cap ? (size_t)w : 0;
}
