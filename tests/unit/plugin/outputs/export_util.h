/* export_util: helpers shared by the exporter unit tests: temp dirs, record builders, log
 * capture and file reading. Header-only (static functions) to keep the test build simple. */
#ifndef MSMON_TEST_EXPORT_UTIL_H
#define MSMON_TEST_EXPORT_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "plugin/pipeline/record.h"

#define T0 1000000000000ULL /* session start used by the tests */

static inline char *tmpdir_make(void)
{
    char tmpl[] = "/tmp/mmexpXXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

static inline void rm_rf(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char p[4400];
            if (snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >= (int)sizeof(p))
                continue;
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
                rm_rf(p);
            else
                unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the files in dir ending with ext; returns count (<= cap). */
static inline size_t list_files(const char *dir, const char *ext, char **out, size_t cap)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    size_t el = strlen(ext);
    while ((e = readdir(d)) && n < cap) {
        size_t l = strlen(e->d_name);
        if (l > el && !strcmp(e->d_name + l - el, ext)) {
            char p[4400];
            snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
            out[n++] = strdup(p);
        }
    }
    closedir(d);
    qsort(out, n, sizeof(out[0]), cmp_names);
    return n;
}

static inline void free_list(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(l[i]);
}

static inline char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = '\0';
    fclose(f);
    return b;
}

/* Redirect log lines into a temp file; log_capture_end returns the text (caller frees). */
static inline int log_capture_begin(char *path, size_t cap)
{
    snprintf(path, cap, "/tmp/mmexplogXXXXXX");
    int fd = mkstemp(path);
    log_set_stderr_fd(fd);
    return fd;
}
static inline char *log_capture_end(int fd, const char *path)
{
    log_set_stderr_fd(-1);
    close(fd);
    char *t = read_all(path);
    unlink(path);
    return t;
}

static inline struct mon_record r_api(int kind, uint64_t s, uint64_t e, uint32_t pid, uint32_t tid, uint64_t corr,
                                      const char *name)
{
    struct mon_record r = {.kind = kind};
    r.u.api = (struct mon_api){s, e, pid, tid, corr, name};
    return r;
}
static inline struct mon_record r_kernel(uint64_t s, uint64_t e, uint32_t dev, uint32_t stream, uint64_t corr,
                                         const char *type, const char *name)
{
    struct mon_record r = {.kind = MON_KIND_KERNEL};
    r.u.kernel = (struct mon_kernel){s, e, dev, stream, corr, type, name};
    return r;
}
static inline struct mon_record r_comm(uint64_t s, uint64_t e, uint32_t dev, uint32_t stream, int32_t dt,
                                       uint64_t count, const char *alg, const char *name, const char *comm,
                                       uint64_t corr)
{
    struct mon_record r = {.kind = MON_KIND_COMMUNICATION};
    r.u.comm = (struct mon_comm){dt, count, dev, stream, s, e, alg, name, comm, corr};
    return r;
}
static inline struct mon_record r_marker(int32_t flag, int32_t src, uint64_t ts, uint64_t id, uint32_t o0,
                                         uint32_t o1, const char *name, const char *domain)
{
    struct mon_record r = {.kind = MON_KIND_MARKER};
    r.u.marker = (struct mon_marker){flag, src, ts, id, o0, o1, name, domain};
    return r;
}
static inline struct mon_record r_hccl(uint64_t s, uint64_t e, uint32_t dev, uint32_t stream, double bw,
                                       const char *name, const char *comm)
{
    struct mon_record r = {.kind = MON_KIND_HCCL};
    r.u.hccl = (struct mon_hccl){s, e, dev, stream, bw, name, comm};
    return r;
}
static inline struct mon_record r_memory(int32_t op, int32_t mk, uint64_t corr, uint64_t s, uint64_t e,
                                         uint64_t addr, uint64_t bytes, uint32_t pid, uint32_t dev, uint32_t stream)
{
    struct mon_record r = {.kind = MON_KIND_MEMORY};
    r.u.memory = (struct mon_memory){op, mk, corr, s, e, addr, bytes, pid, dev, stream};
    return r;
}
static inline struct mon_record r_memset(uint32_t value, uint8_t async, uint64_t bytes, uint64_t s, uint64_t e,
                                         uint32_t dev, uint32_t stream, uint64_t corr)
{
    struct mon_record r = {.kind = MON_KIND_MEMSET};
    r.u.memset = (struct mon_memset){value, async, bytes, s, e, dev, stream, corr};
    return r;
}
static inline struct mon_record r_memcpy(int32_t ck, uint8_t async, uint64_t bytes, uint64_t s, uint64_t e,
                                         uint32_t dev, uint32_t stream, uint64_t corr)
{
    struct mon_record r = {.kind = MON_KIND_MEMCPY};
    r.u.memcpy = (struct mon_memcpy){ck, async, bytes, s, e, dev, stream, corr};
    return r;
}

#endif
