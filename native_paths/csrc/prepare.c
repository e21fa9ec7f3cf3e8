/* The C twin of engine/prepare.py: each sequence's token ids, and per step the flat arrays a forward reads.
 *
 * Sequences live in slots (reused after they are removed), each with a growable int32 token array.
 * The step's output arrays (np_prepare_output) are written in place, so that Python's tensors over
 * them stay valid from step to step; the rows sampled last time are kept as slots, so that their
 * tokens are appended without a lookup.
 */
#include "native_paths.h"

#include <string.h>

#define MAX_TOKEN_ID 2147483647LL

typedef struct {
    int32_t *tokens;
    int64_t length;
    int64_t capacity;
    int64_t seq_id;
    int64_t live;    /* registered (a removed slot waits on the spare list) */
    int64_t pending; /* sampled rows of this step that append to it (check_pending's count) */
} token_store;

struct np_prepare {
    int64_t block_size;
    int block_shift; /* log2(block_size) when it is a power of two, else -1 */
    np_idmap slots;
    token_store *stores;
    int64_t stores_capacity, stores_used;
    int32_t *spare;
    int64_t spare_capacity, num_spare;
    int32_t *batch_slots; /* the batch's slots, found once per step; kept, since most rows repeat */
    int64_t batch_slots_capacity, batch_slots_known;
    int32_t *sampled_slots; /* the last input's sampled rows */
    int64_t sampled_slots_capacity, num_sampled;
    np_prepare_output out;
    np_retired *retired;
};

np_prepare *np_prepare_create(int64_t block_size) {
    np_prepare *p;
    if (block_size < 1 || block_size > INT32_MAX) return NULL;
    p = np_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->block_size = block_size;
    p->block_shift = -1;
    if ((block_size & (block_size - 1)) == 0) {
        for (p->block_shift = 0; ((int64_t)1 << p->block_shift) < block_size; p->block_shift++) {
        }
    }
    p->out.bad_index = -1;
    return p;
}

void np_prepare_destroy(np_prepare *p) {
    int64_t i;
    if (!p) return;
    for (i = 0; i < p->stores_used; i++) np_free(p->stores[i].tokens);
    np_free(p->stores);
    np_free(p->spare);
    np_free(p->batch_slots);
    np_free(p->sampled_slots);
    np_idmap_release(&p->slots);
    np_free(p->out.token_ids);
    np_free(p->out.positions);
    np_free(p->out.slot_mapping);
    np_free(p->out.query_lens);
    np_free(p->out.context_lens);
    np_free(p->out.sample_indices);
    np_retired_release(&p->retired);
    np_free(p);
}

const np_prepare_output *np_prepare_output_of(const np_prepare *p) { return &p->out; }

int64_t np_prepare_num_sequences(const np_prepare *p) { return p->slots.size; }

int64_t np_prepare_tokens(const np_prepare *p, int64_t seq_id, const int32_t **tokens) {
    int32_t slot = np_idmap_get(&p->slots, seq_id);
    *tokens = NULL;
    if (slot < 0) return -1;
    *tokens = p->stores[slot].tokens;
    return p->stores[slot].length;
}

static int fail(np_prepare *p, int status, int64_t detail, int64_t index) {
    p->out.error_detail = detail;
    p->out.bad_index = index;
    return status;
}

/* ---- Pending work: sampled tokens, removals, registrations ---- */

static void remove_sequence(np_prepare *p, int64_t seq_id) {
    int32_t slot = np_idmap_get(&p->slots, seq_id);
    if (slot < 0) return; /* unknown ids are a no-op, as in Python */
    p->stores[slot].length = 0;
    p->stores[slot].live = 0;
    np_idmap_remove(&p->slots, seq_id);
    p->spare[p->num_spare++] = slot; /* room reserved when the slot was made */
}

/* Everything that can fail is checked (or reserved) before anything changes. */
static int check_pending(np_prepare *p, const int64_t *sampled, int64_t n_sampled, int64_t n_remove,
                         const int64_t *add_offsets, const int32_t *add_tokens, int64_t n_add) {
    int64_t i, needed_slots;
    if (n_sampled < 0 || n_remove < 0 || n_add < 0) return fail(p, NP_ERR_ARG, 0, -1);
    if (n_sampled && n_sampled != p->num_sampled) return fail(p, NP_ERR_ARG, NP_PREPARE_SAMPLED_COUNT, -1);
    for (i = 0; i < n_sampled; i++) {
        if (sampled[i] < 0 || sampled[i] > MAX_TOKEN_ID) return fail(p, NP_ERR_TOKEN_RANGE, NP_PREPARE_TOKEN_RANGE, i);
    }
    for (i = 0; i < n_add; i++) {
        int64_t k;
        if (add_offsets[i] < 0 || add_offsets[i + 1] < add_offsets[i]) return fail(p, NP_ERR_ARG, 0, i);
        for (k = add_offsets[i]; k < add_offsets[i + 1]; k++) {
            if (add_tokens[k] < 0) return fail(p, NP_ERR_TOKEN_RANGE, NP_PREPARE_TOKEN_RANGE, i);
        }
    }
    needed_slots = p->stores_used + n_add;
    if (np_idmap_reserve(&p->slots, n_add) ||
        np_reserve(&p->stores, &p->stores_capacity, needed_slots, sizeof(token_store)) ||
        np_reserve(&p->spare, &p->spare_capacity, needed_slots, sizeof(int32_t)))
        return fail(p, NP_ERR_NOMEM, 0, -1);
    /* Each sampled row appends one token to its store; a plan may sample one sequence in two rows
       (the Python twin appends both), so a store grows by the rows that name it, not by one. */
    for (i = 0; i < n_sampled; i++) p->stores[p->sampled_slots[i]].pending = 0;
    for (i = 0; i < n_sampled; i++) {
        token_store *store = &p->stores[p->sampled_slots[i]];
        store->pending++;
        if (np_reserve(&store->tokens, &store->capacity, store->length + store->pending, sizeof(int32_t)))
            return fail(p, NP_ERR_NOMEM, 0, -1);
    }
    return NP_OK;
}

/* Registers seq_id with `count` prompt tokens (replacing a registration it has). */
static int add_sequence(np_prepare *p, int64_t seq_id, const int32_t *tokens, int64_t count) {
    int32_t slot = np_idmap_get(&p->slots, seq_id);
    token_store *store;
    if (slot < 0) {
        if (p->num_spare > 0) {
            slot = p->spare[--p->num_spare];
        } else {
            slot = (int32_t)p->stores_used++;
            memset(&p->stores[slot], 0, sizeof(token_store));
        }
        np_idmap_put(&p->slots, seq_id, slot); /* room reserved in check_pending */
    }
    store = &p->stores[slot];
    store->length = 0;
    store->seq_id = seq_id;
    store->live = 1;
    /* Room for the prompt and its first sampled tokens, so that most steps append without growing. */
    if (np_reserve(&store->tokens, &store->capacity, count + 16, sizeof(int32_t))) {
        store->live = 0;
        np_idmap_remove(&p->slots, seq_id);
        p->spare[p->num_spare++] = slot;
        return NP_ERR_NOMEM;
    }
    if (count) memcpy(store->tokens, tokens, (size_t)count * sizeof(int32_t));
    store->length = count;
    return NP_OK;
}

int np_prepare_apply(np_prepare *p, const int64_t *sampled, int64_t n_sampled, const int64_t *remove_ids,
                     int64_t n_remove, const int64_t *add_ids, const int64_t *add_offsets,
                     const int32_t *add_tokens, int64_t n_add) {
    int64_t i;
    int status;
    p->out.bad_index = -1;
    p->out.error_detail = 0;
    status = check_pending(p, sampled, n_sampled, n_remove, add_offsets, add_tokens, n_add);
    if (status) {
        p->num_sampled = 0; /* as in Python: the rows are dropped with their tokens */
        return status;
    }
    for (i = 0; i < n_sampled; i++) {
        token_store *store = &p->stores[p->sampled_slots[i]];
        store->tokens[store->length++] = (int32_t)sampled[i];
    }
    p->num_sampled = 0;
    for (i = 0; i < n_remove; i++) remove_sequence(p, remove_ids[i]);
    for (i = 0; i < n_add; i++) {
        /* No pointer arithmetic on NULL (undefined even with offset 0): empty prompts may come without a buffer. */
        const int32_t *tokens = add_tokens ? add_tokens + add_offsets[i] : NULL;
        if (add_sequence(p, add_ids[i], tokens, add_offsets[i + 1] - add_offsets[i]))
            return fail(p, NP_ERR_NOMEM, 0, i);
    }
    return NP_OK;
}

/* ---- The step's input ---- */

static int reserve_output(np_prepare *p, int64_t num_tokens, int64_t num_seqs) {
    np_prepare_output *out = &p->out;
    int64_t tokens = out->token_capacity, seqs = out->seq_capacity;
    int64_t want_tokens = num_tokens > 0 ? num_tokens : 1, want_seqs = num_seqs > 0 ? num_seqs : 1;
    if (want_tokens > tokens) {
        int64_t t = tokens;
        if (np_reserve_stable(&out->token_ids, &t, want_tokens, sizeof(int64_t), &p->retired, &out->version)) return NP_ERR_NOMEM;
        t = tokens;
        if (np_reserve_stable(&out->positions, &t, want_tokens, sizeof(int64_t), &p->retired, &out->version)) return NP_ERR_NOMEM;
        t = tokens;
        if (np_reserve_stable(&out->slot_mapping, &t, want_tokens, sizeof(int64_t), &p->retired, &out->version)) return NP_ERR_NOMEM;
        out->token_capacity = t;
    }
    if (want_seqs > seqs) {
        int64_t b = seqs;
        if (np_reserve_stable(&out->query_lens, &b, want_seqs, sizeof(int64_t), &p->retired, &out->version)) return NP_ERR_NOMEM;
        b = seqs;
        if (np_reserve_stable(&out->context_lens, &b, want_seqs, sizeof(int64_t), &p->retired, &out->version)) return NP_ERR_NOMEM;
        b = seqs;
        if (np_reserve_stable(&out->sample_indices, &b, want_seqs, sizeof(int64_t), &p->retired, &out->version)) return NP_ERR_NOMEM;
        out->seq_capacity = b;
    }
    if (np_reserve(&p->batch_slots, &p->batch_slots_capacity, want_seqs, sizeof(int32_t)) ||
        np_reserve(&p->sampled_slots, &p->sampled_slots_capacity, want_seqs, sizeof(int32_t)))
        return NP_ERR_NOMEM;
    return NP_OK;
}

/* The checks of engine/prepare.py, in one pass but reported in its order: the first row whose
 * sequence is unknown or whose tokens are not all known, else a position past its table, else one
 * on padding. */
static int check_batch(np_prepare *p, const int64_t *seq_ids, const int64_t *num_tokens,
                       const int64_t *start_positions, int64_t n_batch, const int32_t *tables, int64_t table_width,
                       int64_t table_stride, int64_t *total) {
    int64_t i, sum = 0, bad_row = -1, bad_detail = 0, past = -1, padding = -1, block_size = p->block_size;
    int shift = p->block_shift;
    for (i = 0; i < n_batch; i++) {
        /* A row that holds the sequence it held last step keeps its slot: no hash lookup. */
        int32_t slot = i < p->batch_slots_known ? p->batch_slots[i] : -1;
        int64_t start = start_positions[i], n = num_tokens[i], last, index;
        if (slot < 0 || !p->stores[slot].live || p->stores[slot].seq_id != seq_ids[i])
            slot = np_idmap_get(&p->slots, seq_ids[i]);
        if (slot < 0 || start < 0 || n < 0 || start > p->stores[slot].length - n) {
            if (bad_row < 0) {
                bad_row = i;
                bad_detail = slot < 0 ? NP_PREPARE_UNKNOWN : NP_PREPARE_POSITIONS;
            }
            slot = 0; /* any valid slot: the step fails anyway */
            if (p->stores_used == 0) continue;
        } else {
            sum += n; /* n <= a store's length: no overflow */
        }
        p->batch_slots[i] = slot;
        if (n <= 0 || bad_row >= 0) continue;
        last = start + n - 1;
        if ((shift >= 0 ? last >> shift : last / block_size) >= table_width) {
            if (past < 0) past = i;
            continue;
        }
        if (padding < 0) {
            const int32_t *row = tables ? tables + i * table_stride : NULL; /* NULL when the tables are 0 wide */
            for (index = shift >= 0 ? start >> shift : start / block_size; index * block_size <= last; index++) {
                if (row[index] < 0) {
                    padding = i;
                    break;
                }
            }
        }
    }
    if (bad_row >= 0) {
        p->batch_slots_known = 0;
        return fail(p, bad_detail == NP_PREPARE_UNKNOWN ? NP_ERR_UNKNOWN_SEQ : NP_ERR_ARG, bad_detail, bad_row);
    }
    p->batch_slots_known = n_batch;
    if (past >= 0) return fail(p, NP_ERR_ARG, NP_PREPARE_PAST_TABLE, past);
    if (padding >= 0) return fail(p, NP_ERR_ARG, NP_PREPARE_PADDING, padding);
    *total = sum;
    return NP_OK;
}

int np_prepare_build(np_prepare *p, const int64_t *seq_ids, const int64_t *num_tokens,
                     const int64_t *start_positions, const uint8_t *samples, int64_t n_batch, const int32_t *tables,
                     int64_t table_rows, int64_t table_width, int64_t table_stride) {
    np_prepare_output *out = &p->out;
    int64_t i, total = 0, t = 0, s = 0, block_size = p->block_size;
    int status;
    out->bad_index = -1;
    out->error_detail = 0;
    out->num_tokens = out->num_seqs = out->num_samples = 0;
    p->num_sampled = 0;
    if (n_batch < 0 || table_width < 0 || table_stride < table_width) return fail(p, NP_ERR_ARG, 0, -1);
    if (table_rows != n_batch) return fail(p, NP_ERR_ARG, NP_PREPARE_TABLE_ROWS, -1);
    if (reserve_output(p, 0, n_batch)) return fail(p, NP_ERR_NOMEM, 0, -1);
    status = check_batch(p, seq_ids, num_tokens, start_positions, n_batch, tables, table_width, table_stride, &total);
    if (status) return status;
    if (reserve_output(p, total, n_batch)) return fail(p, NP_ERR_NOMEM, 0, -1);
    for (i = 0; i < n_batch; i++) {
        const int32_t *known = p->stores[p->batch_slots[i]].tokens;
        const int32_t *row = tables ? tables + i * table_stride : NULL; /* NULL when the tables are 0 wide */
        int64_t start = start_positions[i], end = start + num_tokens[i], n = num_tokens[i], position = start;
        /* Block by block: within one block the slots are consecutive, so the inner loop is plain copies. */
        while (position < end) {
            int64_t index = p->block_shift >= 0 ? position >> p->block_shift : position / block_size;
            int64_t offset = position - index * block_size, run = block_size - offset, k;
            int64_t base = (int64_t)row[index] * block_size + offset;
            int64_t *token_ids = out->token_ids + t, *positions = out->positions + t, *slots = out->slot_mapping + t;
            const int32_t *source = known + position;
            if (run > end - position) run = end - position;
            for (k = 0; k < run; k++) {
                token_ids[k] = source[k];
                positions[k] = position + k;
                slots[k] = base + k;
            }
            position += run;
            t += run;
        }
        out->query_lens[i] = n;
        out->context_lens[i] = start + n;
        if (samples[i] && n > 0) {
            out->sample_indices[s] = t - 1;
            p->sampled_slots[s++] = p->batch_slots[i];
        }
    }
    out->num_tokens = total;
    out->num_seqs = n_batch;
    out->num_samples = s;
    p->num_sampled = s;
    return NP_OK;
}

int np_prepare_step(np_prepare *p, const int64_t *sampled, int64_t n_sampled, const int64_t *remove_ids,
                    int64_t n_remove, const int64_t *add_ids, const int64_t *add_offsets,
                    const int32_t *add_tokens, int64_t n_add, const int64_t *seq_ids, const int64_t *num_tokens,
                    const int64_t *start_positions, const uint8_t *samples, int64_t n_batch,
                    const int32_t *tables, int64_t table_rows, int64_t table_width, int64_t table_stride) {
    int status = np_prepare_apply(p, sampled, n_sampled, remove_ids, n_remove, add_ids, add_offsets, add_tokens, n_add);
    if (status) return status;
    return np_prepare_build(p, seq_ids, num_tokens, start_positions, samples, n_batch, tables, table_rows,
                            table_width, table_stride);
}
