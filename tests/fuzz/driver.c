/* driver: a dependency-free stand-in for libFuzzer so fuzz targets run under gcc in CI.
 * Feeds seeded pseudo-random mutations of a few seeds to LLVMFuzzerTestOneInput; crashes
 * and sanitizer reports fail the test. Argument: iteration count, or `--write-seeds DIR`
 * to write the seeds as files (the starting corpus of the libFuzzer build, scripts/fuzz.sh). */
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional seeds provided by the target (weak: a target may omit them). */
extern const char *const fuzz_seeds[] __attribute__((weak));
extern const size_t fuzz_nseeds __attribute__((weak));

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int write_seeds(const char *dir, size_t nseeds)
{
    for (size_t i = 0; i < nseeds; i++) {
        char path[4096];
        FILE *f;

        snprintf(path, sizeof(path), "%s/seed_%zu", dir, i);
        f = fopen(path, "wb");
        if (!f || fwrite(fuzz_seeds[i], 1, strlen(fuzz_seeds[i]), f) != strlen(fuzz_seeds[i])) {
            perror(path);
            if (f)
                fclose(f);
            return 1;
        }
        fclose(f);
    }
    return 0;
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
    static uint8_t buf[16384];
    size_t nseeds = &fuzz_nseeds ? fuzz_nseeds : 0;

    if (argc > 2 && strcmp(argv[1], "--write-seeds") == 0)
        return write_seeds(argv[2], nseeds);
    for (long i = 0; i < iters; i++) {
        size_t len = 0;
        if (nseeds && (next() % 4) != 0) {
            const char *s = fuzz_seeds[next() % nseeds];
            len = strlen(s);
            if (len > sizeof(buf))
                len = sizeof(buf);
            memcpy(buf, s, len);
            int muts = (int)(next() % 8);
            for (int m = 0; m < muts && len; m++) {
                switch (next() % 4) {
                case 0: buf[next() % len] = (uint8_t)next(); break;
                case 1: len = next() % (len + 1); break;
                case 2: if (len < sizeof(buf)) buf[len++] = (uint8_t)next(); break;
                default: { size_t a = next() % len; buf[a] = "{}[]\":,;=\n\\0"[next() % 12]; } break;
                }
            }
        } else {
            len = next() % 512;
            for (size_t k = 0; k < len; k++)
                buf[k] = (uint8_t)next();
        }
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, buf, len);
        LLVMFuzzerTestOneInput(copy, len);
        free(copy);
    }
    return 0;
}
