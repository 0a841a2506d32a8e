/* fake_cupti: a library with CUPTI's symbol names for the CUPTI loader test. FAKE_ID_A/B are
 * complete and report their id through fake_cupti_id(); FAKE_ID_C lacks cuptiGetVersion. */
#include <stddef.h>
#include <stdint.h>

#define EXP __attribute__((visibility("default")))

#if defined(FAKE_ID_A)
EXP int fake_cupti_id(void) { return 1; }
#elif defined(FAKE_ID_B)
EXP int fake_cupti_id(void) { return 2; }
#else
EXP int fake_cupti_id(void) { return 3; }
#endif

EXP int cuptiActivityRegisterCallbacks(void *a, void *b) { (void)a; (void)b; return 0; }
EXP int cuptiActivityEnable(int k) { (void)k; return 0; }
EXP int cuptiActivityDisable(int k) { (void)k; return 0; }
EXP int cuptiActivityGetNextRecord(uint8_t *b, size_t n, void **r) { (void)b; (void)n; (void)r; return 12; }
EXP int cuptiActivityFlushAll(uint32_t f) { (void)f; return 0; }
#if !defined(FAKE_ID_C)
EXP int cuptiGetVersion(uint32_t *v) { *v = 130001; return 0; }
#endif
