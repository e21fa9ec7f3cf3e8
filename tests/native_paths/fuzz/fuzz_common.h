/* Shared by the libFuzzer harnesses: a byte reader over the fuzz input, hostile-value pickers and CHECK. */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native_paths.h"

/* A broken invariant: say which, then abort so that libFuzzer saves the input as a crash file. */
#define CHECK(cond)                                                                           \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "fuzz invariant broken: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

/* Reads the input front to back; past its end every read is 0, so any input decodes to a run. */
typedef struct {
    const uint8_t *data;
    size_t size, at;
} reader;

static inline uint8_t rd_u8(reader *r) { return r->at < r->size ? r->data[r->at++] : 0; }

static inline uint64_t rd_u64(reader *r) {
    uint64_t v = 0;
    int i;
    for (i = 0; i < 8; i++) v = v << 8 | rd_u8(r);
    return v;
}

static inline int rd_done(const reader *r) { return r->at >= r->size; }

/* An integer in [lo, hi] (hi - lo < 256). */
static inline int64_t rd_range(reader *r, int64_t lo, int64_t hi) { return lo + rd_u8(r) % (hi - lo + 1); }

/* Sequence ids: a small pool, so that ids collide (duplicates, re-use after free), plus extremes. */
#define NUM_IDS 12
static const int64_t ID_POOL[NUM_IDS] = {0, 1, 2, 3, 4, 5, 6, 7, -1, INT64_MIN, INT64_MAX, (int64_t)1 << 40};
static inline int rd_id_index(reader *r) { return rd_u8(r) % NUM_IDS; }
static inline int id_index(int64_t id) {
    int i;
    for (i = 0; i < NUM_IDS; i++)
        if (ID_POOL[i] == id) return i;
    return -1;
}

/* A count or size: mostly small and legal, sometimes negative or huge (which the C code must refuse). */
static inline int64_t rd_count(reader *r, int64_t small_max) {
    uint8_t b = rd_u8(r);
    if (b < 240) return b % (small_max + 1);
    switch (b % 8) {
    case 0: return -1;
    case 1: return -2;
    case 2: return INT64_MIN;
    case 3: return INT64_MAX;
    case 4: return (int64_t)1 << 31;
    case 5: return INT32_MAX;
    case 6: return (int64_t)1 << 60;
    default: return ((int64_t)1 << 60) + 1;
    }
}

/* An array length: 0..small_max, or (rarely) negative, which must be refused with NP_ERR_ARG before
 * any array is read. Never a positive length larger than the array handed over: that breaks the
 * caller's side of the contract (an array of n items). */
static inline int64_t rd_len(reader *r, int64_t small_max) {
    uint8_t b = rd_u8(r);
    if (b < 248) return b % (small_max + 1);
    return b & 1 ? -1 : INT64_MIN;
}

/* An exactly sized heap array (NULL when empty, as the adapters pass), so that ASan sees any over-read. */
static inline void *exact_alloc(int64_t count, size_t item) {
    return count > 0 ? malloc((size_t)count * item) : NULL;
}

#endif /* FUZZ_COMMON_H */
