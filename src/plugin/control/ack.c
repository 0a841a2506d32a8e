/* ack: ConfigAck messages (ack.h). They travel on the data socket like PluginStats, so the
 * daemon checks that the sender is the pid the message names. */
#include "plugin/control/ack.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/jw.h"
#include "common/log.h"
#include "common/strutil.h"
#include "contract/datamsg.h"
#include "contract/rank.h"
#include "common/utf8.h"
#include "plugin/control/dynolog_link.h"
#include "plugin/control/health.h"
#include "plugin/penv.h"

/* A reason that the daemon's JSON reader accepts: valid UTF-8, no control bytes, bounded. */
static void ack_clean(const char *in, char *out, size_t cap)
{
    size_t n = strlen(in), m = utf8_cut(in, n, cap - 1);

    if (!utf8_valid(in, m)) {
        for (size_t i = 0; i < m; i++)
            out[i] = (unsigned char)in[i] < 0x80 ? in[i] : '?';
    } else {
        memcpy(out, in, m);
    }
    out[m] = '\0';
    for (size_t i = 0; i < m; i++)
        if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
            out[i] = '?';
}

/* The rank as `dyno status` shows it: the identity the poller or dyno mode gave (health.h),
 * else the contract's rank rule. */
static int32_t ack_rank(void)
{
    int32_t r = health_rank();

    return r >= 0 ? r : rank_resolve(penv_get(PENV_RANK), penv_get(PENV_RANK_ID));
}

int ack_send(const char *id, const char *outcome, const char *reason, const char *state)
{
    char why[ACK_REASON_CAP + 1], buf[1024];
    struct jw w;

    if (!id || !id[0] || !dynolog_reachable())
        return 0;
    ack_clean(reason ? reason : "", why, sizeof(why));
    const struct datamsg m = { .kind = DATAMSG_CONFIG_ACK, .device_id = -1, .timestamp = clock_real_ns(),
                               .name = outcome, .name_len = SIZE_MAX };
    const struct datamsg_field extra[] = {
        { .key = "id", .type = DATAMSG_STR, .s = id, .slen = SIZE_MAX },
        { .key = "outcome", .type = DATAMSG_STR, .s = outcome, .slen = SIZE_MAX },
        { .key = "pid", .type = DATAMSG_INT, .i = getpid() },
        { .key = "rank", .type = DATAMSG_INT, .i = ack_rank() },
        { .key = "reason", .type = DATAMSG_STR, .s = why, .slen = SIZE_MAX },
        { .key = "state", .type = DATAMSG_STR, .s = state ? state : "", .slen = SIZE_MAX },
    };
    int rc;

    jw_init(&w, buf, sizeof(buf));
    rc = datamsg_write(&w, &m, extra, sizeof(extra) / sizeof(extra[0]));
    if (rc < 0)
        return rc;
    LOG_INFO("config %s: %s%s%s (session %s)", id, outcome, why[0] ? ": " : "", why, state ? state : "?");
    return dynolog_send_data(NULL, w.buf, w.len);
}
