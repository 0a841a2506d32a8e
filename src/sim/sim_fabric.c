/* sim_fabric: a shared-directory rendezvous for simulated collectives (see sim_fabric.h).
 * Files "<comm>.<seq>.<rank>" hold one arrival each, written by rename so a reader never sees
 * half a number; the simulated hosts of a test only share the directory, not a socket dir or
 * /dev/shm. Ground truth for tests: "truth.<rank>.jsonl", one line per collective. */
#include "sim/sim_fabric.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/strutil.h"
#include "sim/sim_env.h"

#define FAB_WORLD_MAX 4096
#define FAB_COMMS 16
#define FAB_NAME_MAX 64

struct comm_seq {
    char name[FAB_NAME_MAX + 1];
    uint64_t seq;
};

static struct {
    pthread_once_t once;
    pthread_mutex_t mu;
    bool on;
    char dir[3072];
    uint32_t world, rank;
    uint64_t timeout_ms;
    uint64_t timeouts;
    struct comm_seq comms[FAB_COMMS];
} f = { .once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER, .timeout_ms = 60000 };

static bool env_u32(const char *var, uint32_t *dst, uint32_t min, uint32_t max)
{
    const char *v = getenv(var);
    uint32_t x;
    if (!v)
        return false;
    if (str_to_u32(v, &x) != 0 || x < min || x > max) {
        sim_log(SIM_WARN, "invalid %s=\"%s\" (an integer in [%u, %u]); collectives do not synchronise", var, v,
                min, max);
        return false;
    }
    *dst = x;
    return true;
}

static void load(void)
{
    const char *dir = getenv("MSSIM_FABRIC_DIR");
    struct stat st;
    uint32_t t = 0;
    if (!dir || !*dir)
        return;
    if (strlen(dir) >= sizeof(f.dir) - 128 || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        sim_log(SIM_WARN, "invalid MSSIM_FABRIC_DIR=\"%s\" (not a directory); collectives do not synchronise", dir);
        return;
    }
    /* MSSIM_FABRIC_WORLD, when set, is the only source (a bad one is not replaced by WORLD_SIZE) */
    const char *w = getenv("MSSIM_FABRIC_WORLD");
    if (w ? !env_u32("MSSIM_FABRIC_WORLD", &f.world, 2, FAB_WORLD_MAX)
          : !env_u32("WORLD_SIZE", &f.world, 1, FAB_WORLD_MAX)) {
        if (!w && !getenv("WORLD_SIZE"))
            sim_log(SIM_WARN, "MSSIM_FABRIC_DIR is set but neither MSSIM_FABRIC_WORLD nor WORLD_SIZE; "
                              "collectives do not synchronise");
        return;
    }
    if (!env_u32("MSSIM_WL_RANK", &f.rank, 0, f.world - 1) && !env_u32("RANK", &f.rank, 0, f.world - 1)) {
        sim_log(SIM_WARN, "MSSIM_FABRIC_DIR is set but the rank (MSSIM_WL_RANK or RANK, below the world size %u) "
                          "is not; collectives do not synchronise", f.world);
        return;
    }
    if (env_u32("MSSIM_FABRIC_TIMEOUT_MS", &t, 1, 3600000))
        f.timeout_ms = t;
    snprintf(f.dir, sizeof(f.dir), "%s", dir);
    f.on = f.world >= 2;
    if (f.on)
        sim_log(SIM_INFO, "fabric: rank %u of %u, rendezvous in %s", f.rank, f.world, f.dir);
}

bool sim_fabric_on(void)
{
    pthread_once(&f.once, load);
    return f.on;
}

static bool name_ok(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        if (n >= FAB_NAME_MAX || !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                                   c == '_' || c == '-'))
            return false;
    }
    return n > 0;
}

/* mu held: the next sequence number of comm (1, 2, ...), or 0 when the table is full. */
static uint64_t next_seq(const char *comm)
{
    for (size_t i = 0; i < FAB_COMMS; i++) {
        if (!f.comms[i].name[0])
            snprintf(f.comms[i].name, sizeof(f.comms[i].name), "%s", comm);
        if (strcmp(f.comms[i].name, comm) == 0)
            return ++f.comms[i].seq;
    }
    return 0;
}

static int read_arrival(const char *path, uint64_t *ret)
{
    char buf[32];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -EAGAIN;
    buf[n] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
    return str_to_u64(buf, ret) == 0 ? 0 : -EINVAL;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void truth(const char *comm, uint64_t seq, uint64_t arrival, uint64_t last, uint64_t transfer)
{
    char path[sizeof(f.dir) + 64], line[256];
    snprintf(path, sizeof(path), "%s/truth.%u.jsonl", f.dir, f.rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    int n = snprintf(line, sizeof(line),
                     "{\"arrive\":%" PRIu64 ",\"comm\":\"%s\",\"last\":%" PRIu64 ",\"rank\":%u,\"seq\":%" PRIu64
                     ",\"transfer\":%" PRIu64 ",\"wait\":%" PRIu64 "}\n",
                     arrival, comm, last, f.rank, seq, transfer, last - arrival);
    if (n > 0 && (size_t)n < sizeof(line) && write(fd, line, (size_t)n) != n)
        sim_log(SIM_WARN, "fabric: cannot write %s", path);
    close(fd);
}

int sim_fabric_arrive(const char *comm_name, uint64_t arrival_ns, uint64_t transfer_ns, uint64_t *ret_last)
{
    char path[sizeof(f.dir) + 128], tmp[sizeof(f.dir) + 128], num[32];
    uint64_t *got = NULL, last = arrival_ns, seq;
    uint32_t missing;
    int rc = 0, fd = -1;

    *ret_last = arrival_ns;
    if (!sim_fabric_on())
        return -ENOTCONN;
    if (!comm_name || !name_ok(comm_name)) {
        sim_log(SIM_WARN, "fabric: communicator name \"%.64s\" is not [A-Za-z0-9_-]{1,64}; not synchronised",
                comm_name ? comm_name : "");
        return -EINVAL;
    }
    got = calloc(f.world, sizeof(*got));
    if (!got)
        return -ENOMEM;
    pthread_mutex_lock(&f.mu);
    seq = next_seq(comm_name);
    if (seq == 0) {
        sim_log(SIM_WARN, "fabric: more than %d communicators; \"%s\" is not synchronised", FAB_COMMS, comm_name);
        rc = -ENOSPC;
        goto out;
    }
    snprintf(tmp, sizeof(tmp), "%s/.%s.%" PRIu64 ".%u.tmp", f.dir, comm_name, seq, f.rank);
    snprintf(path, sizeof(path), "%s/%s.%" PRIu64 ".%u", f.dir, comm_name, seq, f.rank);
    int len = snprintf(num, sizeof(num), "%" PRIu64 "\n", arrival_ns);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, num, (size_t)len) != len || close(fd) != 0 || rename(tmp, path) != 0) {
        rc = -errno;
        if (fd >= 0)
            unlink(tmp);
        sim_log(SIM_WARN, "fabric: cannot publish %s: %s", path, strerror(errno));
        goto out;
    }
    /* Every member is past seq - 1 now, so nobody reads our file of seq - 2 any more. */
    if (seq > 2) {
        snprintf(tmp, sizeof(tmp), "%s/%s.%" PRIu64 ".%u", f.dir, comm_name, seq - 2, f.rank);
        unlink(tmp);
    }
    got[f.rank] = arrival_ns;
    missing = f.world - 1;
    uint64_t deadline = mono_ms() + f.timeout_ms;
    while (missing > 0) {
        for (uint32_t r = 0; r < f.world; r++) {
            uint64_t a;
            if (got[r])
                continue;
            snprintf(path, sizeof(path), "%s/%s.%" PRIu64 ".%u", f.dir, comm_name, seq, r);
            if (read_arrival(path, &a) == 0 && a > 0) {
                got[r] = a;
                missing--;
                if (a > last)
                    last = a;
            }
        }
        if (missing == 0)
            break;
        if (mono_ms() > deadline) {
            f.timeouts++;
            sim_log(SIM_WARN, "fabric: %s #%" PRIu64 ": %u of %u members did not arrive within %" PRIu64
                              " ms; completing without them (timeouts: %" PRIu64 ")",
                    comm_name, seq, missing, f.world, f.timeout_ms, f.timeouts);
            break;
        }
        struct timespec ts = { 0, 500000 };
        nanosleep(&ts, NULL);
    }
    truth(comm_name, seq, arrival_ns, last, transfer_ns);
    *ret_last = last;
out:
    pthread_mutex_unlock(&f.mu);
    free(got);
    return rc;
}
