/* dyno: the DynoMonitor of a process (docs/design/ipc.md#plugin-client, #status-tracking): registration with the
 * daemon, config polling without one-poll lag, status and data sends. One per process.
 *
 * Recovery policy (daemon restart while the job runs): the daemon's registry is rebuilt by
 * the next `req` anyway, but its ctxt registrations and status view are lost. Before each
 * poll we stat <dir>/dynolog.sock; if its inode differs from the one seen at the last
 * successful registration (new daemon) or the previous control send failed, we re-send
 * ctxt and the last reported npuTraceStatus and npuMonitorStatus. The training process never needs a restart. */
#ifndef MSMON_PLUGIN_DYNO_H
#define MSMON_PLUGIN_DYNO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DYNO_MAX_CONFIG 65536

/* 1 registered (also on a repeated call), 0 failed. */
int dyno_init(int32_t npu_id);
/* See msmon_poll_dyno(). */
int dyno_poll(char *buf, size_t cap, size_t *ret_len);
/* npuTraceStatus / npuMonitorStatus with this pid, job 0. 0 or -errno. */
int dyno_send_trace_status(int32_t status, int32_t cur, int32_t start, int32_t stop);
int dyno_send_monitor_status(int32_t status);
/* output_send_fn: one `data` datagram to dynolog_data.sock, after the ones kept from earlier
 * failures (backlog.h: oldest first, stopping at the first failure); one that cannot be sent
 * is kept. All sends of one call share one plain send's retries (5 from 1 ms). Failures and
 * backlog drops are logged once and again on recovery; drops go to the session's
 * dropped_offline. 0 when sent (or queued behind a flush on another thread), else -errno. */
int dyno_send_data(void *ctx, const char *json, size_t len);
/* Deliver the kept data now (the poller, after a poll that reached the daemon, so a quiet
 * session drains too). 0 when sent or still going out (the rest with the next call), -EBUSY
 * when another thread is sending, else the failure. */
int dyno_flush_data(void);
/* One datagram on the data channel, one attempt, never kept in the backlog (reports that the
 * next one replaces: PluginHealth). 0 or -errno. */
int dyno_send_once(const char *json, size_t len);
struct dyno_data_stats {
    size_t entries, bytes;   /* kept now */
    uint64_t dropped;        /* oldest dropped beyond the caps, process total */
    uint64_t flushed;        /* kept datagrams delivered later, process total */
};
void dyno_data_backlog(struct dyno_data_stats *ret);
/* The last control send reached the daemon (false before the first one). */
bool dyno_reachable(void);
/* Successful registrations so far (the first and those after a daemon restart). */
unsigned dyno_registrations(void);
/* Tear down the client and all state (tests; process exit). */
void dyno_reset(void);

#endif
