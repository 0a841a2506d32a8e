/* kvtext: the KEY=value config text that travels dyno → daemon → poller → shm → ranks
 * (docs/design/cli.md#subcommands, docs/design/ipc.md#poller). One parser for every hop: the torch_npu rule, so C and
 * Python ranks read the same dict from the same text. */
#ifndef MSMON_CONTRACT_KVTEXT_H
#define MSMON_CONTRACT_KVTEXT_H

#include <stddef.h>
#include <stdint.h>

#define KVTEXT_MAX_KEYS 256 /* cap on the keys of one config */
/* What Python's str.strip() removes among ASCII bytes. */
#define KVTEXT_WS " \t\n\r\v\f\x1c\x1d\x1e\x1f"

/* A config: NUL-terminated views into `store` (or strings the caller put and keeps alive). */
struct kvtext {
    char *store; /* owned; freed by kvtext_fini() */
    const char *keys[KVTEXT_MAX_KEYS];
    const char *values[KVTEXT_MAX_KEYS];
    size_t n;
};

/* An empty config (no allocation). */
void kvtext_init(struct kvtext *kv);
/* Parse text[0..len): split on '\n'; keep a line only if it splits on '=' into exactly two
 * parts (a value containing '=' is lost — why the CLI refuses '=' in values); strip key and
 * value of KVTEXT_WS; a repeated key keeps its last value. Fills *ret (call kvtext_fini even
 * on error). 0, -ENOMEM, -E2BIG (more than KVTEXT_MAX_KEYS distinct keys). */
int kvtext_parse(const char *text, size_t len, struct kvtext *ret);
/* Insert or replace (last wins, like a Python dict). The strings are borrowed: they must
 * outlive kv. 0 or -E2BIG. */
int kvtext_put(struct kvtext *kv, const char *key, const char *value);
/* Value of key (exact), or NULL when absent. Borrowed until kvtext_fini(). */
const char *kvtext_get(const struct kvtext *kv, const char *key);
void kvtext_fini(struct kvtext *kv);
/* A value as Python's int(str) reads it: surrounding KVTEXT_WS allowed, then a whole decimal
 * int32. 0, -EINVAL, -ERANGE. */
int kvtext_int(const char *s, int32_t *ret);

#endif
