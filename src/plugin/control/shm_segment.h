/* shm_segment: the dyno-mode segment of one job (docs/design/ipc.md#segment,
 * docs/python.md "Where the segment lives"): its directory, name, one creator, the creator
 * lock and the killed creator's takeover, the stale rule and the layout. Pure file and memory
 * work; what a rank does with it is shm_mode's. */
#ifndef MSMON_PLUGIN_SHM_SEGMENT_H
#define MSMON_PLUGIN_SHM_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/log.h"
#include "contract/names.h"

#define SHMSEG_PREFIX NAMES_SHM_PREFIX
#define SHMSEG_DIR "/dev/shm"
#define SHMSEG_SIZE NAMES_SHM_SIZE
#define SHMSEG_STALE_S 60
#define SHMSEG_ATTACH_TRIES 10
/* Layout: the publish time (uint32 LE Unix seconds, written last), the creator's aligned
 * start step (int32 LE, -1 none), then the config text as the daemon delivered it, padded
 * with spaces. */
#define SHMSEG_ALIGNED 4
#define SHMSEG_TEXT 8

/* "DynamicProfileNpuShm-" + key. 0 or -ENOSPC. */
int shmseg_name(const char *key, char *buf, size_t cap);
/* The directory of this uid's segments, one only this uid can create entries in (so the
 * name cannot be squatted): `base` (MSMONITOR_SHM_DIR, NULL = /dev/shm) itself when this uid
 * owns it and nobody else may write it, else <base>/msmonitor-<euid> (0700), else
 * <xdg>/msmonitor, else <sockdir>/msmonitor-shm. Every refused candidate is one WARNING
 * with the fix. 0 or -errno. */
int shmseg_dir(const char *base, const char *xdg, const char *sockdir, char *buf, size_t cap);
/* A segment or side file a rank may attach to: a regular file of this uid or root that
 * nobody else can write. 0, or -EPERM with the reason and the fix in err. */
int shmseg_file_trusted(const char *path, const struct stat *st, char *err, size_t errcap);
/* The stale-rule error text with the `rm -f` command (exactly Python's stale_message). */
int shmseg_stale_message(const char *path, char *buf, size_t cap);

/* Open `path` or create it (one creator wins via link(2)). *ret_fd holds a shared flock for
 * cleanup-shm; the creator's also holds the creator lock (an OFD write lock on byte 0) for
 * its life. An existing segment whose creator lock is free (its creator died, e.g. kill -9)
 * is taken over: this caller becomes the creator, the segment is re-initialised, and one
 * WARNING says so. A segment whose creator lives is never modified; it is attached unless
 * older than this process by more than stale_s (-ESTALE, err holds the stale message).
 * -EPERM a file of another uid or writable by others (never attached), -EINVAL wrong size
 * (never resized), -errno. err (may be NULL) gets a one-line reason. */
int shmseg_attach(const char *path, long stale_s, int *ret_fd, bool *ret_creator, char *err, size_t errcap);
/* Take the creator lock on fd (the caller's open file description); 0 when nobody holds it
 * (the creator is gone), else -errno. */
int shmseg_creator_lock(int fd);

/* Segment I/O over a mapped SHMSEG_SIZE buffer. The timestamp is written last with release
 * order so a reader that sees it sees the whole text. -E2BIG if the text does not fit. */
int shmseg_write(uint8_t *shm, const char *text, size_t len, int32_t aligned, uint32_t now);
uint32_t shmseg_time(const uint8_t *shm);
/* The segment's text (padding cut; a NUL-terminated private copy, caller frees) and aligned
 * start step. -ENODATA empty, -ENOMEM. */
int shmseg_read(const uint8_t *shm, char **ret_text, size_t *ret_len, int32_t *ret_aligned);

/* One lifecycle line of dyno mode: to the plugin log ("dynamic_profile: ..."), and with echo
 * on also to stderr as the Python module printed it ("[LEVEL] [msmonitor.dynamic_profile
 * <pid>] ..."). shmseg_set_echo before the first line of a join. */
void shmseg_note(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void shmseg_set_echo(bool on);

#endif
