/* cli_fanout: the CLI's one way to work on many hosts at once (docs/design/cli.md#targets):
 * fn(ctx, i) for every i < n on up to `parallel` threads, each taking the next index from a
 * shared counter, so every index runs as long as one thread started. The threads come from
 * common/thr (signals blocked, so Ctrl-C reaches the main thread; small stacks). */
#ifndef MSMON_CLI_FANOUT_H
#define MSMON_CLI_FANOUT_H

#include <stddef.h>

/* Runs fn for 0..n-1 and returns once all calls returned. 0, or -errno when no thread could
 * be started (nothing ran). fn must be thread-safe across different i. */
int cli_fanout(size_t n, int parallel, void (*fn)(void *ctx, size_t i), void *ctx);

#endif
