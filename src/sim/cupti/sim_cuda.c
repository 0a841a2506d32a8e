/* sim_cuda: the tiny simulated CUDA entry (libmssim_cuda.so). cuInit does what the CUDA
 * driver does for tools: on the first call, dlopen CUDA_INJECTION64_PATH and call its
 * InitializeInjection() once, so an unmodified program gets libmsmonitor.so injected. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "msmon/mssim_cupti.h"

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

static void cuda_inject(void)
{
    const char *path = getenv("CUDA_INJECTION64_PATH");
    void *dl;
    int (*init)(void);

    if (!path || !path[0])
        return;
    dl = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!dl) {
        fprintf(stderr, "mssim_cuda: cannot load CUDA_INJECTION64_PATH=%s: %s\n", path, dlerror());
        return;
    }
    *(void **)&init = dlsym(dl, "InitializeInjection");
    if (!init) {
        fprintf(stderr, "mssim_cuda: %s has no InitializeInjection\n", path);
        return;
    }
    (void)init(); /* the driver ignores the result too; the library stays loaded */
}

int cuInit(unsigned int flags)
{
    (void)flags;
    pthread_once(&cuda_once, cuda_inject);
    return 0;
}
