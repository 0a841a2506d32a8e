/* dynolog_link: the process's link to dynolog, upstream's DynoMonitor
 * (docs/design/ipc.md#plugin-client, #status-tracking): registration with the daemon, config
 * polling without one-poll lag, status and data sends. One per process; the pollers
 * (poller.h) drive it.
 *
 * Recovery policy (daemon restart while the job runs): the daemon's registry is rebuilt by
 * the next `req` anyway, but its ctxt registrations and status view are lost. Before each
 * poll we stat <dir>/dynolog.sock; if its inode differs from the one seen at the last
 * successful registration (new daemon) or the previous control send failed, we re-send
 * ctxt and the last reported npuTraceStatus and npuMonitorStatus. The training process never needs a restart. */
#ifndef MSMON_PLUGIN_DYNOLOG_LINK_H
#define MSMON_PLUGIN_DYNOLOG_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DYNOLOG_MAX_CONFIG 65536

/* 1 registered (also on a repeated call), 0 failed. */
int dynolog_init(int32_t npu_id);
/* See msmon_poll_dyno(). */
int dynolog_poll(char *buf, size_t cap, size_t *ret_len);
/* npuTraceStatus / npuMonitorStatus with this pid, job 0. 0 or -errno. */
int dynolog_send_trace_status(int32_t status, int32_t cur, int32_t start, int32_t stop);
int dynolog_send_monitor_status(int32_t status);
/* The trace status of this process's window or poller; status -1 (the process leaving) also
 * sends npuMonitorStatus -1. 0 or -errno. */
int dynolog_send_status(int32_t status, int32_t current_step, int32_t start_step, int32_t stop_step);
/* output_send_fn: one `data` datagram to dynolog_data.sock, after the ones kept from earlier
 * failures (backlog.h: oldest first, stopping at the first failure); one that cannot be sent
 * is kept. All sends of one call share one plain send's retries (5 from 1 ms). Failures and
 * backlog drops are logged once and again on recovery and counted (dynolog_data_backlog's
 * `dropped`, which the session reads for its dropped_offline). 0 when sent (or queued behind a flush on another thread), else -errno. */
int dynolog_send_data(void *ctx, const char *json, size_t len);
/* Deliver the kept data now (the poller, after a poll that reached the daemon, so a quiet
 * session drains too). 0 when sent or still going out (the rest with the next call), -EBUSY
 * when another thread is sending, else the failure. */
int dynolog_flush_data(void);
/* One datagram on the data channel, one attempt, never kept in the backlog (reports that the
 * next one replaces: PluginHealth). 0 or -errno. */
int dynolog_send_once(const char *json, size_t len);
struct dynolog_data_stats {
    size_t entries, bytes;   /* kept now */
    uint64_t dropped;        /* oldest dropped beyond the caps, process total */
    uint64_t flushed;        /* kept datagrams delivered later, process total */
};
void dynolog_data_backlog(struct dynolog_data_stats *ret);
/* The last control send reached the daemon (false before the first one). */
bool dynolog_reachable(void);
/* Successful registrations so far (the first and those after a daemon restart). */
unsigned dynolog_registrations(void);
/* Tear down the client and all state (tests; process exit). */
void dynolog_reset(void);

#endif
