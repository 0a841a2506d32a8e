/* vendorlib: the symbol resolution and candidate loading of mspti_lib and cupti_lib. */
#include "plugin/backend/vendorlib.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/strutil.h"

int vendorlib_try(const struct vendorlib_desc *d, const char *path, int flags, void *table)
{
    char *t = table, *name = t + d->path_off;
    void *dl = dlopen(path, flags), *first = NULL;
    Dl_info info;

    if (!dl) {
        const char *err = dlerror();
        LOG_DEBUG("%s: dlopen %s: %s", d->tag, path, err ? err : "?");
        return -ENOENT;
    }
    memset(table, 0, d->table_size);
    for (size_t i = 0; i < d->nsyms; i++) {
        void *sym = dlsym(dl, d->syms[i].name);
        if (!sym && d->syms[i].mandatory) {
            LOG_ERROR("%s at %s lacks mandatory symbol %s", d->soname, path, d->syms[i].name);
            dlclose(dl);
            return -ENOENT;
        }
        first = first ? first : sym;
        /* POSIX guarantees data and function pointers share a representation for dlsym. */
        memcpy(t + d->syms[i].off, &sym, sizeof(sym));
    }
    memcpy(t + d->dl_off, &dl, sizeof(dl));
    str_copy(name, d->path_cap, path, strlen(path));
    /* a bare soname (already mapped, or the loader's search): name the file actually mapped */
    if (!strchr(path, '/') && first && dladdr(first, &info) && info.dli_fname)
        str_copy(name, d->path_cap, info.dli_fname, strlen(info.dli_fname));
    return 0;
}

void vendorlib_note(char *list, size_t cap, const char *what)
{
    size_t n = strlen(list);

    snprintf(list + n, cap - n, "%s%s", n ? ", " : "", what);
}
