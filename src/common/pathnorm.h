/* pathnorm: the daemon's view of where a path really points (--allowed_log_dirs):
 * `.` and `..` normalised and the symlinks of every existing component resolved, the parts
 * that do not exist yet appended as written; plus the allow-list of directory roots. */
#ifndef MSMON_COMMON_PATHNORM_H
#define MSMON_COMMON_PATHNORM_H

#include <stdbool.h>
#include <stddef.h>

#define PATHNORM_MAX 4096
#define PATHNORM_MAX_ROOTS 16

/* Resolve absolute path `path` into out (cap bytes): each existing prefix is replaced by its
 * realpath(3), so a symlink anywhere in the existing part is followed; `..` after a component
 * that does not exist removes it. -EINVAL (empty or relative path), -ENAMETOOLONG, -ELOOP, or
 * another -errno from realpath on an existing component (e.g. -EACCES). */
int pathnorm_resolve(const char *path, char *out, size_t cap);

/* resolved lies at or below root (both already resolved): prefix match on a '/' boundary. */
bool pathnorm_below(const char *resolved, const char *root);

struct pathnorm_roots {
    size_t n;
    char root[PATHNORM_MAX_ROOTS][PATHNORM_MAX];   /* resolved */
};

/* Parse "DIR[,DIR...]" (empty items skipped): each DIR must be absolute and an existing
 * directory; stored resolved. On failure the one-line reason naming the DIR is in err.
 * 0, -EINVAL, -E2BIG (more than PATHNORM_MAX_ROOTS). */
int pathnorm_roots_parse(const char *list, struct pathnorm_roots *ret, char *err, size_t errcap);

/* Is path (as written by the user) at or below one of the roots? On false, why[] says so
 * in one line ("'/etc/x' resolves to '/etc/x', outside every allowed directory"). */
bool pathnorm_roots_allow(const struct pathnorm_roots *r, const char *path, char *why,
                          size_t whycap);

/* The roots as "A,B" for messages. */
void pathnorm_roots_str(const struct pathnorm_roots *r, char *out, size_t cap);

#endif
