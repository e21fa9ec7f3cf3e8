/* The C twins of the engine's KV allocator, sampler, scheduler and input preparation, and the fused
 * core that runs scheduler, allocator and preparation in one call (contract: docs/twin-spec.md).
 *
 * Everything between the cdef markers below is plain C that cffi parses as the module's interface
 * (native_paths/build.py reads it from here, so the header and the binding cannot drift). Every
 * component is one opaque object made by *_create and released by *_destroy, and does a whole
 * engine step in one call; every call returns NP_OK (or a non-negative change mask) or a negative
 * NP_ERR_* code and never aborts.
 *
 * Outputs live in memory the component owns and rewrites in place each step, so that Python wraps
 * them once as numpy arrays and reuses the views. An output array never moves under a live view:
 * when one must grow, the old array is retired (kept until the component is destroyed) and the
 * output's `version` changes, telling the adapter to wrap the new one.
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

/* The int64 fields come first so that Python reads them as one int64 array. */
typedef struct {
    int64_t rows;      /* the batch's tables: rows x width ... */
    int64_t width;
    int64_t stride;    /* ... of a row-major buffer of `capacity_rows` x `stride` int32, padded with -1 */
    int64_t capacity_rows;
    int64_t num_free;
    int64_t bad_index;
    int64_t version;   /* changes when `tables` moves */
    const int32_t *tables;
} np_kv_alloc_result;

np_kv_alloc *np_kv_alloc_create(int32_t num_blocks, int32_t block_size);
void np_kv_alloc_destroy(np_kv_alloc *kv);
/* Frees, then grows, then writes the batch's tables into the output (rows whose table only grew
 * since the last step get just their new blocks). */
int np_kv_alloc_step(np_kv_alloc *kv, const int64_t *frees, int64_t n_frees, const int64_t *grow_seq_ids,
                     const int64_t *grow_num_blocks, int64_t n_grows, const int64_t *batch_seq_ids,
                     int64_t n_batch);
const np_kv_alloc_result *np_kv_alloc_output(const np_kv_alloc *kv);
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
/* Draws one token per row of logits [rows x vocab] whose temperatures are applied already (another engine's
 * batch, read in place): top_k[row] (0 or >= vocab: none; NULL: none for all), then top_p[row] (1: none; NULL:
 * none for all), then the draw at SplitMix64(seeds[row], position 0); no penalties, no history kept. The
 * settings of every row are checked before any is drawn (NP_ERR_ARG, bad_index: the row); a NaN row is
 * NP_ERR_NONFINITE (bad_index: the row) and may leave earlier rows' tokens written. */
int np_sampler_draw_rows(np_sampler *sampler, const float *logits, int64_t rows, int64_t vocab, const int32_t *top_k,
                         const float *top_p, const int64_t *seeds, int64_t *out_tokens, int64_t *bad_index);
/* For tests: nonzero makes pass F run its portable build even where a fused AVX-512 or AVX2 variant would
   (process-wide), so that the twin tests cover both on a machine that has the wider one. */
void np_sampler_portable_pass_f(int portable);
/* Which pass F runs on this machine now: 2 the AVX-512 FMA variant, 1 the AVX2+FMA one, 0 the portable build. */
int np_sampler_pass_f_variant(void);

/* ---- Scheduler (scheduler.c) ---- */
typedef struct np_scheduler np_scheduler;

enum { NP_POLICY_FCFS = 0, NP_POLICY_PRIORITY = 1 };

/* What a step's return value says changed since the previous step (0: only array contents did). */
enum { NP_PLAN_BATCH = 1, NP_PLAN_FREES = 2, NP_PLAN_PREEMPTED = 4, NP_PLAN_GROWS = 8, NP_PLAN_MOVED = 16 };

/* One step's plan; the int64 fields come first so that Python reads them as one int64 array. */
typedef struct {
    int64_t n_batch;
    int64_t n_frees;
    int64_t n_preempted;
    int64_t n_grows;
    int64_t num_waiting;
    int64_t num_running;
    int64_t first_admitted;
    int64_t prefill_tokens;
    int64_t decode_tokens;
    int64_t num_cached_tokens;
    int64_t bad_index;
    int64_t version;  /* changes when the arrays below move */
    int64_t capacity; /* items each array below holds */
    int64_t *seq_ids;
    int64_t *num_tokens;
    int64_t *start_positions;
    uint8_t *samples; /* 0 or 1 */
    int64_t *frees;
    int64_t *preempted;
    int64_t *grow_seq_ids;
    int64_t *grow_num_blocks;
} np_plan;

np_scheduler *np_scheduler_create(int64_t block_size, int64_t max_batch, int64_t max_batched_tokens,
                                  int policy);
void np_scheduler_destroy(np_scheduler *scheduler);
/* inputs: arrival ids, their prompt token counts, their priorities (n_arrivals each), then the
 * finished ids (n_finished). Returns NP_PLAN_* bits (>= 0) or an NP_ERR_* code. */
int np_scheduler_step(np_scheduler *scheduler, const int64_t *inputs, int64_t n_arrivals, int64_t n_finished,
                      int64_t num_free_blocks);
const np_plan *np_scheduler_plan(const np_scheduler *scheduler);
int64_t np_scheduler_num_waiting(const np_scheduler *scheduler);
int64_t np_scheduler_num_running(const np_scheduler *scheduler);

/* ---- Input preparation (prepare.c) ---- */
typedef struct np_prepare np_prepare;

/* Why a step failed, beyond its status (np_prepare_output.error_detail). */
enum {
    NP_PREPARE_SAMPLED_COUNT = 1, /* the sampled tokens do not match the last input's sampled rows */
    NP_PREPARE_TOKEN_RANGE = 2,   /* a sampled or prompt token id outside [0, 2**31) */
    NP_PREPARE_TABLE_ROWS = 3,    /* block tables for another batch size */
    NP_PREPARE_UNKNOWN = 4,       /* a batch sequence that was never added (bad_index: its row) */
    NP_PREPARE_POSITIONS = 5,     /* tokens asked for beyond those known (bad_index: the row) */
    NP_PREPARE_PAST_TABLE = 6,    /* a position past its row's block table */
    NP_PREPARE_PADDING = 7        /* a position on a -1 entry of its row's block table */
};

/* A step's model input; the int64 fields come first so that Python reads them as one int64 array. */
typedef struct {
    int64_t num_tokens;     /* T: token_ids, positions, slot_mapping hold T items */
    int64_t num_seqs;       /* B: query_lens, context_lens hold B items */
    int64_t num_samples;    /* S: sample_indices holds S items */
    int64_t bad_index;
    int64_t error_detail;   /* NP_PREPARE_* after a failed step */
    int64_t version;        /* changes when the arrays below move */
    int64_t token_capacity;
    int64_t seq_capacity;
    int64_t *token_ids;
    int64_t *positions;
    int64_t *slot_mapping;
    int64_t *query_lens;
    int64_t *context_lens;
    int64_t *sample_indices;
} np_prepare_output;

np_prepare *np_prepare_create(int64_t block_size);
void np_prepare_destroy(np_prepare *prepare);
/* Appends `sampled` (one token per sampled row of the last input), removes, registers (each with its
 * prompt: add_tokens[add_offsets[i]:add_offsets[i+1]]), then builds the input of the batch from the
 * plan's arrays and its block tables (table_rows x table_width of a buffer with table_stride ints
 * per row). Bad sampled or prompt tokens are refused before anything is applied. */
int np_prepare_step(np_prepare *prepare, const int64_t *sampled, int64_t n_sampled, const int64_t *remove_ids,
                    int64_t n_remove, const int64_t *add_ids, const int64_t *add_offsets,
                    const int32_t *add_tokens, int64_t n_add, const int64_t *seq_ids, const int64_t *num_tokens,
                    const int64_t *start_positions, const uint8_t *samples, int64_t n_batch,
                    const int32_t *tables, int64_t table_rows, int64_t table_width, int64_t table_stride);
const np_prepare_output *np_prepare_output_of(const np_prepare *prepare);
int64_t np_prepare_num_sequences(const np_prepare *prepare);
/* Tokens known for seq_id (prompt, then sampled ones), or -1 when it is not registered. */
int64_t np_prepare_tokens(const np_prepare *prepare, int64_t seq_id, const int32_t **tokens);

/* ---- The fused core: scheduler, allocator and preparation in one call (core.c) ---- */
typedef struct np_core np_core;

/* Beyond the NP_PLAN_* bits, what a core step's return value can say. */
enum { NP_CORE_KV_FAILED = 32, NP_CORE_PREPARE_FAILED = 64 };

np_core *np_core_create(int32_t num_blocks, int32_t block_size, int64_t max_batch, int64_t max_batched_tokens,
                        int policy);
void np_core_destroy(np_core *core);
/* Applies the preparation's pending work (as np_prepare_step), schedules with the core's own free
 * blocks, runs the allocator over the plan and prepares the model input from the plan and the
 * tables. Returns the scheduler's NP_PLAN_* bits, with NP_CORE_*_FAILED when the allocator or the
 * preparation failed (np_core_status says why; the plan stands), or the scheduler's NP_ERR_* code. */
int np_core_step(np_core *core, const int64_t *inputs, int64_t n_arrivals, int64_t n_finished,
                 const int64_t *sampled, int64_t n_sampled, const int64_t *remove_ids, int64_t n_remove,
                 const int64_t *add_ids, const int64_t *add_offsets, const int32_t *add_tokens, int64_t n_add);
int np_core_status(const np_core *core);
np_scheduler *np_core_scheduler(np_core *core);
np_kv_alloc *np_core_kv_alloc(np_core *core);
np_prepare *np_core_prepare(np_core *core);
/* ---- torch's OpenMP threads for the kernels (parallel.c) ---- */
/* GOMP_parallel, omp_get_thread_num and omp_get_num_threads of the libgomp torch loaded (all NULL: one
 * thread); the kernels then split their work over torch's own threads. */
void np_set_openmp(void *parallel, void *thread_num, void *num_threads);

/* ---- block-quantized linear (block_linear.c) ---- */
/* y[rows, out] = x[rows, in] times the transpose of a [out, in] matrix packed by engine/blockquant.py:
 * for each group of four rows, for each block of 32 columns (the last one padded with zero weights),
 * bits 4: 80 bytes (four float16 scales, four float16 minimums, four rows of 16 bytes of nibbles);
 * bits 8: 136 bytes (four float16 scales, four rows of 32 signed bytes). The activations are quantized
 * to 8 bits per block of 32. `simd` caps the vector loops: 0 portable C, 1 AVX2, 2 AVX-512 VNNI where the
 * CPU has them (tests compare all three). */
int np_block_linear(const uint8_t *packed, int32_t bits, int64_t out, int64_t in, const float *x, int64_t rows,
                    float *y, int32_t threads, int32_t simd);
/* The best vector level np_block_linear can use on this CPU (0, 1 or 2, as its `simd`). */
int np_block_simd(void);

/* ---- decode attention over the paged KV cache (decode_attention.c) ---- */
/* out[batch, n_heads * head_dim] for one query row a sequence, q[batch, n_heads * head_dim], against a
 * layer's pool [num_blocks, block_size, 2 (K, V), n_kv, head_dim]: sequence b's first lens[b] positions,
 * position t in block tables[b * table_width + t / block_size]; query head h reads KV head
 * h / (n_heads / n_kv). NP_ERR_ARG, before any work, for a bad size, a length past the table or a used
 * block id outside the pool. `simd` 0 forces the portable loop, 1 allows AVX2 (tests compare the two). */
int np_decode_attention(const float *q, int64_t batch, int64_t n_heads, int64_t n_kv, int64_t head_dim,
                        const float *pool, int64_t num_blocks, int64_t block_size, const int64_t *tables,
                        int64_t table_width, const int64_t *lens, float scale, float *out, int32_t threads,
                        int32_t simd);
/* ---- a decode step's layers in one call (decode_layers.c) ---- */
/* One layer's weights: its two norms' float32 weights, its four 4-bit matrices packed as np_block_linear
 * reads them (QKV [q + 2 kv widths, dim], output [dim, q width], gate and up [2 hidden, dim], down
 * [dim, hidden]), and its KV pool [num_blocks, block_size, 2 (K, V), n_kv, head_dim]. */
typedef struct {
    const float *attn_norm;
    const float *ffn_norm;
    const uint8_t *qkv;
    const uint8_t *attn_out;
    const uint8_t *gate_up;
    const uint8_t *down;
    float *pool;
} np_decode_layer;

typedef struct {
    int64_t dim, n_heads, n_kv, head_dim, hidden, num_blocks, block_size;
    float eps; /* the norms' */
} np_decode_shape;

/* Runs `n_layers` Llama layers over x[batch, dim] in place for a step in which every sequence computes one
 * token: rope[batch, head_dim / 2, 2] the (cos, sin) of each row's position, slots[batch] where its key
 * and value go, tables and lens as np_decode_attention reads them. NP_ERR_ARG, before any work, for a bad
 * size, slot, length or block id; NP_ERR_NOMEM may leave the step half done. `simd` as np_block_linear's. */
int np_decode_layers(const np_decode_layer *layers, int64_t n_layers, const np_decode_shape *shape, float *x,
                     int64_t batch, const float *rope, const int64_t *slots, const int64_t *tables,
                     int64_t table_width, const int64_t *lens, int32_t threads, int32_t simd);
/* cdef-end */

/* ---- Internal helpers shared by the C files (not part of the Python interface) ---- */

void *np_malloc(size_t size);
void *np_calloc(size_t count, size_t size);
void np_free(void *pointer);
/* Grows the array whose address is given (a T **) to hold at least `needed` items of `item_size`
 * bytes, doubling; NP_OK, or NP_ERR_NOMEM with the array unchanged. */
int np_reserve(void *array_address, int64_t *capacity, int64_t needed, size_t item_size);
/* `work(data)` on `threads` of torch's OpenMP threads (one, the caller, when none were handed in), and
 * inside it this thread's part of the team and the team's size (0 and 1 outside a parallel run). */
void np_run_parallel(void (*work)(void *), void *data, int threads);
void np_team(int64_t *part, int64_t *team);
/* np_decode_attention's checks of lengths and used block ids (NP_OK or NP_ERR_ARG), and its work once they
 * passed: decode_layers.c checks a step once, not once a layer. */
int np_check_paged_lengths(int64_t batch, int64_t num_blocks, int64_t block_size, const int64_t *tables,
                           int64_t table_width, const int64_t *lens);
void np_decode_attention_checked(const float *q, int64_t batch, int64_t n_heads, int64_t n_kv, int64_t head_dim,
                                 const float *pool, int64_t block_size, const int64_t *tables,
                                 int64_t table_width, const int64_t *lens, float scale, float *out,
                                 int32_t threads, int32_t simd);

/* Arrays a component handed out and then outgrew: kept until it is destroyed, since Python may
 * still hold views of them. */
typedef struct np_retired {
    void *pointer;
    struct np_retired *next;
} np_retired;

/* As np_reserve, but a new array replaces the old one (copied, the old one retired), so that the
 * old address stays valid; *version is bumped when it moves. */
int np_reserve_stable(void *array_address, int64_t *capacity, int64_t needed, size_t item_size,
                      np_retired **retired, int64_t *version);
void np_retired_release(np_retired **retired);

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

/* The steps the fused core composes (scheduler.c, kv_alloc.c, prepare.c). */
int np_prepare_apply(np_prepare *prepare, const int64_t *sampled, int64_t n_sampled, const int64_t *remove_ids,
                     int64_t n_remove, const int64_t *add_ids, const int64_t *add_offsets,
                     const int32_t *add_tokens, int64_t n_add);
int np_prepare_build(np_prepare *prepare, const int64_t *seq_ids, const int64_t *num_tokens,
                     const int64_t *start_positions, const uint8_t *samples, int64_t n_batch, const int32_t *tables,
                     int64_t table_rows, int64_t table_width, int64_t table_stride);

#endif /* NATIVE_PATHS_H */
