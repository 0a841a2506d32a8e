/* podid: where a process runs in a cluster (docs/deploy.md#attribution). Two sources, two trust
 * levels: the container id and Kubernetes pod UID that the kernel's /proc/<pid>/cgroup path names
 * (read by whoever asks, so trusted as far as the path is), and the pod name, namespace, node and
 * container name that the process reports about itself from the downward-API variables (a claim:
 * validated here, length-capped, never used as a path). Shared by the daemon, the plugin, dyno
 * and the generated _contract.py, so every reader applies the same rules. */
#ifndef MSMON_CONTRACT_PODID_H
#define MSMON_CONTRACT_PODID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* X(id, environment variable, PluginHealth key, getStatus "pod" key, longest value):
 * the names and caps of Kubernetes (a pod or node name is a DNS subdomain, a namespace or
 * container name a DNS label). */
#define PODID_FIELDS(X)                                                  \
    X(POD, "POD_NAME", "pod_name", "name", 253)                          \
    X(NAMESPACE, "POD_NAMESPACE", "pod_namespace", "namespace", 63)      \
    X(NODE, "NODE_NAME", "node_name", "node", 253)                       \
    X(CONTAINER, "CONTAINER_NAME", "container_name", "container", 63)

enum podid_field {
#define PODID_ENUM(id, env, key, skey, cap) PODID_##id,
    PODID_FIELDS(PODID_ENUM)
#undef PODID_ENUM
    PODID_NFIELDS
};

#define PODID_VALUE_CAP 254 /* the longest field (253) + NUL */
/* The PluginHealth key of the process's hostname: the pod name of a container without the
 * downward API (docker run), which the daemon uses only for a process in a container. */
#define PODID_HOSTNAME_KEY "hostname"

/* What a process says about itself; "" = not reported (or refused). */
struct podid_self {
    char v[PODID_NFIELDS][PODID_VALUE_CAP];
    bool pod_from_hostname; /* POD_NAME was unset: the pod name is the process's hostname */
};

/* The environment variable, PluginHealth key, getStatus key and cap of a field. */
const char *podid_env(enum podid_field f);
const char *podid_key(enum podid_field f);
const char *podid_status_key(enum podid_field f);
size_t podid_cap(enum podid_field f);

/* A name the daemon shows and labels series with: 1..cap bytes of [A-Za-z0-9._-] that begins and
 * ends with a letter or digit (Kubernetes names, with the upper case and '_' that hostnames may
 * have), so it is safe in a terminal, a label, a log line and a file name. */
bool podid_valid(enum podid_field f, const char *s, size_t n);
/* Copy s[0..n) into self's field when valid; -EINVAL (field left "") otherwise. */
int podid_self_set(struct podid_self *self, enum podid_field f, const char *s, size_t n);
/* The fields from a getter of environment variables (getenv-like; NULL = unset): all of them when
 * POD_NAME is set, none otherwise; the hostname is the pod name's fallback (hostname may be NULL;
 * pod_from_hostname says so). Returns how many values were refused as invalid (those stay ""). */
int podid_self_from(struct podid_self *self, const char *(*get)(const char *name), const char *hostname);
/* The same from the values of the variables in field order (values[PODID_POD] is POD_NAME's, NULL
 * unset): for a caller that read them from a table of its own (the plugin's penv). */
int podid_self_from_values(struct podid_self *self, const char *const values[PODID_NFIELDS], const char *hostname);
/* The fields of self the downward API set (not a pod name from the hostname) as one JSON object
 * {"container","name","namespace","node"} (the known keys, sorted) into buf; the length, 0 when
 * none is set or cap is too small (PODID_JSON_CAP suffices). */
#define PODID_JSON_CAP (4 * PODID_VALUE_CAP + 64)
size_t podid_json(const struct podid_self *self, char *buf, size_t cap);

#define PODID_CID_CAP 65 /* 64 hex digits + NUL */
#define PODID_UID_CAP 37 /* 8-4-4-4-12 + NUL */
struct podid_cgroup {
    char container_id[PODID_CID_CAP]; /* lower-case hex, "" = none found */
    char pod_uid[PODID_UID_CAP];      /* lower-case, dashed, "" = none found */
    const char *runtime;              /* "docker", "containerd", "cri-o", "podman" or "" (static) */
};

/* The container and pod a /proc/<pid>/cgroup text names (cgroup v1 and v2 lines; the cgroupfs
 * and systemd drivers' kubepods paths, docker, containerd, cri-o and podman scopes). The unified
 * (0::) line is preferred; without one, the first v1 line that names a container. *ret is always
 * set; 0 when a container or a pod was found, -ENOENT otherwise (a process on the bare host, or a
 * container with its own cgroup namespace, whose path is "/"). Never reads past text[len). */
int podid_cgroup_parse(const char *text, size_t len, struct podid_cgroup *ret);

/* The NSpid line of a /proc/<pid>/status text: the process's pid in each pid namespace from the
 * reader's (first) to its own (last). 0 and *ret_n (1..cap), -ENOENT without the line (kernels
 * before 4.1), -EINVAL for a malformed one, -E2BIG for more than cap levels. */
int podid_nspid_parse(const char *text, size_t len, int32_t *ret, size_t cap, size_t *ret_n);

#endif
