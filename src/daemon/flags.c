/* flags: table-driven gflags-style parser. Names compare with '-' == '_'; booleans accept
 * --x, --nox and --x=<true|false|1|0|yes|no|t|f|y|n>; --flagfile nests up to 8 deep. */
#include "daemon/flags.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/strutil.h"
#include "contract/names.h"

enum flag_type { FT_BOOL, FT_INT32, FT_INT64, FT_STRING, FT_OCTAL };

struct flag_def {
    const char *name;
    enum flag_type type;
    size_t off;
    const char *def;
    int64_t lo, hi;       /* numeric range */
    const char *help;
};

#define OFF(f) offsetof(struct daemon_flags, f)
/* Sorted by name; --help prints in this order. */
static const struct flag_def table[] = {
    { "allow_interface_prefixes", FT_STRING, OFF(allow_interface_prefixes), "eno,ens,enp,enx,eth", 0, 0,
      "comma list of NIC name prefixes reported with --filter_nic_interfaces" },
    { "allowed_log_dirs", FT_STRING, OFF(allowed_log_dirs), "", 0, 0,
      "comma list of directories an npu-monitor/nputrace --log-file must resolve into; empty = any" },
    { "certs_dir", FT_STRING, OFF(certs_dir), "NO_CERTS", 0, 0,
      "TLS certificate directory; NO_CERTS = plain TCP" },
    { "certs_passphrase_file", FT_STRING, OFF(certs_passphrase_file), "", 0, 0,
      "file holding the passphrase of an encrypted server.key (mode 0600, owner us or root); empty = prompt on the terminal" },
    { "enable_ipc_monitor", FT_BOOL, OFF(enable_ipc_monitor), "false", 0, 0,
      "create the msMonitor and Kineto IPC endpoints (required for msMonitor)" },
    { "extended_host_metrics", FT_BOOL, OFF(extended_host_metrics), "true", 0, 0,
      "memory, load and disk host metrics" },
    { "filter_nic_interfaces", FT_BOOL, OFF(filter_nic_interfaces), "false", 0, 0,
      "report only interfaces with an allowed prefix" },
    { "help", FT_BOOL, OFF(help), "false", 0, 0, "show this help and exit" },
    { "ipc_allowed_uids", FT_STRING, OFF(ipc_allowed_uids), "", 0, 0,
      "comma list of extra uids whose datagrams the IPC sockets accept (the daemon's uid and root always)" },
    { "ipc_peer_pid_check", FT_BOOL, OFF(ipc_peer_pid_check), "true", 0, 0,
      "a datagram may speak only for its sender or descendants, compared in the sender's pid namespace (containers need nothing; off: compatibility only)" },
    { "ipc_socket_dir", FT_STRING, OFF(ipc_socket_dir), "", 0, 0,
      "directory of dynolog.sock, dynolog_data.sock, dyno.sock (default: MSMONITOR_SOCKET_DIR, else passwd home)" },
    { "ipc_socket_mode", FT_OCTAL, OFF(ipc_socket_mode), "0600", 0, 0777,
      "file mode of the socket files (octal)" },
    { "kernel_monitor_reporting_interval_s", FT_INT32, OFF(kernel_monitor_reporting_interval_s), "60", 1, INT32_MAX,
      "host metric cadence in seconds" },
    { "logtostderr", FT_BOOL, OFF(logtostderr), "true", 0, 0, "accepted; logs always go to stderr" },
    { "metric_log_dir", FT_STRING, OFF(metric_log_dir), "", 0, 0,
      "non-empty enables the TensorBoard logger" },
    { "port", FT_INT32, OFF(port), NAMES_STR(NAMES_RPC_PORT), 0, 65535, "RPC port" },
    { "procfs_root", FT_STRING, OFF(procfs_root), "/", 0, 0,
      "root prefix for /proc and /sys reads (fixture tests only)" },
    { "prometheus_address", FT_STRING, OFF(prometheus_address), "127.0.0.1", 0, 0,
      "Prometheus bind address" },
    { "prometheus_max_series", FT_INT32, OFF(prometheus_max_series), "20000", 1, 200000,
      "Prometheus series of all monitored processes together; beyond, new ones are folded into pid=\"<other>\" series" },
    { "prometheus_max_series_per_process", FT_INT32, OFF(prometheus_max_series_per_process), "2000", 1, 200000,
      "Prometheus series of one monitored process; beyond, its new ones are folded into its \"<other>\" series" },
    { "prometheus_port", FT_INT32, OFF(prometheus_port), NAMES_STR(NAMES_PROMETHEUS_PORT), 1, 65535, "Prometheus port" },
    { "registry_gc_age_ms", FT_INT64, OFF(registry_gc_age_ms), "60000", 1, INT64_MAX / 1000000,
      "test knob: idle time after which a polling process is forgotten" },
    { "registry_gc_interval_ms", FT_INT64, OFF(registry_gc_interval_ms), "60000", 1, INT64_MAX / 1000000,
      "test knob: period of the registry GC timer" },
    { "registry_uid_quota", FT_INT32, OFF(registry_uid_quota), "1024", 1, 4096,
      "registry entries (of 4096) one uid may hold" },
    { "remote_write_ca_file", FT_STRING, OFF(remote_write_ca_file), "", 0, 0,
      "CA bundle for an https remote-write receiver (default: the system store)" },
    { "remote_write_headers", FT_STRING, OFF(remote_write_headers), "", 0, 0,
      "extra remote-write request headers: Name=value,Name=value or @FILE with 'Name: value' lines" },
    { "remote_write_insecure_skip_verify", FT_BOOL, OFF(remote_write_insecure_skip_verify), "false", 0, 0,
      "do not verify the remote-write receiver's TLS certificate (testing only)" },
    { "remote_write_interval_s", FT_INT32, OFF(remote_write_interval_s), "15", 1, 3600,
      "remote-write cadence: every series is pushed once per interval" },
    { "remote_write_queue_bytes", FT_INT64, OFF(remote_write_queue_bytes), "67108864", 4096, INT64_C(1) << 40,
      "remote-write buffer bound in bytes (oldest dropped beyond)" },
    { "remote_write_queue_samples", FT_INT32, OFF(remote_write_queue_samples), "200000", 1, INT32_MAX,
      "remote-write buffer bound in samples (oldest dropped beyond)" },
    { "remote_write_timeout_s", FT_INT32, OFF(remote_write_timeout_s), "10", 1, 300,
      "remote-write request timeout in seconds" },
    { "remote_write_url", FT_STRING, OFF(remote_write_url), "", 0, 0,
      "non-empty enables remote-write push (Prometheus remote write 1.0) to this http(s) URL" },
    { "rpc_bind_address", FT_STRING, OFF(rpc_bind_address), "", 0, 0,
      "RPC bind address; empty = all (IPv6 dual-stack, IPv4 fallback)" },
    { "rpc_max_clients", FT_INT32, OFF(rpc_max_clients), "256", 1, 4096,
      "concurrent RPC connections per listener (TCP; dyno.sock has its own)" },
    { "rpc_max_clients_per_peer", FT_INT32, OFF(rpc_max_clients_per_peer), "8", 1, 4096,
      "concurrent TCP RPC connections from one address" },
    { "tensorboard_op_stats", FT_BOOL, OFF(tensorboard_op_stats), "false", 0, 0,
      "also write per-op statistics to TensorBoard" },
    { "use_JSON", FT_BOOL, OFF(use_JSON), "false", 0, 0, "log metrics with the JSON logger" },
    { "use_prometheus", FT_BOOL, OFF(use_prometheus), "false", 0, 0, "Prometheus exposition" },
    { "v", FT_INT32, OFF(v), "0", 0, INT32_MAX, "verbose (debug) logging level" },
    { "version", FT_BOOL, OFF(version), "false", 0, 0, "print the version and exit" },
};
#define NFLAGS (sizeof(table) / sizeof(table[0]))

/* Upstream flags accepted for configuration-file compatibility and ignored. */
static const char *const ignored[] = {
    "enable_gpu_monitor", "enable_perf_monitor", "perf_monitor_reporting_interval_s",
    "dcgm_reporting_interval_s", "dcgm_fields", "dcgm_lib_path", "dcgm_standalone_address",
    "dcgm_major_version", "enable_env_var_attribution", "use_ODS", "use_fbrelay", "use_scuba",
    "use_otlp", "use_otel", "use_otel_for_kernel_monitor", "scribe_category", "access_token",
    "certificate_path", "fbrelay_address", "fbrelay_port", "category_id", "ods_entity_prefix",
    "enable_tpu_monitor",
};
#define NIGNORED (sizeof(ignored) / sizeof(ignored[0]))
#define MAX_FLAGFILE_DEPTH 8
#define FLAGS_FILE_MAX (1 << 20)   /* flagfiles are a few hundred bytes in practice */

struct parse_state {
    struct daemon_flags *f;
    char *err;
    size_t errcap;
    bool warned[NIGNORED];
};

static const char *type_name(enum flag_type t)
{
    switch (t) {
    case FT_BOOL: return "bool";
    case FT_INT32: return "int32";
    case FT_INT64: return "int64";
    case FT_OCTAL: return "int32";
    case FT_STRING: return "string";
    }
    return "?";
}

/* Compare a user-written name (n bytes) with a table name, '-' == '_'. */
static bool name_eq(const char *user, size_t n, const char *name)
{
    size_t i;
    for (i = 0; i < n && name[i]; i++) {
        char a = user[i] == '-' ? '_' : user[i];
        if (a != name[i])
            return false;
    }
    return i == n && name[i] == '\0';
}

static const struct flag_def *lookup(const char *user, size_t n)
{
    for (size_t i = 0; i < NFLAGS; i++)
        if (name_eq(user, n, table[i].name))
            return &table[i];
    return NULL;
}

static int lookup_ignored(const char *user, size_t n)
{
    for (size_t i = 0; i < NIGNORED; i++)
        if (name_eq(user, n, ignored[i]))
            return (int)i;
    return -1;
}

static int parse_bool(const char *v, bool *ret)
{
    static const char *const yes[] = { "true", "1", "yes", "t", "y" };
    static const char *const no[] = { "false", "0", "no", "f", "n" };
    for (size_t i = 0; i < 5; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *ret = true;
            return 0;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *ret = false;
            return 0;
        }
    }
    return -EINVAL;
}

static int set_value(struct parse_state *st, const struct flag_def *d, const char *val)
{
    char *base = (char *)st->f + d->off;
    int rc = -EINVAL;
    switch (d->type) {
    case FT_BOOL:
        rc = parse_bool(val, (bool *)base);
        break;
    case FT_INT32:
    case FT_INT64: { /* one reading; the table's range keeps an int32 flag inside int32 */
        int64_t x;
        rc = str_to_i64(val, &x);
        if (rc == 0 && (x < d->lo || x > d->hi))
            rc = -ERANGE;
        if (rc == 0 && d->type == FT_INT32)
            *(int32_t *)base = (int32_t)x;
        else if (rc == 0)
            *(int64_t *)base = x;
        break;
    }
    case FT_OCTAL: {
        /* octal digits only, e.g. 0600 or 660 */
        size_t n = strlen(val);
        int64_t x = 0;
        rc = n > 0 && n <= 6 ? 0 : -EINVAL;
        for (size_t i = 0; rc == 0 && i < n; i++) {
            if (val[i] < '0' || val[i] > '7')
                rc = -EINVAL;
            else
                x = x * 8 + (val[i] - '0');
        }
        if (rc == 0 && x > d->hi)
            rc = -ERANGE;
        if (rc == 0)
            *(int32_t *)base = (int32_t)x;
        break;
    }
    case FT_STRING:
        rc = str_copy(base, FLAGS_STR_MAX, val, strlen(val));
        break;
    }
    if (rc == -ERANGE && d->type == FT_OCTAL)
        snprintf(st->err, st->errcap, "ERROR: value '%s' for flag '%s' is out of range 0..%llo", val,
                 d->name, (unsigned long long)d->hi);
    else if (rc == -ERANGE)
        snprintf(st->err, st->errcap, "ERROR: value '%s' for flag '%s' is out of range %lld..%lld", val,
                 d->name, (long long)d->lo, (long long)d->hi);
    else if (rc)
        snprintf(st->err, st->errcap, "ERROR: illegal value '%s' specified for %s flag '%s'", val,
                 type_name(d->type), d->name);
    return rc ? -EINVAL : 0;
}

void flags_defaults(struct daemon_flags *f)
{
    struct parse_state st = { .f = f };
    char err[512];   /* the defaults always parse; sized like a real message all the same */
    memset(f, 0, sizeof(*f));
    st.err = err;
    st.errcap = sizeof(err);
    for (size_t i = 0; i < NFLAGS; i++)
        (void)set_value(&st, &table[i], table[i].def);
}

static int parse_list(struct parse_state *st, int argc, char **argv, int depth);

/* Reads a flagfile: one flag per line, trimmed, '#' comments and blank lines skipped. */
static int parse_flagfile(struct parse_state *st, const char *path, int depth)
{
    FILE *fp = NULL;
    char **lines = NULL;
    int n = 0, cap = 0, rc = 0;
    char buf[FLAGS_STR_MAX + 64];
    if (depth >= MAX_FLAGFILE_DEPTH) {
        snprintf(st->err, st->errcap, "ERROR: flagfile '%s' nested deeper than %d levels", path,
                 MAX_FLAGFILE_DEPTH);
        return -ELOOP;
    }
    fp = fopen(path, "re");
    if (!fp) {
        snprintf(st->err, st->errcap, "ERROR: cannot read flagfile '%s': %s", path, strerror(errno));
        return -errno;
    }
    /* /dev/zero, a FIFO or a huge file would otherwise be read forever */
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(st->err, st->errcap, "ERROR: flagfile '%s' is not a regular file", path);
        rc = -EINVAL;
        goto out_lines;
    }
    if (sb.st_size > FLAGS_FILE_MAX) {
        snprintf(st->err, st->errcap, "ERROR: flagfile '%s' is %lld bytes, larger than the %d-byte cap",
                 path, (long long)sb.st_size, FLAGS_FILE_MAX);
        rc = -EFBIG;
        goto out_lines;
    }
    size_t total = 0;
    while (fgets(buf, sizeof(buf), fp)) {
        size_t len = strlen(buf);
        total += len;
        if (total > FLAGS_FILE_MAX) {   /* the file grew while we read it */
            snprintf(st->err, st->errcap, "ERROR: flagfile '%s' is larger than the %d-byte cap", path,
                     FLAGS_FILE_MAX);
            rc = -EFBIG;
            goto out_lines;
        }
        if (len == sizeof(buf) - 1 && buf[len - 1] != '\n') {
            snprintf(st->err, st->errcap, "ERROR: line too long in flagfile '%s'", path);
            rc = -EINVAL;
            goto out_lines;
        }
        const char *s = buf;
        str_trim_view(&s, &len, " \t\r\n");
        if (len == 0 || s[0] == '#')
            continue;
        if (n == cap) {
            int ncap = cap ? cap * 2 : 16;
            char **nl = realloc(lines, (size_t)ncap * sizeof(*nl));
            if (!nl) {
                rc = -ENOMEM;
                goto out_lines;
            }
            lines = nl;
            cap = ncap;
        }
        lines[n] = strndup(s, len);
        if (!lines[n]) {
            rc = -ENOMEM;
            goto out_lines;
        }
        n++;
    }
    rc = parse_list(st, n, lines, depth + 1);
out_lines:
    for (int i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    fclose(fp);
    return rc;
}

static int parse_list(struct parse_state *st, int argc, char **argv, int depth)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0') {
            LOG_WARN("ignoring positional argument '%s'", a);
            continue;
        }
        const char *name = a + 1 + (a[1] == '-');
        if (strcmp(a, "--") == 0)
            continue;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const char *val = eq ? eq + 1 : NULL;
        const struct flag_def *d = lookup(name, nlen);
        bool negated = false;
        if (!d && nlen > 2 && name[0] == 'n' && name[1] == 'o' && !val) {
            d = lookup(name + 2, nlen - 2);
            if (d && d->type != FT_BOOL)
                d = NULL;
            negated = d != NULL;
        }
        if (!d && name_eq(name, nlen, "flagfile")) {
            if (!val) {
                if (i + 1 >= argc) {
                    snprintf(st->err, st->errcap, "ERROR: flag 'flagfile' is missing its argument");
                    return -EINVAL;
                }
                val = argv[++i];
            }
            int rc = parse_flagfile(st, val, depth);
            if (rc)
                return rc;
            continue;
        }
        if (!d) {
            int ig = lookup_ignored(name, nlen);
            if (ig < 0 && nlen > 2 && name[0] == 'n' && name[1] == 'o' && !val)
                ig = lookup_ignored(name + 2, nlen - 2);
            if (ig >= 0) {
                bool is_bool = strncmp(ignored[ig], "enable_", 7) == 0 ||
                               strncmp(ignored[ig], "use_", 4) == 0;
                /* a value-taking ignored flag swallows its separate argument */
                if (!is_bool && !val && i + 1 < argc)
                    i++;
                if (!st->warned[ig])
                    LOG_WARN("flag --%s is not supported by this build and is ignored", ignored[ig]);
                st->warned[ig] = true;
                continue;
            }
            snprintf(st->err, st->errcap, "ERROR: unknown command line flag '%.*s'", (int)nlen, name);
            return -EINVAL;
        }
        if (negated) {
            *(bool *)((char *)st->f + d->off) = false;
            continue;
        }
        if (!val) {
            if (d->type == FT_BOOL) {
                *(bool *)((char *)st->f + d->off) = true;
                continue;
            }
            if (i + 1 >= argc) {
                snprintf(st->err, st->errcap, "ERROR: flag '%s' is missing its argument", d->name);
                return -EINVAL;
            }
            val = argv[++i];
        }
        int rc = set_value(st, d, val);
        if (rc)
            return rc;
    }
    return 0;
}

int flags_parse(int argc, char **argv, struct daemon_flags *f, char *err, size_t errcap)
{
    struct parse_state st = { .f = f, .err = err, .errcap = errcap };
    if (errcap)
        err[0] = '\0';
    int rc = parse_list(&st, argc > 1 ? argc - 1 : 0, argv + 1, 0);
    return rc ? -EINVAL : 0;
}

void flags_print_help(FILE *out)
{
    fprintf(out, "Usage: dynolog [--flag=value ...] [--flagfile=PATH]\n\nFlags:\n");
    for (size_t i = 0; i < NFLAGS; i++)
        fprintf(out, "  --%s (%s)\n      type: %s  default: \"%s\"\n", table[i].name,
                table[i].help, type_name(table[i].type), table[i].def);
    fprintf(out, "  --flagfile (read flags from a file, one per line; nests up to %d levels)\n"
                 "      type: string  default: \"\"\n", MAX_FLAGFILE_DEPTH);
    fprintf(out, "\nDashes and underscores in names are equivalent; booleans also take --noNAME.\n");
}
