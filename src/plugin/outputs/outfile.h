/* outfile: shared helpers of the file exporters (DB, JSONL, and the core's log-dir check):
 * output file names, 0640/0750 creation regardless of umask, the msprof HashId and host uid
 * (docs/design/outputs.md#tables), and prepare_dir of docs/design/session.md#applying-a-config. */
#ifndef MSMON_PLUGIN_OUTFILE_H
#define MSMON_PLUGIN_OUTFILE_H

#include <stddef.h>
#include <stdint.h>

struct pipeline;
struct pl_counters;
struct output_config;

#define OUTFILE_PATH_MAX 4096
#define OUTFILE_FILE_MODE 0640
#define OUTFILE_DIR_MODE 0750

/* prepare_dir: make `path` absolute against the cwd, refuse > 4096 bytes, warn on a symlink,
 * create missing components 0750, resolve with realpath, require write+execute access.
 * Writes the resolved directory into ret_abs (cap bytes). 0 or -errno; every failure is
 * logged at ERROR with the offending path and the reason. */
int outfile_prepare_dir(const char *path, char *ret_abs, size_t cap);

/* Build "<dir>/msmonitor_<pid>_<YYYYmmddHHMMSS><mmm>_<rank>.<ext>" in local time. The
 * millisecond stamp is strictly greater than the one of any name built before in this
 * process, so names are unique and ordered even within one millisecond. 0 or -ENAMETOOLONG. */
int outfile_make_name(char *buf, size_t cap, const char *dir, int32_t rank, const char *ext);
/* Same with an explicit time in ms since the epoch (tests; no uniqueness forcing). */
int outfile_format_name(char *buf, size_t cap, const char *dir, int pid, uint64_t epoch_ms, int32_t rank,
                        const char *ext);

/* Create a regular file 0640 (O_NOFOLLOW, fchmod after open so the umask cannot change the
 * mode). truncate != 0 → O_TRUNC, else O_EXCL. Returns the fd (O_WRONLY|O_CLOEXEC) or -errno. */
int outfile_create(const char *path, int truncate);

/* msprof HashId: a = a*29 + b, c = c*131 + b (uint32) over the unsigned bytes; (a << 32) | c. */
uint64_t outfile_hash_id(const char *s, size_t n);

/* What a file exporter (DB, JSONL) keeps of its output_config: the directory (copied), the rank
 * and session start its file names carry, the pipeline whose filter, counters and devices its
 * session end records. */
struct outfile_sess {
    char *log_dir;
    int32_t rank;
    uint64_t session_start_ns;
    struct pipeline *pl;
    struct pl_counters *ctr; /* the pipeline's counters; NULL without a pipeline */
};
/* Fill from cfg (log_dir must be non-empty): 0, -EINVAL or -ENOMEM. outfile_sess_fini frees,
 * also after a failed init or on a zeroed struct. */
int outfile_sess_init(struct outfile_sess *s, const struct output_config *cfg);
void outfile_sess_fini(struct outfile_sess *s);

/* The rank's pod by its downward-API variables (penv; docs/deploy.md#attribution) as the JSON
 * object of contract/podid.h's podid_json into buf (PODID_JSON_CAP): its length, 0 without
 * POD_NAME (the host name is in HOST_INFO already). */
size_t outfile_pod_json(char *buf, size_t cap);
/* The same fields for the JSONL line of kind NAMES_META_POD: the line into buf; 0 without. */
size_t outfile_pod_line(char *buf, size_t cap);

/* Host uid of docs/design/outputs.md#tables as decimal text ("" when there is no interface). 0 or -errno. */
int outfile_host_uid(char *buf, size_t cap);

#endif
