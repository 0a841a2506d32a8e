/* fake_mspti: a library with msPTI's symbol names for the loader test. FAKE_ID_A/B are
 * complete and report their id through fake_id(); FAKE_ID_C lacks msptiActivityFlushAll. */
#include <stdint.h>
#include <stddef.h>

#define EXP __attribute__((visibility("default")))

#if defined(FAKE_ID_A)
EXP int fake_id(void) { return 1; }
#elif defined(FAKE_ID_B)
EXP int fake_id(void) { return 2; }
#else
EXP int fake_id(void) { return 3; }
#endif

EXP int msptiSubscribe(void **h, void *cb, void *ud) { (void)cb; (void)ud; *h = NULL; return 0; }
EXP int msptiUnsubscribe(void *h) { (void)h; return 0; }
EXP int msptiActivityRegisterCallbacks(void *a, void *b) { (void)a; (void)b; return 0; }
EXP int msptiActivityEnable(int k) { (void)k; return 0; }
EXP int msptiActivityDisable(int k) { (void)k; return 0; }
EXP int msptiActivityGetNextRecord(uint8_t *b, size_t n, void **r) { (void)b; (void)n; (void)r; return 3; }
#if !defined(FAKE_ID_C)
EXP int msptiActivityFlushAll(uint32_t f) { (void)f; return 0; }
#endif
