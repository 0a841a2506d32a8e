/* step_slots: the side file of every rank's step (step_slots.h). */
#include "plugin/control/step_slots.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "contract/names.h"
#include "plugin/control/shm_segment.h"

#define SLOTS_BYTES (STEP_SLOTS_N * sizeof(uint32_t))

/* "<dir>/msmonitor_steps.<segment name>": not under the segment's prefix, so tools that list
 * DynamicProfileNpuShm* segments see one file per job. */
static int slots_path(const char *seg, char *buf, size_t cap)
{
    const char *slash = strrchr(seg, '/');
    int dlen = slash ? (int)(slash - seg) + 1 : 0;

    return snprintf(buf, cap, "%.*s" NAMES_SHM_STEPS_PREFIX "%s", dlen, seg, seg + dlen) < (int)cap ? 0 : -1;
}

static void slots_map(struct step_slots *s, bool create)
{
    static bool said;
    char err[PATH_MAX + 256] = "";
    struct stat st;
    void *m;
    int fd;

    fd = open(s->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (create ? O_CREAT : 0), 0600);
    if (fd < 0)
        return;
    if (fstat(fd, &st) != 0 || shmseg_file_trusted(s->path, &st, err, sizeof(err)) != 0) {
        if (!said)
            shmseg_note(LOG_LVL_WARNING, "%s; the nputrace start step is aligned without it", err[0] ? err : s->path);
        said = true;
        close(fd);
        return;
    }
    /* Zeroed by the new poller's rank: a killed job's steps must not push the start away. */
    if (create && (ftruncate(fd, 0) != 0 || ftruncate(fd, SLOTS_BYTES) != 0)) {
        close(fd);
        return;
    }
    m = mmap(NULL, SLOTS_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return;
    if (stat(s->path, &st) == 0 && st.st_size >= (off_t)SLOTS_BYTES)
        s->slots = m;
    else
        munmap(m, SLOTS_BYTES);
}

void step_slots_open(struct step_slots *s, const char *seg_path, bool create)
{
    if (s->slots)
        munmap(s->slots, SLOTS_BYTES);
    s->slots = NULL;
    s->retry = 0;
    if (slots_path(seg_path, s->path, sizeof(s->path)) != 0) {
        s->path[0] = '\0';
        return;
    }
    if (create)
        slots_map(s, true);
}

void step_slots_note(struct step_slots *s, int32_t rank, int32_t step)
{
    if (!s->slots && s->path[0] && s->retry-- == 0) {
        s->retry = STEP_SLOTS_RETRY;
        slots_map(s, false);
    }
    if (s->slots)
        __atomic_store_n(&s->slots[(uint32_t)rank % STEP_SLOTS_N], (uint32_t)step, __ATOMIC_RELAXED);
}

int32_t step_slots_max(const struct step_slots *s, int32_t own)
{
    int32_t best = own;

    if (s->slots)
        for (uint32_t i = 0; i < STEP_SLOTS_N; i++) {
            uint32_t v = __atomic_load_n(&s->slots[i], __ATOMIC_RELAXED);
            if (v <= INT32_MAX && (int32_t)v > best)
                best = (int32_t)v;
        }
    return best;
}

void step_slots_close(struct step_slots *s, bool ours)
{
    ours = ours && s->slots; /* a refused file is not ours to remove */
    if (s->slots)
        munmap(s->slots, SLOTS_BYTES);
    s->slots = NULL;
    if (ours && s->path[0])
        (void)unlink(s->path);
}
