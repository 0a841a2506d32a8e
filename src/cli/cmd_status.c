/* cmd_status: `dyno status` — sends {"fn":"getStatus"} and prints the reply unchanged
 * (02-cli.md §4.1). */
#include "cli/cmd.h"

static int status_prepare(const struct cli_args *a, struct cmd_req *req, char *err, size_t errcap)
{
    (void)a;
    (void)err;
    (void)errcap;
    cli_buf_puts(&req->body, "{\"fn\":\"getStatus\"}");
    return req->body.err;
}

const struct cli_cmd cmd_status = {
    .name = "status",
    .about = "Print the daemon's npu-monitor/nputrace status and registered processes",
    .flags = NULL,
    .nflags = 0,
    .prepare = status_prepare,
    .render = cmd_render_verbatim,
};
