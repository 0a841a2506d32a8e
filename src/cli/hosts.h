/* hosts: the dyno target list (docs/design/cli.md#targets) — comma split outside brackets, SLURM
 * bracket expansion (cartesian, leftmost outermost, zero padding), `unix:` targets,
 * --hostfile lines, first-occurrence dedupe and the 65536-host cap. */
#ifndef MSMON_CLI_HOSTS_H
#define MSMON_CLI_HOSTS_H

#include <stddef.h>
#include <stdint.h>

#define HOSTS_MAX 65536
#define HOSTS_UNIX_PREFIX "unix:"

struct hosts {
    char **v;          /* expanded targets in list order; owned */
    size_t n;
    size_t cap;
    uint32_t *set;     /* open-addressing index (slot = position + 1) for dedupe */
    size_t set_cap;
};

/* Storage is caller-provided; free what it holds with hosts_fini(). */
void hosts_init(struct hosts *h);
void hosts_fini(struct hosts *h);

/* Parse one --hostname value (text, len bytes) and append its targets, skipping
 * duplicates. On error returns -EINVAL (-ENOMEM) and puts the reason in err (no prefix). */
int hosts_add_list(struct hosts *h, const char *text, size_t len, char *err, size_t errcap);

/* Read a hostfile: '#' starts a comment, blank lines are ignored, every other line is a
 * --hostname value. err receives a complete one-line message (flag, path, line, value). */
int hosts_add_file(struct hosts *h, const char *path, char *err, size_t errcap);

#endif
