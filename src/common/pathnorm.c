/* pathnorm: component-by-component resolution. A component that exists is folded into the
 * prefix with realpath(3) (so the prefix is always a real path, and `..` on it is a plain
 * cut); once a component does not exist nothing below it can be a symlink, so the rest is
 * normalised lexically. */
#include "common/pathnorm.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Drop the last component of an absolute path (never above "/"). */
static void cut_last(char *p)
{
    char *s = strrchr(p, '/');
    if (!s || s == p)
        p[1] = '\0';
    else
        *s = '\0';
}

int pathnorm_resolve(const char *path, char *out, size_t cap)
{
    char cur[PATHNORM_MAX], cand[PATHNORM_MAX], real[PATH_MAX];
    bool missing = false;     /* cur has a component that does not exist */
    const char *p = path;
    if (!path || path[0] != '/' || cap < 2)
        return -EINVAL;
    if (strlen(path) >= PATHNORM_MAX)
        return -ENAMETOOLONG;
    cur[0] = '/';
    cur[1] = '\0';
    while (*p) {
        while (*p == '/')
            p++;
        const char *e = p;
        while (*e && *e != '/')
            e++;
        size_t n = (size_t)(e - p);
        if (n == 0)
            break;
        if (n == 1 && p[0] == '.') {
            p = e;
            continue;
        }
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            cut_last(cur);
            p = e;
            /* back in existing territory? re-check: the cut may have reached a real prefix */
            if (missing) {
                struct stat st;
                missing = lstat(cur, &st) != 0;
            }
            continue;
        }
        int w = snprintf(cand, sizeof(cand), "%s%s%.*s", cur, strcmp(cur, "/") ? "/" : "", (int)n, p);
        if (w < 0 || (size_t)w >= sizeof(cand))
            return -ENAMETOOLONG;
        p = e;
        if (!missing) {
            struct stat st;
            if (lstat(cand, &st) == 0) {
                if (!realpath(cand, real))
                    return -errno;
                if (snprintf(cur, sizeof(cur), "%s", real) >= (int)sizeof(cur))
                    return -ENAMETOOLONG;
                continue;
            }
            if (errno != ENOENT)
                return -errno;
            missing = true;
        }
        memcpy(cur, cand, (size_t)w + 1);
    }
    if (snprintf(out, cap, "%s", cur) >= (int)cap)
        return -ENAMETOOLONG;
    return 0;
}

bool pathnorm_below(const char *resolved, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/')
        return resolved[0] == '/';
    return strncmp(resolved, root, n) == 0 && (resolved[n] == '\0' || resolved[n] == '/');
}

int pathnorm_roots_parse(const char *list, struct pathnorm_roots *ret, char *err, size_t errcap)
{
    char item[PATHNORM_MAX];
    const char *p = list ? list : "";
    memset(ret, 0, sizeof(*ret));
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        struct stat st;
        int rc;
        if (n == 0)
            goto next;
        if (n >= sizeof(item)) {
            snprintf(err, errcap, "--allowed_log_dirs: directory '%.64s...' is too long", p);
            return -EINVAL;
        }
        memcpy(item, p, n);
        item[n] = '\0';
        if (item[0] != '/') {
            snprintf(err, errcap, "--allowed_log_dirs: '%s' is not an absolute path", item);
            return -EINVAL;
        }
        if (ret->n >= PATHNORM_MAX_ROOTS) {
            snprintf(err, errcap, "--allowed_log_dirs: more than %d directories", PATHNORM_MAX_ROOTS);
            return -E2BIG;
        }
        rc = pathnorm_resolve(item, ret->root[ret->n], sizeof(ret->root[0]));
        if (rc == 0 && (stat(ret->root[ret->n], &st) != 0 || !S_ISDIR(st.st_mode)))
            rc = -ENOTDIR;
        if (rc) {
            snprintf(err, errcap, "--allowed_log_dirs: '%s' is not an existing directory (%s)", item,
                     strerror(-rc));
            return -EINVAL;
        }
        ret->n++;
next:
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

bool pathnorm_roots_allow(const struct pathnorm_roots *r, const char *path, char *why,
                          size_t whycap)
{
    char res[PATHNORM_MAX];
    int rc;
    if (!path[0] || path[0] != '/') {
        snprintf(why, whycap, "'%s' is not an absolute path", path);
        return false;
    }
    rc = pathnorm_resolve(path, res, sizeof(res));
    if (rc) {
        snprintf(why, whycap, "'%s' cannot be resolved: %s", path, strerror(-rc));
        return false;
    }
    for (size_t i = 0; i < r->n; i++)
        if (pathnorm_below(res, r->root[i]))
            return true;
    if (strcmp(res, path) == 0)
        snprintf(why, whycap, "'%s' is outside every allowed directory", path);
    else
        snprintf(why, whycap, "'%s' resolves to '%s', outside every allowed directory", path, res);
    return false;
}

void pathnorm_roots_str(const struct pathnorm_roots *r, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->n && o < cap; i++) {
        int w = snprintf(out + o, cap - o, i ? ",%s" : "%s", r->root[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
}
