/* Fuzzes input preparation (prepare.c): np_prepare_create, then steps of sampled tokens, removals, registrations
 * and batches with their block tables. */
#include "fuzz_common.h"

#define MAX_TOKENS 256 /* a prompt of <= 24, then <= 5 sampled tokens a step for <= 32 steps */

/* The spec's preparation (docs/twin-spec.md) over the pool ids: each one's known tokens, and the ids
 * of the last input's sampled rows (what the next sampled tokens answer). */
typedef struct {
    int live[NUM_IDS];
    int64_t length[NUM_IDS];
    int32_t tokens[NUM_IDS][MAX_TOKENS];
    int sample_rows[8];
    int64_t num_sample_rows;
} model;

static volatile int64_t sink;

static int64_t rd_token(reader *r) {
    uint8_t b = rd_u8(r);
    static const int64_t odd[8] = {-1, INT32_MIN, INT32_MAX, (int64_t)1 << 31, INT64_MAX, INT64_MIN, -2, 0};
    return b < 240 ? b % 50 : odd[b % 8];
}

/* The C stores against the model: the same sequences, with the same tokens. */
static void check_stores(const np_prepare *p, const model *m) {
    int64_t i, k, live = 0;
    for (i = 0; i < NUM_IDS; i++) {
        const int32_t *tokens;
        int64_t length = np_prepare_tokens(p, ID_POOL[i], &tokens);
        CHECK(length == (m->live[i] ? m->length[i] : -1));
        for (k = 0; k < length; k++) CHECK(tokens[k] == m->tokens[i][k]);
        live += m->live[i];
    }
    CHECK(np_prepare_num_sequences(p) == live);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size, 0};
    const int64_t live_before = np_live_allocations();
    int64_t block_size = rd_range(&r, 1, 4), steps = 0, i, k;
    uint8_t hostile = rd_u8(&r);
    static model m;
    np_prepare *p;
    if (hostile >= 250) {
        /* A block size outside [1, 2^31): refused with NULL, nothing left allocated. */
        static const int64_t bad[3] = {0, -1, (int64_t)INT32_MAX + 1};
        CHECK(np_prepare_create(bad[hostile % 3]) == NULL);
        CHECK(np_live_allocations() == live_before);
        return 0;
    }
    if (hostile >= 244) block_size = INT32_MAX; /* legal, and every position lands in block 0 */
    p = np_prepare_create(block_size);
    CHECK(p != NULL);
    memset(&m, 0, sizeof m);
    while (!rd_done(&r) && steps++ < 32) {
        uint8_t how = rd_u8(&r);
        /* Sampled tokens: usually one per sampled row of the last input (or none), else a wrong count. */
        int64_t n_sampled = how < 160 ? m.num_sample_rows : how < 220 ? 0 : rd_len(&r, 5);
        int64_t n_remove = rd_len(&r, 3), n_add = rd_len(&r, 3), n_batch = rd_len(&r, 5);
        int64_t *sampled = exact_alloc(n_sampled, 8), *removes = exact_alloc(n_remove, 8);
        int64_t *add_ids = exact_alloc(n_add, 8), *offsets = malloc(8 * (n_add > 0 ? n_add + 1 : 1));
        int64_t *seq_ids = exact_alloc(n_batch, 8), *num_tokens = exact_alloc(n_batch, 8);
        int64_t *starts = exact_alloc(n_batch, 8), n_tokens_total = 0, width, stride, rows, cells;
        uint8_t *samples = exact_alloc(n_batch, 1);
        int32_t prompts[3 * 24 + 2], *add_tokens, *tables;
        int expected = NP_OK, status, applied;
        int64_t expected_detail = 0, expected_bad = -1, past = -1, padding = -1, total = 0, t = 0, s = 0;
        const np_prepare_output *out = np_prepare_output_of(p);
        int64_t *old_ids = out->token_ids, old_capacity = out->token_capacity;

        for (i = 0; i < n_sampled; i++) sampled[i] = rd_token(&r);
        for (i = 0; i < n_remove; i++) removes[i] = ID_POOL[rd_id_index(&r)];
        offsets[0] = rd_range(&r, 0, 1);
        for (i = 0; i < n_add; i++) {
            add_ids[i] = ID_POOL[rd_id_index(&r)];
            offsets[i + 1] = offsets[i] + rd_range(&r, 0, 24);
        }
        n_tokens_total = n_add > 0 ? offsets[n_add] : 0;
        for (i = 0; i < n_tokens_total; i++) prompts[i] = (int32_t)rd_token(&r);
        if (n_add > 0 && rd_u8(&r) >= 240) offsets[rd_u8(&r) % (n_add + 1)] = rd_range(&r, -2, n_tokens_total);
        add_tokens = n_tokens_total > 0 ? exact_alloc(n_tokens_total, 4) : NULL;
        if (add_tokens) memcpy(add_tokens, prompts, (size_t)n_tokens_total * 4);

        /* Pending work, as the C code must check it (all before changing anything): counts, the
         * sampled count, sampled ids in [0, 2^31), then each registration's offsets and ids >= 0. */
        if (n_sampled < 0 || n_remove < 0 || n_add < 0) expected = NP_ERR_ARG;
        else if (n_sampled && n_sampled != m.num_sample_rows)
            expected = NP_ERR_ARG, expected_detail = NP_PREPARE_SAMPLED_COUNT;
        for (i = 0; expected == NP_OK && i < n_sampled; i++) {
            if (sampled[i] < 0 || sampled[i] > INT32_MAX)
                expected = NP_ERR_TOKEN_RANGE, expected_detail = NP_PREPARE_TOKEN_RANGE, expected_bad = i;
        }
        for (i = 0; expected == NP_OK && i < n_add; i++) {
            if (offsets[i] < 0 || offsets[i + 1] < offsets[i]) expected = NP_ERR_ARG, expected_bad = i;
            for (k = offsets[i]; expected == NP_OK && k < offsets[i + 1]; k++)
                if (add_tokens[k] < 0)
                    expected = NP_ERR_TOKEN_RANGE, expected_detail = NP_PREPARE_TOKEN_RANGE, expected_bad = i;
        }
        applied = expected == NP_OK;
        if (applied) {
            /* Applied: sampled tokens to their rows' sequences, then removals, then registrations. */
            for (i = 0; i < n_sampled; i++) {
                int id = m.sample_rows[i];
                m.tokens[id][m.length[id]++] = (int32_t)sampled[i];
            }
            for (i = 0; i < n_remove; i++) m.live[id_index(removes[i])] = 0;
            for (i = 0; i < n_add; i++) {
                int id = id_index(add_ids[i]);
                m.live[id] = 1;
                m.length[id] = offsets[i + 1] - offsets[i];
                if (m.length[id]) memcpy(m.tokens[id], add_tokens + offsets[i], (size_t)m.length[id] * 4);
            }
        }
        m.num_sample_rows = 0; /* a step always consumes the sampled rows; a successful build sets new ones */

        /* The batch: decode rows (the last known token, sampled), other rows mostly inside what the
         * model knows, and hostile ones; an id may come twice. The tables: mostly real block ids. */
        for (i = 0; i < n_batch; i++) {
            int id = rd_id_index(&r);
            uint8_t b = rd_u8(&r);
            seq_ids[i] = ID_POOL[id];
            if (b < 96) {
                starts[i] = m.length[id] > 0 ? m.length[id] - 1 : 0;
                num_tokens[i] = m.length[id] > 0;
                samples[i] = 1;
                continue;
            }
            starts[i] = b < 240 ? rd_range(&r, 0, m.length[id] + 1) : rd_count(&r, 4); /* or hostile */
            num_tokens[i] = b < 240 ? rd_range(&r, 0, m.length[id] - starts[i] + 1) : rd_count(&r, 4);
            samples[i] = rd_u8(&r) & 1;
        }
        width = rd_range(&r, 0, 12);
        stride = width + rd_range(&r, 0, 2) - (rd_u8(&r) >= 250); /* rarely shorter than the width */
        rows = n_batch + (rd_u8(&r) >= 250 ? 1 : 0);              /* rarely one table too many */
        rows = rows > 0 ? rows : 0;
        /* Exactly (rows - 1) strides and a last row of `width`, as a strided numpy view can be. */
        cells = rows > 0 && width > 0 && stride >= width ? (rows - 1) * stride + width : 0;
        tables = exact_alloc(cells, 4);
        how = rd_u8(&r);
        for (i = 0; i < cells; i++) {
            uint8_t b = how < 128 ? (uint8_t)(how + 7 * i) % 31 : rd_u8(&r); /* all real, or cell by cell */
            tables[i] = b < 230 ? b % 31 : b < 245 ? -1 : b < 250 ? INT32_MAX : -2;
        }

        /* The build's refusals in the spec's order: arguments, table rows, the first row with an
         * unknown sequence or tokens not all known, else the first row past its table, else the
         * first on a negative (padding) entry. */
        if (expected == NP_OK) {
            if (n_batch < 0 || stride < width) expected = NP_ERR_ARG;
            else if (rows != n_batch) expected = NP_ERR_ARG, expected_detail = NP_PREPARE_TABLE_ROWS;
        }
        for (i = 0; expected == NP_OK && i < n_batch; i++) {
            int id = id_index(seq_ids[i]);
            int64_t start = starts[i], n = num_tokens[i], block;
            if (!m.live[id]) {
                expected = NP_ERR_UNKNOWN_SEQ, expected_detail = NP_PREPARE_UNKNOWN, expected_bad = i;
            } else if (start < 0 || n < 0 || start > m.length[id] - n) {
                expected = NP_ERR_ARG, expected_detail = NP_PREPARE_POSITIONS, expected_bad = i;
            } else if (n > 0 && (start + n - 1) / block_size >= width) {
                past = past < 0 ? i : past;
            } else {
                for (block = start / block_size; n > 0 && padding < 0 && block * block_size < start + n; block++)
                    if (tables[i * stride + block] < 0) padding = i;
            }
            if (expected == NP_OK) total += n;
        }
        if (expected == NP_OK && past >= 0)
            expected = NP_ERR_ARG, expected_detail = NP_PREPARE_PAST_TABLE, expected_bad = past;
        if (expected == NP_OK && padding >= 0)
            expected = NP_ERR_ARG, expected_detail = NP_PREPARE_PADDING, expected_bad = padding;

        status = np_prepare_step(p, sampled, n_sampled, removes, n_remove, add_ids, offsets, add_tokens, n_add,
                                 seq_ids, num_tokens, starts, samples, n_batch, tables, rows, width, stride);
        CHECK(status == expected && out->error_detail == expected_detail && out->bad_index == expected_bad);
        if (status == NP_OK) {
            /* The input: row by row its tokens, positions and KV slots (block * size + offset). */
            CHECK(out->num_tokens == total && out->num_seqs == n_batch);
            for (i = 0; i < n_batch; i++) {
                int id = id_index(seq_ids[i]);
                for (k = starts[i]; k < starts[i] + num_tokens[i]; k++, t++) {
                    CHECK(out->token_ids[t] == m.tokens[id][k] && out->positions[t] == k);
                    int64_t block = tables[i * stride + k / block_size];
                    CHECK(out->slot_mapping[t] == block * block_size + k % block_size);
                }
                CHECK(out->query_lens[i] == num_tokens[i] && out->context_lens[i] == starts[i] + num_tokens[i]);
                if (samples[i] && num_tokens[i] > 0) {
                    CHECK(s < out->num_samples && out->sample_indices[s++] == t - 1);
                    m.sample_rows[m.num_sample_rows++] = id;
                }
            }
            CHECK(out->num_samples == s);
        } else if (applied) {
            CHECK(out->num_tokens == 0 && out->num_seqs == 0 && out->num_samples == 0); /* a failed build */
        }
        check_stores(p, &m);
        /* Outputs that moved were retired, not freed: a tensor Python holds stays readable (ASan). */
        if (old_ids && old_capacity > 0) sink = old_ids[old_capacity - 1];
        free(sampled), free(removes), free(add_ids), free(offsets), free(seq_ids), free(num_tokens);
        free(starts), free(samples), free(add_tokens), free(tables);
    }
    np_prepare_destroy(p);
    CHECK(np_live_allocations() == live_before); /* destroy freed everything preparation allocated */
    return 0;
}
