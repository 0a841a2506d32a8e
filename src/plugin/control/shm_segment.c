/* shm_segment: the dyno-mode segment of a job (docs/design/ipc.md#segment): its directory (one
 * only the job's uid can create entries in), its name, creation by one creator (link(2)), the
 * creator lock, the takeover of a killed creator's leftover, the stale rule, and the segment's
 * layout (publish time, aligned start step, the daemon's text). Also the lifecycle lines dyno
 * mode prints (shmseg_note). */
#include "plugin/control/shm_segment.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/logesc.h"

#define SEG_TAKEOVER_GRACE_US 100000

_Static_assert(SHMSEG_SIZE == 1048576, "segment size of docs/design/ipc.md#segment");

/* Python callers want the lifecycle lines on stderr too, as the Python module printed them
 * (shmseg_set_echo); set before the first line of a join, read-only afterwards. */
static bool seg_echo;

void shmseg_note(enum log_level lvl, const char *fmt, ...)
{
    static const char *const names[] = { "DEBUG", "INFO", "WARNING", "ERROR", "FATAL" };
    char msg[PATH_MAX + 512], esc[LOGESC_CAP(sizeof(msg))];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_write(lvl, __FILE__, __LINE__, "dynamic_profile: %s", msg);
    if (seg_echo && lvl < LOG_LVL_ERROR) /* ERROR lines reach stderr already */
        fprintf(stderr, "[%s] [msmonitor.dynamic_profile %d] %s\n", names[lvl], (int)getpid(),
                logesc(msg, strlen(msg), esc, sizeof(esc))); /* paths and values from outside */
}

void shmseg_set_echo(bool on)
{
    seg_echo = on;
}

int shmseg_name(const char *key, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%s-%s", SHMSEG_PREFIX, key) < (int)cap ? 0 : -ENOSPC;
}

/* Why directory `dir` may not hold this uid's segments, NULL if it may. own: only this uid
 * may create or replace entries (owner = euid, no group/other write). Otherwise it is a
 * parent in which we create our own private subdirectory: owned by us or root, and either
 * not writable by others or sticky (/dev/shm), so nobody can rename our entry away. */
static const char *seg_dir_problem(const char *dir, bool own, char *why, size_t cap)
{
    struct stat st;

    if (lstat(dir, &st) != 0) {
        snprintf(why, cap, "%s", strerror(errno));
        return why;
    }
    if (!S_ISDIR(st.st_mode))
        snprintf(why, cap, "not a directory");
    else if (own && st.st_uid != geteuid())
        snprintf(why, cap, "owned by uid %u, not by uid %u", (unsigned)st.st_uid, (unsigned)geteuid());
    else if (own && (st.st_mode & 022))
        snprintf(why, cap, "mode %04o lets others write in it", (unsigned)(st.st_mode & 07777));
    else if (!own && st.st_uid != geteuid() && st.st_uid != 0)
        snprintf(why, cap, "owned by uid %u, neither uid %u nor root", (unsigned)st.st_uid, (unsigned)geteuid());
    else if (!own && (st.st_mode & 022) && !(st.st_mode & S_ISVTX))
        snprintf(why, cap, "mode %04o lets others replace entries in it", (unsigned)(st.st_mode & 07777));
    else
        return NULL;
    return why;
}

/* `parent`/`name` as this uid's private directory (created 0700). 0, or -errno with a
 * one-line reason and the fix in err. */
static int seg_private_subdir(const char *parent, const char *name, char *buf, size_t cap, char *err, size_t errcap)
{
    char why[128];

    if (seg_dir_problem(parent, false, why, sizeof(why))) {
        snprintf(err, errcap, "%s: %s", parent, why);
        return -EPERM;
    }
    if (snprintf(buf, cap, "%s%s%s", parent, parent[strlen(parent) - 1] == '/' ? "" : "/", name) >= (int)cap) {
        snprintf(err, errcap, "%s: path too long", parent);
        return -ENAMETOOLONG;
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) {
        int rc = -errno;
        snprintf(err, errcap, "%s: cannot create: %s", buf, strerror(-rc));
        return rc;
    }
    if (seg_dir_problem(buf, true, why, sizeof(why))) {
        snprintf(err, errcap, "%s: %s; not using it, another user may have made it to read or forge this "
                 "job's configs (fix: have its owner or root remove it)", buf, why);
        return -EPERM;
    }
    return 0;
}

int shmseg_dir(const char *base, const char *xdg, const char *sockdir, char *buf, size_t cap)
{
    char name[32], why[128], err[PATH_MAX + 256];
    int rc;

    if (!base || !base[0])
        base = SHMSEG_DIR;
    /* A directory of our own (MSMONITOR_SHM_DIR made for the job): used as it is. */
    if (!seg_dir_problem(base, true, why, sizeof(why)))
        return snprintf(buf, cap, "%s", base) < (int)cap ? 0 : -ENAMETOOLONG;
    snprintf(name, sizeof(name), NAMES_SHM_PRIVATE_PREFIX "%u", (unsigned)geteuid());
    rc = seg_private_subdir(base, name, buf, cap, err, sizeof(err));
    if (rc == 0)
        return 0;
    shmseg_note(LOG_LVL_WARNING, "%s", err);
    if (xdg && xdg[0]) {
        if (seg_dir_problem(xdg, true, why, sizeof(why)))
            shmseg_note(LOG_LVL_WARNING, "XDG_RUNTIME_DIR %s: %s; not using it", xdg, why);
        else if ((rc = seg_private_subdir(xdg, "msmonitor", buf, cap, err, sizeof(err))) == 0)
            goto fallback;
        else
            shmseg_note(LOG_LVL_WARNING, "%s", err);
    }
    if (sockdir && sockdir[0]) {
        rc = seg_private_subdir(sockdir, "msmonitor-shm", buf, cap, err, sizeof(err));
        if (rc == 0)
            goto fallback;
        shmseg_note(LOG_LVL_WARNING, "%s", err);
    }
    return rc;
fallback:
    shmseg_note(LOG_LVL_WARNING, "the job's segment lives in %s instead", buf);
    return 0;
}

/* A segment or side file we may attach to: a regular file of this uid or root that nobody
 * else can write. 0, or -EPERM with the reason and the fix in err. */
int shmseg_file_trusted(const char *path, const struct stat *st, char *err, size_t errcap)
{
    if (S_ISREG(st->st_mode) && (st->st_uid == geteuid() || st->st_uid == 0) && !(st->st_mode & 022))
        return 0;
    snprintf(err, errcap, "%s: %s owned by uid %u with mode %04o; only a file of uid %u or root that nobody else "
             "can write is used (fix: remove it if no job of yours uses it)", path,
             S_ISREG(st->st_mode) ? "file" : "not a regular file,", (unsigned)st->st_uid,
             (unsigned)(st->st_mode & 07777), (unsigned)geteuid());
    return -EPERM;
}

/* os.path.dirname(): the head up to the last '/', trailing slashes removed unless it is
 * all slashes; "." when there is none (Python's text uses `... or "."`). */
int shmseg_stale_message(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/'), *d = ".";
    int dlen = 1, n;

    if (slash) {
        int k = (int)(slash - path) + 1;
        d = path;
        dlen = k;
        while (k > 0 && path[k - 1] == '/')
            k--;
        if (k > 0)
            dlen = k;
    }
    n = snprintf(buf, cap,
                 "There may exist shared memory before this task. If no job is using it, run "
                 "`rm -f %.*s/%s*` (see `ls -la %.*s/%s*`). Please remove: %s",
                 dlen, d, SHMSEG_PREFIX, dlen, d, SHMSEG_PREFIX, path);
    return (n >= 0 && (size_t)n < cap) ? 0 : -ENOSPC;
}

/* ---- segment I/O ---- */

int shmseg_write(uint8_t *shm, const char *text, size_t len, int32_t aligned, uint32_t now)
{
    uint32_t a = htole32((uint32_t)aligned);

    if (len > SHMSEG_SIZE - SHMSEG_TEXT)
        return -E2BIG;
    memcpy(shm + SHMSEG_ALIGNED, &a, sizeof(a));
    memcpy(shm + SHMSEG_TEXT, text, len);
    memset(shm + SHMSEG_TEXT + len, ' ', SHMSEG_SIZE - SHMSEG_TEXT - len);
    __atomic_store_n((uint32_t *)(void *)shm, htole32(now), __ATOMIC_RELEASE);
    return 0;
}

uint32_t shmseg_time(const uint8_t *shm)
{
    return le32toh(__atomic_load_n((const uint32_t *)(const void *)shm, __ATOMIC_ACQUIRE));
}

int shmseg_read(const uint8_t *shm, char **ret_text, size_t *ret_len, int32_t *ret_aligned)
{
    size_t len = SHMSEG_SIZE - SHMSEG_TEXT;
    const uint8_t *t = shm + SHMSEG_TEXT;
    uint32_t a;
    char *copy;

    *ret_text = NULL;
    *ret_len = 0;
    /* The padding is most of the megabyte: skip it a block at a time (a block is one byte
     * repeated iff it equals itself shifted by one), then byte-wise. */
    while (len >= 4096) {
        const uint8_t *b = t + len - 4096;
        if ((b[0] != ' ' && b[0] != '\0') || memcmp(b, b + 1, 4095) != 0)
            break;
        len -= 4096;
    }
    while (len > 0 && (t[len - 1] == ' ' || t[len - 1] == '\0'))
        len--;
    if (len == 0)
        return -ENODATA;
    /* A private copy: another process may be rewriting the segment meanwhile; the parse
     * (pconfig) reads only the copy. */
    copy = malloc(len + 1);
    if (!copy)
        return -ENOMEM;
    memcpy(&a, shm + SHMSEG_ALIGNED, sizeof(a));
    memcpy(copy, t, len);
    copy[len] = '\0';
    *ret_text = copy;
    *ret_len = len;
    *ret_aligned = (int32_t)le32toh(a);
    return 0;
}

/* The creator lock: an exclusive OFD lock on byte 0, held by the creator for its whole life
 * (its open file description, so threads and fork()ed helpers share it). The kernel drops it
 * when the creator dies, also by SIGKILL, which is how a rank tells a leftover segment from
 * a live one. Independent of the shared flock every holder keeps for cleanup-shm. */
int shmseg_creator_lock(int fd)
{
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1, .l_pid = 0 };

    return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
}

/* Time 0 (first 4 bytes) and an empty, space-filled text. */
static int seg_reset(int fd)
{
    uint8_t *p = mmap(NULL, SHMSEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

    if (p == MAP_FAILED)
        return -errno;
    memset(p + SHMSEG_ALIGNED, 0xff, SHMSEG_TEXT - SHMSEG_ALIGNED); /* aligned step -1 */
    memset(p + SHMSEG_TEXT, ' ', SHMSEG_SIZE - SHMSEG_TEXT);
    __atomic_store_n((uint32_t *)(void *)p, 0, __ATOMIC_RELEASE);
    munmap(p, SHMSEG_SIZE);
    /* Writes through a mapping update the inode times lazily; the stale rule of the ranks
     * that attach next reads ctime, so bump it now. */
    return futimens(fd, NULL) == 0 ? 0 : -errno;
}

/* Create under a private name, initialise, then link(2) into place: link fails if another
 * rank won, so there is one creator and nobody sees a half-initialised file. 1 created,
 * 0 someone else won, -errno. */
static int seg_fresh(const char *path, int *ret_fd)
{
    char tmp[PATH_MAX];
    int fd = -1, rc = 0;

    if (snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid()) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_SH) != 0 || ftruncate(fd, SHMSEG_SIZE) != 0) {
        rc = -errno;
        goto unlink_tmp;
    }
    rc = shmseg_creator_lock(fd);
    if (rc == 0)
        rc = seg_reset(fd);
    if (rc != 0)
        goto unlink_tmp;
    if (link(tmp, path) != 0) {
        rc = errno == EEXIST ? 0 : -errno;
        goto unlink_tmp;
    }
    rc = 1;
unlink_tmp:
    (void)unlink(tmp);
    if (rc == 1)
        *ret_fd = fd;
    else
        close(fd);
    return rc;
}

static double seg_ts(const struct timespec *t)
{
    return (double)t->tv_sec + (double)t->tv_nsec / 1e9;
}

/* True if `path` still names the file open on `fd` (cleanup-shm unlinks while holding
 * LOCK_EX; a rank that opened the file just before must not keep an orphan). */
static bool seg_same_file(int fd, const char *path)
{
    struct stat a, b;

    return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* An existing file at `path`, open on fd: attach, take it over, or refuse. 0 attached or
 * taken over (*ret_creator), 1 the file went away meanwhile (try again), -errno. */
static int seg_attach_existing(const char *path, int fd, long stale_s, bool *ret_creator, char *err, size_t errcap)
{
    char proc[64];
    struct stat st, pst;
    int rc;

    snprintf(proc, sizeof(proc), "/proc/%d", (int)getpid());
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        snprintf(err, errcap, "%s: stat failed: %s", path, strerror(-rc));
        return rc;
    }
    rc = shmseg_file_trusted(path, &st, err, errcap);
    if (rc != 0)
        return rc; /* another user's segment would feed this rank its configs */
    if (st.st_size != SHMSEG_SIZE) {
        snprintf(err, errcap, "%s: size %lld, expected %u", path, (long long)st.st_size, SHMSEG_SIZE);
        return -EINVAL; /* not one of ours: never resized */
    }
    if (flock(fd, LOCK_SH) != 0) {
        rc = -errno;
        snprintf(err, errcap, "%s: flock failed: %s", path, strerror(-rc));
        return rc;
    }
    if (!seg_same_file(fd, path))
        return 1;
    if (shmseg_creator_lock(fd) == 0) {
        /* Nobody holds the creator lock: the creator is gone (killed job). Take over. */
        rc = seg_reset(fd);
        if (rc != 0) {
            snprintf(err, errcap, "%s: cannot re-initialise: %s", path, strerror(-rc));
            return rc;
        }
        shmseg_note(LOG_LVL_WARNING, "took over %s: its creator was killed without removing it (SIGKILL, a crash or "
                    "the OOM killer; a job that ends normally or by SIGTERM removes it); this rank is the creator now, "
                 "re-initialised the segment and runs the poller", path);
        *ret_creator = true;
        return 0;
    }
    if (stat(proc, &pst) != 0) {
        rc = -errno;
        snprintf(err, errcap, "%s: stat failed: %s", proc, strerror(-rc));
        return rc;
    }
    if (seg_ts(&pst.st_ctim) - seg_ts(&st.st_ctim) > (double)stale_s) {
        /* A rank taking the segment over right now holds the lock but may not have
         * refreshed the times yet: look once more before calling it stale. */
        (void)usleep(SEG_TAKEOVER_GRACE_US);
        if (fstat(fd, &st) == 0 && seg_ts(&pst.st_ctim) - seg_ts(&st.st_ctim) <= (double)stale_s) {
            *ret_creator = false;
            return 0;
        }
        (void)shmseg_stale_message(path, err, errcap);
        return -ESTALE; /* a live creator's old segment: never touched */
    }
    *ret_creator = false;
    return 0;
}

int shmseg_attach(const char *path, long stale_s, int *ret_fd, bool *ret_creator, char *err, size_t errcap)
{
    char scratch[8];
    int rc = -EAGAIN;

    if (!err || errcap == 0) {
        err = scratch;
        errcap = sizeof(scratch);
    }
    err[0] = '\0';
    for (int i = 0; i < SHMSEG_ATTACH_TRIES; i++) {
        int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            rc = seg_attach_existing(path, fd, stale_s, ret_creator, err, errcap);
            if (rc == 0) {
                *ret_fd = fd;
                return 0;
            }
            close(fd);
            if (rc < 0)
                return rc;
            continue; /* unlinked under us: look again */
        }
        if (errno != ENOENT) {
            rc = -errno;
            break;
        }
        rc = seg_fresh(path, ret_fd);
        if (rc == 1) {
            *ret_creator = true;
            return 0;
        }
        if (rc < 0)
            break;
        rc = -EAGAIN;
        (void)usleep((useconds_t)(rand() % 20000)); /* lost the race: attach next round */
    }
    snprintf(err, errcap, "could not attach to or create %s: %s", path, strerror(-rc));
    return rc;
}
