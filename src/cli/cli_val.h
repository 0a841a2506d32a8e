/* cli_val: the value rules of docs/design/cli.md#validation — strict parsers and validators that produce the
 * exact one-line errors of docs/design/cli.md#validation, the f32 formatting of docs/design/contract.md#value-rules and the upstream path warnings.
 * Pure functions except cli_val_log_dir/cli_val_path_warnings, which look at the file system. */
#ifndef MSMON_CLI_VAL_H
#define MSMON_CLI_VAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/cli_buf.h"

#define CLI_VAL_STR_MAX 1024      /* "any string <= 1024 flag" */
#define CLI_VAL_PATH_MAX 4096
#define CLI_VAL_F32_LEN 64        /* enough for every finite f32 in positional form */

/* All validators return 0 or -EINVAL; on error `err` holds
 * "error: invalid value '<value>' for '--<flag>': <reason>". */
void cli_val_err(char *err, size_t cap, const char *flag, const char *value, const char *reason);

/* Finite f32, Rust `str::parse::<f32>` syntax (digits, sign, '.', exponent; no "inf"/"nan",
 * no spaces, no hex). -EINVAL otherwise. */
int cli_val_parse_f32(const char *s, float *ret);
/* Rust Display for f32: shortest round-trip digits, positional, no trailing ".0". */
int cli_val_fmt_f32(float v, char *out, size_t cap);
/* Finite f32 >= 0 ("Must be a positive number"); formatted into out (CLI_VAL_F32_LEN). */
int cli_val_nonneg_f32(const char *flag, const char *s, char *out, size_t outcap, char *err,
                       size_t cap);

/* Integer in [lo, hi] (whole string); reason is printed on failure. */
int cli_val_i64(const char *flag, const char *s, int64_t lo, int64_t hi, const char *reason,
                int64_t *ret, char *err, size_t cap);
int cli_val_u64(const char *flag, const char *s, const char *reason, uint64_t *ret, char *err,
                size_t cap);

/* Comma list of integers in [lo, hi], items trimmed, re-joined with ',' into `joined`;
 * <= 1024 bytes. Reasons: too long / "Must be a comma-separated list of integers". */
int cli_val_int_list(const char *flag, const char *s, int64_t lo, int64_t hi,
                     struct cli_buf *joined, char *err, size_t cap);

/* A value copied into config text: optional length cap (0 = none) with the "too long"
 * reason, then no '=', '\n', '\r'. */
int cli_val_config_str(const char *flag, const char *s, size_t maxlen, char *err, size_t cap);

/* s must equal one of the NULL-terminated choices (exact). */
int cli_val_enum(const char *flag, const char *s, const char *const *choices, char *err,
                 size_t cap);

/* --mspti-activity-kind: comma list of the 11 kinds, trimmed items, none empty (the strict
 * rule of contract/kinds.h). */
int cli_val_kinds(const char *flag, const char *s, char *err, size_t cap);
/* --filter: <= 1024 bytes, a valid config value, then the strict grammar of contract/fgram.h
 * (the plugin parses the same text with the lenient mode of the same tokenizer). */
int cli_val_filter(const char *flag, const char *s, char *err, size_t cap);
/* --host-sys: "None" or a comma list subset of {cpu,mem,disk,network,osrt}, trimmed and
 * re-joined into `joined`. */
int cli_val_host_sys(const char *flag, const char *s, struct cli_buf *joined, char *err,
                     size_t cap);
/* --log-file as a directory: <= 4096 bytes, non-empty when required, a directory if it
 * exists, and a valid config value. */
int cli_val_log_dir(const char *flag, const char *s, bool required, char *err, size_t cap);
/* Upstream's non-fatal path warnings, one line each, appended to out. */
void cli_val_path_warnings(const char *path, struct cli_buf *out);

#endif
