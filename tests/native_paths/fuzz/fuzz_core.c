/* Fuzzes the fused core (core.c): np_core_create, then steps of arrivals, finishes, sampled tokens, registrations. */
#include "fuzz_common.h"

#define MAX_SEQS 64    /* engine-like runs number their sequences 0, 1, ... */
#define MAX_KNOWN 128  /* a prompt of <= 16, then at most one sampled token a step for <= 48 steps */

/* Engine-like runs: what the engine knows of each sequence (live, its tokens), and the ids of the
 * last input's sampled rows, in row order (what the next sampled tokens answer). */
typedef struct {
    int live[MAX_SEQS];
    int64_t length[MAX_SEQS];
    int32_t tokens[MAX_SEQS][MAX_KNOWN];
    int64_t sample_ids[8], num_sample_rows;
} model;

/* The pool against itself: free list and tables partition the blocks, each table block owned once. */
static void check_pool(const np_kv_alloc *kv, int32_t num_blocks, int engine_like) {
    int32_t free_list[32];
    uint8_t seen[32] = {0};
    int64_t n_free = np_kv_alloc_num_free(kv), i, k, owned = 0;
    CHECK(np_kv_alloc_free_list(kv, free_list, num_blocks) == n_free);
    for (i = 0; i < n_free; i++) {
        CHECK(free_list[i] >= 0 && free_list[i] < num_blocks && !seen[free_list[i]]);
        CHECK(np_kv_alloc_ref_count(kv, free_list[i]) == 0);
        seen[free_list[i]] = 1;
    }
    for (i = 0; i < (engine_like ? MAX_SEQS : NUM_IDS); i++) {
        const int32_t *blocks;
        int64_t length = np_kv_alloc_table(kv, engine_like ? i : ID_POOL[i], &blocks);
        for (k = 0; k < length; k++) {
            CHECK(blocks[k] >= 0 && blocks[k] < num_blocks && !seen[blocks[k]]);
            CHECK(np_kv_alloc_ref_count(kv, blocks[k]) == 1);
            seen[blocks[k]] = 1;
        }
        owned += length;
    }
    CHECK(n_free + owned == num_blocks); /* every id the run used is listed above: no block lost */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size, 0};
    const int64_t live_before = np_live_allocations();
    int32_t num_blocks = (int32_t)rd_range(&r, 1, 32), block_size = (int32_t)rd_range(&r, 1, 8);
    int64_t max_seqs = rd_range(&r, 1, 4), max_tokens = rd_range(&r, 1, 32), steps = 0, next_id = 0, i, k;
    int policy = rd_u8(&r) & 1;
    uint8_t mode = rd_u8(&r);
    int engine_like = mode < 160; /* else hostile: ids from the pool, counts and prompts that disagree */
    static model m;
    np_core *core;
    if (mode >= 250) {
        /* A bad size or policy in any part: refused with NULL, nothing left allocated. */
        switch (mode % 4) {
        case 0: num_blocks = 0; break;
        case 1: block_size = -1; break;
        case 2: max_seqs = 0; break;
        default: policy = 7;
        }
        CHECK(np_core_create(num_blocks, block_size, max_seqs, max_tokens, policy) == NULL);
        CHECK(np_live_allocations() == live_before);
        return 0;
    }
    core = np_core_create(num_blocks, block_size, max_seqs, max_tokens, policy);
    CHECK(core != NULL);
    memset(&m, 0, sizeof m);
    while (!rd_done(&r) && steps++ < 48) {
        const np_plan *plan = np_scheduler_plan(np_core_scheduler(core));
        const np_prepare_output *out = np_prepare_output_of(np_core_prepare(core));
        np_kv_alloc *kv = np_core_kv_alloc(core);
        int64_t n_arrivals = rd_len(&r, 2), n_finished = rd_len(&r, 3), n_sampled, n_remove, n_add;
        int64_t na = n_arrivals > 0 ? n_arrivals : 0, nf = n_finished > 0 ? n_finished : 0, n_prompt = 0;
        int64_t *inputs, *sampled, *removes, *add_ids, *offsets, tokens = 0;
        int32_t prompts[3 * 16], *add_tokens;
        uint8_t slot_used[256] = {0};
        int status, changed;
        if (engine_like) {
            if (next_id + na > MAX_SEQS) na = 0;
            n_arrivals = na, n_finished = nf; /* no negative counts */
        }
        inputs = exact_alloc(3 * na + nf, 8);
        if (engine_like) {
            /* As the engine calls it: new ids with prompts of >= 1 token registered in preparation,
             * finished ids among the live ones and removed from preparation, and one sampled token
             * for each sampled row of the last input. */
            for (i = 0; i < nf; i++) {
                int64_t id = rd_range(&r, 0, MAX_SEQS - 1);
                for (k = 0; k < MAX_SEQS && !m.live[id]; k++) id = (id + 1) % MAX_SEQS;
                inputs[3 * na + i] = id; /* an id finished twice in a step is ignored the second time */
            }
            n_sampled = m.num_sample_rows, n_remove = nf, n_add = na;
        } else {
            n_sampled = rd_u8(&r) < 200 ? m.num_sample_rows : rd_len(&r, 4);
            n_remove = rd_len(&r, 2), n_add = rd_len(&r, 3);
            for (i = 0; i < nf; i++) inputs[3 * na + i] = ID_POOL[rd_id_index(&r)];
        }
        sampled = exact_alloc(n_sampled, 8), removes = exact_alloc(n_remove, 8), add_ids = exact_alloc(n_add, 8);
        offsets = malloc(8 * (n_add > 0 ? n_add + 1 : 1));
        offsets[0] = 0;
        for (i = 0; i < n_sampled; i++) sampled[i] = engine_like || rd_u8(&r) < 240 ? rd_u8(&r) % 50 : -1;
        for (i = 0; i < n_remove; i++) removes[i] = engine_like ? inputs[3 * na + i] : ID_POOL[rd_id_index(&r)];
        for (i = 0; i < na; i++) {
            inputs[i] = engine_like ? next_id++ : ID_POOL[rd_id_index(&r)];
            inputs[na + i] = engine_like ? rd_range(&r, 1, 16) : rd_count(&r, 20);
            inputs[2 * na + i] = rd_range(&r, -2, 2);
        }
        for (i = 0; i < n_add; i++) {
            add_ids[i] = engine_like ? inputs[i] : ID_POOL[rd_id_index(&r)];
            offsets[i + 1] = offsets[i] + (engine_like ? inputs[na + i] : rd_range(&r, 0, 16));
        }
        n_prompt = n_add > 0 ? offsets[n_add] : 0;
        for (i = 0; i < n_prompt; i++) prompts[i] = (int32_t)(engine_like || rd_u8(&r) < 240 ? rd_u8(&r) % 50 : -1);
        add_tokens = exact_alloc(n_prompt, 4);
        if (n_prompt) memcpy(add_tokens, prompts, (size_t)n_prompt * 4);
        if (engine_like) {
            /* The engine's own view, ahead of the call: tokens sampled, finished gone, arrivals known. */
            for (i = 0; i < n_sampled; i++) {
                int64_t id = m.sample_ids[i];
                if (m.length[id] < MAX_KNOWN) m.tokens[id][m.length[id]++] = (int32_t)sampled[i];
            }
            for (i = 0; i < nf; i++) m.live[inputs[3 * na + i]] = 0;
            for (i = 0; i < na; i++) {
                m.live[inputs[i]] = 1;
                m.length[inputs[i]] = inputs[na + i];
                memcpy(m.tokens[inputs[i]], add_tokens + offsets[i], (size_t)inputs[na + i] * 4);
            }
        }

        changed = np_core_step(core, inputs, n_arrivals, n_finished, sampled, n_sampled, removes, n_remove,
                               add_ids, offsets, add_tokens, n_add);
        status = np_core_status(core);
        /* The scheduler's NP_PLAN_* bits and the two failure bits, or the scheduler's refusal. */
        CHECK(changed >= 0 ? (changed & ~127) == 0 : changed == NP_ERR_ARG || changed == NP_ERR_DUPLICATE);
        /* The scheduler plans with the core's own free blocks, so the allocator can always follow it
         * (NP_ERR_EXHAUSTED is "a scheduler bug"); an engine-like caller is never refused at all. */
        CHECK(changed < 0 || !(changed & NP_CORE_KV_FAILED));
        if (changed >= 0 && (changed & NP_CORE_PREPARE_FAILED))
            CHECK(status == NP_ERR_ARG || status == NP_ERR_TOKEN_RANGE || status == NP_ERR_UNKNOWN_SEQ);
        else
            CHECK(status == NP_OK);
        CHECK(!engine_like || (changed >= 0 && !(changed & NP_CORE_PREPARE_FAILED)));
        check_pool(kv, num_blocks, engine_like);
        m.num_sample_rows = 0;
        if (changed >= 0 && !(changed & (NP_CORE_KV_FAILED | NP_CORE_PREPARE_FAILED))) {
            /* The input covers the plan, each token in a KV slot of its own sequence's table (so no
             * two tokens of a step share a slot), with the tokens the engine knows. */
            const np_kv_alloc_result *tables = np_kv_alloc_output(kv);
            int64_t t = 0;
            CHECK(out->num_seqs == plan->n_batch && tables->rows == plan->n_batch);
            for (i = 0; i < plan->n_batch; i++) {
                const int32_t *blocks;
                int64_t length = np_kv_alloc_table(kv, plan->seq_ids[i], &blocks);
                for (k = plan->start_positions[i]; k < plan->start_positions[i] + plan->num_tokens[i]; k++, t++) {
                    int64_t slot = out->slot_mapping[t];
                    CHECK(out->positions[t] == k && k / block_size < length);
                    CHECK(slot == (int64_t)blocks[k / block_size] * block_size + k % block_size);
                    CHECK(slot >= 0 && slot < (int64_t)num_blocks * block_size && !slot_used[slot]);
                    slot_used[slot] = 1;
                    CHECK(!engine_like || out->token_ids[t] == m.tokens[plan->seq_ids[i]][k]);
                }
                tokens += plan->num_tokens[i];
                if (plan->samples[i] && plan->num_tokens[i] > 0 && m.num_sample_rows < 8)
                    m.sample_ids[m.num_sample_rows++] = plan->seq_ids[i];
            }
            CHECK(out->num_tokens == tokens && t == tokens && out->num_samples == m.num_sample_rows);
        }
        free(inputs), free(sampled), free(removes), free(add_ids), free(offsets), free(add_tokens);
    }
    np_core_destroy(core);
    CHECK(np_live_allocations() == live_before); /* destroy freed everything the three parts allocated */
    return 0;
}
