/* The C twins of the engine's KV allocator, sampler and scheduler (contract: docs/twin-spec.md).
 *
 * Everything between the cdef markers below is plain C that cffi parses as the module's interface
 * (native_paths/build.py reads it from here, so the header and the binding cannot drift). Every
 * component is one opaque object made by *_create and released by *_destroy, and does a whole
 * engine step in one call; every call returns NP_OK or a negative NP_ERR_* code and never aborts.
 */
#ifndef NATIVE_PATHS_H
#define NATIVE_PATHS_H

#include <stddef.h>
#include <stdint.h>

/* cdef-begin */
enum {
    NP_OK = 0,
    NP_ERR_NOMEM = -1,       /* malloc/realloc failed; the object stays consistent */
    NP_ERR_ARG = -2,         /* a bad count or size; bad_index names the entry */
    NP_ERR_EXHAUSTED = -3,   /* a step grows more KV blocks than are free (a scheduler bug) */
    NP_ERR_UNKNOWN_SEQ = -4, /* a sequence id the component does not know; bad_index names it */
    NP_ERR_DUPLICATE = -5,   /* a sequence id that is already registered; bad_index names it */
    NP_ERR_TOKEN_RANGE = -6, /* a prompt token id outside the vocabulary; bad_index names the row */
    NP_ERR_NONFINITE = -7    /* NaN logits, or +inf / all -inf in a row that samples; bad_index: row */
};

/* Heap blocks currently held by all native objects together (tests check it returns to zero). */
int64_t np_live_allocations(void);

/* ---- KV block allocator (kv_alloc.c) ---- */
typedef struct np_kv_alloc np_kv_alloc;

typedef struct {
    const int32_t *tables; /* rows x width, row-major, padded with -1; owned by the allocator */
    int64_t rows;
    int64_t width;
    int64_t num_free;
    int64_t bad_index;
} np_kv_alloc_result;

np_kv_alloc *np_kv_alloc_create(int32_t num_blocks, int32_t block_size);
void np_kv_alloc_destroy(np_kv_alloc *kv);
int np_kv_alloc_step(np_kv_alloc *kv, const int64_t *frees, int64_t n_frees, const int64_t *grow_seq_ids,
               const int64_t *grow_num_blocks, int64_t n_grows, const int64_t *batch_seq_ids,
               int64_t n_batch, np_kv_alloc_result *result);
int64_t np_kv_alloc_table(const np_kv_alloc *kv, int64_t seq_id, const int32_t **blocks);
int64_t np_kv_alloc_free_list(const np_kv_alloc *kv, int32_t *out, int64_t capacity);
int32_t np_kv_alloc_ref_count(const np_kv_alloc *kv, int32_t block);
int64_t np_kv_alloc_num_free(const np_kv_alloc *kv);
int64_t np_kv_alloc_num_sequences(const np_kv_alloc *kv);

/* ---- Sampler (sampler.c) ---- */
typedef struct np_sampler np_sampler;

typedef struct {
    double temperature;
    double top_p;
    double min_p;
    double repetition_penalty;
    double frequency_penalty;
    double presence_penalty;
    int64_t top_k;
    uint64_t seed; /* params.seed mod 2**64 */
} np_sampling_params;

np_sampler *np_sampler_create(void);
void np_sampler_destroy(np_sampler *sampler);
/* Removes, then registers (each with its prompt: tokens[offsets[i]:offsets[i+1]]), then draws one
 * token per row of logits [rows x vocab] for seq_ids[row] into out_tokens. Registrations are
 * applied even when sampling fails; a failed draw records no token anywhere. */
int np_sampler_step(np_sampler *sampler, const int64_t *remove_ids, int64_t n_remove,
                    const int64_t *add_ids, const np_sampling_params *add_params,
                    const int64_t *add_prompt_offsets, const int32_t *add_prompt_tokens, int64_t n_add,
                    const float *logits, int64_t rows, int64_t vocab, const int64_t *seq_ids,
                    int64_t *out_tokens, int64_t *bad_index);
int64_t np_sampler_num_requests(const np_sampler *sampler);
/* Tokens drawn so far for seq_id, or -1 when it is not registered. */
int64_t np_sampler_position(const np_sampler *sampler, int64_t seq_id);
/* Rows so far whose approximate softmax sum was too close to a decision, so that the exact pass ran. */
int64_t np_sampler_exact_passes(const np_sampler *sampler);

/* ---- Scheduler (scheduler.c) ---- */
typedef struct np_scheduler np_scheduler;

enum { NP_POLICY_FCFS = 0, NP_POLICY_PRIORITY = 1 };

typedef struct {
    int64_t n_batch;
    const int64_t *seq_ids;
    const int64_t *num_tokens;
    const int64_t *start_positions;
    const _Bool *samples;
    int64_t n_frees;
    const int64_t *frees;
    int64_t n_preempted;
    const int64_t *preempted;
    int64_t n_grows;
    const int64_t *grow_seq_ids;
    const int64_t *grow_num_blocks;
    int64_t num_waiting;
    int64_t num_running;
    int64_t bad_index;
    /* seq_ids, num_tokens and samples equal the previous plan's (a steady decode step), so that
     * the adapter may reuse the Python lists it made then. */
    int64_t batch_unchanged;
    /* Every int64 list above, side by side, so that Python converts them in one go: start_positions,
     * frees, preempted, grow_seq_ids, grow_num_blocks, then seq_ids and num_tokens (last, so that a
     * steady step can convert only the part before them). The pointers above point into it. */
    const int64_t *ints;
    int64_t n_ints;
} np_plan;

np_scheduler *np_scheduler_create(int64_t block_size, int64_t max_num_seqs, int64_t max_batched_tokens,
                                  int policy);
void np_scheduler_destroy(np_scheduler *scheduler);
/* Arrays of the plan are owned by the scheduler and valid until its next call. */
int np_scheduler_schedule(np_scheduler *scheduler, const int64_t *arrival_ids,
                          const int64_t *arrival_prompt_tokens, const int64_t *arrival_priorities,
                          int64_t n_arrivals, const int64_t *finished, int64_t n_finished,
                          int64_t num_free_blocks, np_plan *plan);
int64_t np_scheduler_num_waiting(const np_scheduler *scheduler);
int64_t np_scheduler_num_running(const np_scheduler *scheduler);
/* cdef-end */

/* ---- Internal helpers shared by the three C files (not part of the Python interface) ---- */

void *np_malloc(size_t size);
void *np_calloc(size_t count, size_t size);
void np_free(void *pointer);
/* Grows the array whose address is given (a T **) to hold at least `needed` items of `item_size`
 * bytes, doubling; NP_OK, or NP_ERR_NOMEM with the array unchanged. */
int np_reserve(void *array_address, int64_t *capacity, int64_t needed, size_t item_size);

/* An open-addressing map from int64 ids to non-negative int32 slots (linear probing, tombstones). */
typedef struct {
    int64_t *keys;
    int32_t *values; /* -1 empty, -2 deleted, >= 0 a slot */
    int64_t capacity; /* a power of two, or 0 before the first insert */
    int64_t used;     /* live entries plus tombstones */
    int64_t size;     /* live entries */
} np_idmap;

int32_t np_idmap_get(const np_idmap *map, int64_t key);
int np_idmap_put(np_idmap *map, int64_t key, int32_t value);
/* Makes room for `extra` more keys, so that that many puts cannot fail. */
int np_idmap_reserve(np_idmap *map, int64_t extra);
void np_idmap_remove(np_idmap *map, int64_t key);
void np_idmap_release(np_idmap *map);

#endif /* NATIVE_PATHS_H */
