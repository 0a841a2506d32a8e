/* podid: the downward-API fields' rules and the two /proc parsers (cgroup path, NSpid). Every
 * parser takes a {ptr, len} view of text another process controls (its cgroup name can be chosen
 * by whoever may create cgroups) and never reads past it. */
#include "contract/podid.h"

#include <errno.h>
#include <string.h>

#include "common/jw.h"

static const struct {
    const char *env, *key, *skey;
    size_t cap;
} fields[PODID_NFIELDS] = {
#define PODID_ROW(id, env, key, skey, cap) [PODID_##id] = { env, key, skey, cap },
    PODID_FIELDS(PODID_ROW)
#undef PODID_ROW
};

_Static_assert(PODID_VALUE_CAP > 253, "the longest field must fit");

static bool field_ok(enum podid_field f)
{
    return (int)f >= 0 && f < PODID_NFIELDS;
}

const char *podid_env(enum podid_field f)
{
    return field_ok(f) ? fields[f].env : "";
}

const char *podid_key(enum podid_field f)
{
    return field_ok(f) ? fields[f].key : "";
}

const char *podid_status_key(enum podid_field f)
{
    return field_ok(f) ? fields[f].skey : "";
}

size_t podid_cap(enum podid_field f)
{
    return field_ok(f) ? fields[f].cap : 0;
}

static bool alnum(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool podid_valid(enum podid_field f, const char *s, size_t n)
{
    if (!field_ok(f) || !s || n == 0 || n > fields[f].cap || !alnum(s[0]) || !alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!alnum(s[i]) && s[i] != '.' && s[i] != '-' && s[i] != '_')
            return false;
    return true;
}

int podid_self_set(struct podid_self *self, enum podid_field f, const char *s, size_t n)
{
    if (!podid_valid(f, s, n)) {
        if (field_ok(f))
            self->v[f][0] = '\0';
        return -EINVAL;
    }
    memcpy(self->v[f], s, n);
    self->v[f][n] = '\0';
    return 0;
}

int podid_self_from(struct podid_self *self, const char *(*get)(const char *name), const char *hostname)
{
    const char *values[PODID_NFIELDS];
    for (int f = 0; f < PODID_NFIELDS; f++)
        values[f] = get ? get(fields[f].env) : NULL;
    return podid_self_from_values(self, values, hostname);
}

int podid_self_from_values(struct podid_self *self, const char *const values[PODID_NFIELDS], const char *hostname)
{
    int refused = 0;

    memset(self, 0, sizeof(*self));
    /* the fields describe a pod: without POD_NAME the others (a CONTAINER_NAME that a CI runner
     * or a shell happens to export) say nothing about this process */
    const char *pod = values[PODID_POD];
    for (int f = 0; pod && pod[0] && f < PODID_NFIELDS; f++) {
        const char *v = values[f];
        if (v && v[0] && podid_self_set(self, (enum podid_field)f, v, strlen(v)) != 0)
            refused++;
    }
    /* a plain container (docker run) has no downward API; its hostname is what `docker ps`
     * and the user know it by, as a pod's hostname is its name */
    if (!self->v[PODID_POD][0] && hostname && hostname[0] &&
        podid_self_set(self, PODID_POD, hostname, strlen(hostname)) == 0)
        self->pod_from_hostname = true;
    return refused;
}

size_t podid_json(const struct podid_self *self, char *buf, size_t cap)
{
    /* getStatus's keys, in sorted order */
    static const enum podid_field order[] = { PODID_CONTAINER, PODID_POD, PODID_NAMESPACE, PODID_NODE };
    struct jw w;
    bool any = false;

    jw_init(&w, buf, cap);
    jw_obj_begin(&w);
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        if (!self->v[order[i]][0] || (order[i] == PODID_POD && self->pod_from_hostname))
            continue;
        jw_kv_str(&w, fields[order[i]].skey, self->v[order[i]]);
        any = true;
    }
    jw_obj_end(&w);
    return any && !w.err ? w.len : 0;
}

/* ------------------------------------------------------------------ /proc/<pid>/cgroup */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Exactly 64 hex digits: a container id (docker, containerd, cri-o and podman all use them). */
static bool take_cid(const char *s, size_t n, char *out)
{
    if (n != 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (hexval(s[i]) < 0)
            return false;
    for (size_t i = 0; i < n; i++)
        out[i] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
    out[n] = '\0';
    return true;
}

/* A pod UID 8-4-4-4-12 with sep ('-' in cgroupfs paths, '_' in systemd slice names). */
static bool take_uid(const char *s, size_t n, char sep, char *out)
{
    static const size_t dash[] = { 8, 13, 18, 23 };
    size_t d = 0;
    if (n != 36)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (d < 4 && i == dash[d]) {
            if (s[i] != sep)
                return false;
            out[i] = '-';
            d++;
            continue;
        }
        if (hexval(s[i]) < 0)
            return false;
        out[i] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
    }
    out[n] = '\0';
    return true;
}

static bool has_prefix(const char *s, size_t n, const char *p)
{
    size_t k = strlen(p);
    return n >= k && memcmp(s, p, k) == 0;
}

static bool has_suffix(const char *s, size_t n, const char *p)
{
    size_t k = strlen(p);
    return n >= k && memcmp(s + n - k, p, k) == 0;
}

/* One path component; the deepest container id and pod UID of a path win (a kind node is a
 * docker container whose kubelet runs containerd containers below it). */
static void component(const char *c, size_t n, bool under_docker, struct podid_cgroup *r)
{
    static const struct {
        const char *prefix, *runtime;
    } scopes[] = {
        { "docker-", "docker" },
        { "cri-containerd-", "containerd" },
        { "crio-", "cri-o" },
        { "libpod-", "podman" },
    };
    char id[PODID_CID_CAP], uid[PODID_UID_CAP];

    if (take_cid(c, n, id)) { /* cgroupfs driver: .../pod<uid>/<id>, /docker/<id> */
        memcpy(r->container_id, id, sizeof(id));
        r->runtime = under_docker ? "docker" : "";
        return;
    }
    if (has_suffix(c, n, ".scope")) {
        for (size_t i = 0; i < sizeof(scopes) / sizeof(scopes[0]); i++) {
            size_t p = strlen(scopes[i].prefix);
            if (has_prefix(c, n, scopes[i].prefix) && take_cid(c + p, n - p - strlen(".scope"), id)) {
                memcpy(r->container_id, id, sizeof(id));
                r->runtime = scopes[i].runtime;
                return;
            }
        }
        return;
    }
    if (has_prefix(c, n, "pod") && take_uid(c + 3, n - 3, '-', uid)) { /* cgroupfs: pod<uid> */
        memcpy(r->pod_uid, uid, sizeof(uid));
        return;
    }
    /* systemd driver: [kubelet-]kubepods[-<qos>]-pod<uid with '_'>.slice */
    if ((has_prefix(c, n, "kubepods") || has_prefix(c, n, "kubelet-kubepods")) && has_suffix(c, n, ".slice") &&
        n >= 36 + 4 + 6) {
        const char *u = c + n - 6 - 36;
        if (memcmp(u - 4, "-pod", 4) == 0 && take_uid(u, 36, '_', uid))
            memcpy(r->pod_uid, uid, sizeof(uid));
    }
}

static bool parse_path(const char *p, size_t n, struct podid_cgroup *r)
{
    bool under_docker = false;
    struct podid_cgroup got = { "", "", "" };

    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && p[j] != '/')
            j++;
        if (j > i) {
            component(p + i, j - i, under_docker, &got);
            if (j - i == 6 && memcmp(p + i, "docker", 6) == 0)
                under_docker = true;
        }
        i = j + 1;
    }
    if (!got.container_id[0] && !got.pod_uid[0])
        return false;
    *r = got;
    return true;
}

int podid_cgroup_parse(const char *text, size_t len, struct podid_cgroup *ret)
{
    struct podid_cgroup v1 = { "", "", "" };
    bool have_v1 = false;

    *ret = (struct podid_cgroup){ "", "", "" };
    if (!text)
        return -ENOENT;
    for (size_t i = 0; i < len;) {
        size_t e = i;
        while (e < len && text[e] != '\n')
            e++;
        /* hierarchy-ID:controllers:path; the path itself may hold ':' */
        const char *c1 = memchr(text + i, ':', e - i);
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(text + e - (c1 + 1))) : NULL;
        if (c2) {
            const char *path = c2 + 1;
            size_t pn = (size_t)(text + e - path);
            bool unified = c1 == text + i + 1 && text[i] == '0' && c2 == c1 + 1;
            struct podid_cgroup got;
            if (parse_path(path, pn, &got)) {
                if (unified) {
                    *ret = got;
                    return 0;
                }
                if (!have_v1 || (!v1.container_id[0] && got.container_id[0])) {
                    v1 = got;
                    have_v1 = true;
                }
            }
        }
        i = e + 1;
    }
    if (!have_v1)
        return -ENOENT;
    *ret = v1;
    return 0;
}

/* ------------------------------------------------------------------ /proc/<pid>/status */

int podid_nspid_parse(const char *text, size_t len, int32_t *ret, size_t cap, size_t *ret_n)
{
    static const char tag[] = "NSpid:";
    const size_t tl = sizeof(tag) - 1;
    size_t i = 0, n = 0;

    if (!text)
        return -ENOENT;
    /* the line starts the text or follows a newline */
    while (i < len) {
        if (len - i >= tl && memcmp(text + i, tag, tl) == 0 && (i == 0 || text[i - 1] == '\n'))
            break;
        const char *nl = memchr(text + i, '\n', len - i);
        if (!nl)
            return -ENOENT;
        i = (size_t)(nl - text) + 1;
    }
    if (i >= len)
        return -ENOENT;
    i += tl;
    for (;;) {
        int64_t v = 0;
        size_t digits = 0;
        while (i < len && (text[i] == ' ' || text[i] == '\t'))
            i++;
        if (i >= len || text[i] == '\n')
            break;
        while (i < len && text[i] >= '0' && text[i] <= '9' && digits < 11) {
            v = v * 10 + (text[i] - '0');
            digits++;
            i++;
        }
        if (digits == 0 || v < 1 || v > INT32_MAX ||
            (i < len && text[i] != ' ' && text[i] != '\t' && text[i] != '\n'))
            return -EINVAL;
        if (n == cap)
            return -E2BIG;
        ret[n++] = (int32_t)v;
    }
    if (n == 0)
        return -EINVAL;
    *ret_n = n;
    return 0;
}
