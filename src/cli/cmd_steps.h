/* cmd_steps: `dyno steps` — the merged step view of many hosts (docs/cluster.md §4). The
 * rule itself is the shared one of src/contract/slowrank.h, so the report and the benchmark
 * judge exactly as dyno does. */
#ifndef MSMON_CLI_CMD_STEPS_H
#define MSMON_CLI_CMD_STEPS_H

#include "contract/slowrank.h"

#endif
