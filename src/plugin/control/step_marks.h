/* step_marks: the `step <N>` mstx range every dyno-mode step emits (docs/design/contract.md#names),
 * through the simulator's API when the msPTI library in use is the simulator, else CANN's
 * libms_tools_ext.so, else none: what gives npu-monitor its per-step times and the nputrace
 * window its bounds. */
#ifndef MSMON_PLUGIN_STEP_MARKS_H
#define MSMON_PLUGIN_STEP_MARKS_H

#include <stdint.h>

/* Find the mstx API once (the caller serialises it with step_marks_begin/end). */
void step_marks_resolve(void);
/* Start the range `step <step>`; its id, 0 when there is no mstx API. */
uint64_t step_marks_begin(int32_t step);
/* End the range id (0: nothing). */
void step_marks_end(uint64_t id);

#endif
