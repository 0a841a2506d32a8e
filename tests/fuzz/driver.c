/* driver: a dependency-free stand-in for libFuzzer so fuzz targets run under gcc in CI.
 * `driver ITERS [DIR...]` first replays every file of the DIRs (the committed corpus, crash
 * reproducers included: tests/fuzz/corpus/<target>/), then feeds ITERS seeded pseudo-random
 * mutations of the built-in seeds and those files; crashes and sanitizer reports fail the
 * test. `--write-seeds DIR` writes the built-in seeds as files. */
#include <dirent.h>
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

#define MAX_FILES 256
#define MAX_FILE_BYTES (1u << 20)

struct seed {
    uint8_t *p;
    size_t len;
};
static struct seed files[MAX_FILES];
static size_t nfiles;

/* Runs one input from a heap copy of exactly its size, so ASan sees any over-read. */
static void run_one(const uint8_t *p, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (len)
        memcpy(copy, p, len);
    LLVMFuzzerTestOneInput(copy, len);
    free(copy);
}

/* Replays every regular file in dir (sorted order does not matter) and keeps it as a seed. */
static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d) {
        perror(dir);
        return 1;
    }
    while ((e = readdir(d))) {
        char path[4096];
        FILE *f;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        f = fopen(path, "rb");
        if (!f)
            continue;
        uint8_t *p = malloc(MAX_FILE_BYTES);
        size_t n = p ? fread(p, 1, MAX_FILE_BYTES, f) : 0;
        fclose(f);
        if (!p)
            continue;
        run_one(p, n);
        if (nfiles < MAX_FILES) {
            files[nfiles].p = p;
            files[nfiles++].len = n;
        } else {
            free(p);
        }
    }
    closedir(d);
    return 0;
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
    static uint8_t buf[16384];
    size_t nseeds = &fuzz_nseeds ? fuzz_nseeds : 0;

    if (argc > 2 && strcmp(argv[1], "--write-seeds") == 0)
        return write_seeds(argv[2], nseeds);
    for (int a = 2; a < argc; a++) {
        if (replay_dir(argv[a]) != 0)
            return 1;
    }
    printf("replayed %zu corpus files\n", nfiles);
    for (long i = 0; i < iters; i++) {
        size_t len = 0;
        if (nfiles && (next() % 3) == 0) {
            const struct seed *f = &files[next() % nfiles];
            len = f->len < sizeof(buf) ? f->len : sizeof(buf);
            memcpy(buf, f->p, len);
            goto mutate;
        }
        if (nseeds && (next() % 4) != 0) {
            const char *s = fuzz_seeds[next() % nseeds];
            len = strlen(s);
            if (len > sizeof(buf))
                len = sizeof(buf);
            memcpy(buf, s, len);
        mutate:;
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
        run_one(buf, len);
    }
    for (size_t i = 0; i < nfiles; i++)
        free(files[i].p);
    return 0;
}
