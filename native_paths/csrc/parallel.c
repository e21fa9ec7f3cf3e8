/* Runs a C kernel's work on torch's own OpenMP threads, through the GOMP_parallel of the libgomp torch
 * loaded (handed in by Python), so that a kernel neither starts a second pool whose threads compete with
 * torch's spinning ones nor ignores the thread count the engine chose. Without it, one thread. */
#include "native_paths.h"

typedef void (*gomp_parallel_fn)(void (*)(void *), void *, unsigned, unsigned);
typedef int (*omp_query_fn)(void);

static gomp_parallel_fn gomp_parallel = NULL;
static omp_query_fn omp_thread_num = NULL, omp_num_threads = NULL;

void np_set_openmp(void *parallel, void *thread_num, void *num_threads) {
    if (parallel && thread_num && num_threads) {
        gomp_parallel = (gomp_parallel_fn)parallel;
        omp_thread_num = (omp_query_fn)thread_num;
        omp_num_threads = (omp_query_fn)num_threads;
    } else {
        gomp_parallel = NULL;
        omp_thread_num = omp_num_threads = NULL;
    }
}

void np_run_parallel(void (*work)(void *), void *data, int threads) {
    if (threads > 1 && gomp_parallel) {
        gomp_parallel(work, data, (unsigned)threads, 0);
    } else {
        work(data);
    }
}

void np_team(int64_t *part, int64_t *team) {
    /* the team may be smaller than asked for: callers share by the size it has */
    if (omp_thread_num) {
        *part = omp_thread_num();
        *team = omp_num_threads();
    } else {
        *part = 0;
        *team = 1;
    }
}
