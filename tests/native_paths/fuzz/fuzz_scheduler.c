/* Fuzzes the scheduler (scheduler.c): np_scheduler_create, then steps of arrivals, finishes and free-block counts. */
#include "fuzz_common.h"

static volatile int64_t sink;
static const int64_t PRIORITIES[4] = {0, 1, INT64_MIN, INT64_MAX};

/* What the harness knows of each pool id from the plans it saw: registered, running, blocks held. */
typedef struct {
    int known[NUM_IDS], running[NUM_IDS];
    int64_t held[NUM_IDS];
} model;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size, 0};
    const int64_t live_before = np_live_allocations();
    int64_t block_size = rd_range(&r, 1, 8), max_seqs = rd_range(&r, 1, 6), max_tokens = rd_range(&r, 1, 64);
    int policy = rd_u8(&r) & 1;
    uint8_t hostile = rd_u8(&r);
    int64_t pool = rd_range(&r, 0, 40), last_counts[4] = {-1, -1, -1, -1}, steps = 0, i, k;
    np_scheduler *s;
    model m;
    if (hostile >= 248) {
        /* A size below 1 or an unknown policy: refused with NULL, nothing left allocated. */
        switch (hostile % 4) {
        case 0: block_size = 0; break;
        case 1: max_seqs = INT64_MIN; break;
        case 2: max_tokens = -1; break;
        default: policy = 2;
        }
        CHECK(np_scheduler_create(block_size, max_seqs, max_tokens, policy) == NULL);
        CHECK(np_live_allocations() == live_before);
        return 0;
    }
    if (hostile >= 240) *(hostile & 1 ? &block_size : &max_tokens) = (int64_t)1 << 62; /* legal, huge */
    s = np_scheduler_create(block_size, max_seqs, max_tokens, policy);
    CHECK(s != NULL);
    memset(&m, 0, sizeof m);
    while (!rd_done(&r) && steps++ < 32) {
        int64_t n_arrivals = rd_len(&r, 4), n_finished = rd_len(&r, 4);
        int64_t na = n_arrivals > 0 ? n_arrivals : 0, nf = n_finished > 0 ? n_finished : 0;
        int64_t *inputs = exact_alloc(3 * na + nf, 8), num_free = 0, expected_bad = -1;
        int64_t expected_frees[4], n_expected_frees = 0, tokens = 0;
        const np_plan *plan = np_scheduler_plan(s);
        int64_t *old_seq_ids = plan->seq_ids, old_capacity = plan->capacity, old_version = plan->version;
        int was_running[NUM_IDS], seen[NUM_IDS] = {0}, expected = NP_OK, status, bits = 0;
        int64_t running = 0, known = 0;
        __int128 released = 0, grown = 0, held_total = 0;
        uint8_t how_free = rd_u8(&r);
        for (i = 0; i < na; i++) {
            inputs[i] = ID_POOL[rd_id_index(&r)];
            inputs[na + i] = rd_count(&r, 40);
            inputs[2 * na + i] = PRIORITIES[rd_u8(&r) % 4];
        }
        for (i = 0; i < nf; i++) inputs[3 * na + i] = ID_POOL[rd_id_index(&r)];
        /* A caller with a pool of `pool` blocks tells the truth; a hostile one says anything. */
        for (i = 0; i < NUM_IDS; i++) held_total += m.held[i];
        held_total = pool - held_total;
        num_free = how_free >= 200 ? rd_count(&r, 40) : held_total < INT64_MIN ? INT64_MIN : (int64_t)held_total;
        memcpy(was_running, m.running, sizeof was_running);

        /* Expected refusals (docs/twin-spec.md and the header): negative counts or a prompt length
         * outside [0, 2^60] change nothing; a duplicate arrival keeps the finishes and the arrivals
         * before it applied. Finishing a running id frees its blocks; unknown ids are ignored. */
        if (n_arrivals < 0 || n_finished < 0) expected = NP_ERR_ARG;
        for (i = 0; expected == NP_OK && i < na; i++) {
            if (inputs[na + i] < 0 || inputs[na + i] > (int64_t)1 << 60) expected = NP_ERR_ARG, expected_bad = i;
        }
        if (expected == NP_OK) {
            for (i = 0; i < nf; i++) {
                int id = id_index(inputs[3 * na + i]);
                if (!m.known[id]) continue;
                if (m.running[id]) expected_frees[n_expected_frees++] = ID_POOL[id], released += m.held[id];
                m.known[id] = m.running[id] = 0;
                m.held[id] = 0;
            }
            for (i = 0; expected == NP_OK && i < na; i++) {
                int id = id_index(inputs[i]);
                if (m.known[id]) expected = NP_ERR_DUPLICATE, expected_bad = i;
                m.known[id] = 1;
            }
        }

        status = np_scheduler_step(s, inputs, n_arrivals, n_finished, num_free);
        CHECK(status == expected || (expected == NP_OK && status >= 0));
        CHECK(plan->bad_index == expected_bad);
        CHECK(plan->num_waiting == np_scheduler_num_waiting(s) && plan->num_running == np_scheduler_num_running(s));
        if (status < 0) {
            /* A failed step's plan is empty, and the next one reports every length as changed. */
            CHECK(plan->n_batch == 0 && plan->n_frees == 0 && plan->n_preempted == 0 && plan->n_grows == 0);
            for (k = 0; k < 4; k++) last_counts[k] = -1;
        } else {
            const int64_t counts[4] = {plan->n_batch, plan->n_frees, plan->n_preempted, plan->n_grows};
            int64_t g = 0;
            for (k = 0; k < 4; k++) {
                if (counts[k] != last_counts[k]) bits |= 1 << k;
                last_counts[k] = counts[k];
                CHECK(counts[k] >= 0 && counts[k] <= plan->capacity);
            }
            if (plan->version != old_version) bits |= NP_PLAN_MOVED;
            CHECK(status == bits); /* exactly the lengths that changed, and MOVED when arrays moved */
            CHECK(plan->first_admitted >= 0 && plan->first_admitted <= plan->n_batch);
            CHECK(plan->n_preempted == 0 || plan->first_admitted == plan->n_batch); /* no admission then */
            CHECK(plan->n_frees == n_expected_frees + plan->n_preempted);
            for (i = 0; i < n_expected_frees; i++) CHECK(plan->frees[i] == expected_frees[i]);
            for (i = 0; i < plan->n_preempted; i++) {
                /* A victim was running before this step and held what the model says. */
                int id = id_index(plan->preempted[i]);
                CHECK(plan->frees[n_expected_frees + i] == plan->preempted[i]);
                CHECK(id >= 0 && was_running[id] && m.running[id]);
                released += m.held[id];
                m.running[id] = 0;
                m.held[id] = 0;
            }
            for (i = 0; i < plan->n_batch; i++) {
                /* Running-phase entries were running; the rest were admitted from waiting. Each id once. */
                int id = id_index(plan->seq_ids[i]);
                CHECK(id >= 0 && m.known[id] && !seen[id] && m.running[id] == (i < plan->first_admitted));
                seen[id] = 1;
                m.running[id] = 1;
                CHECK(plan->num_tokens[i] >= (i < plan->first_admitted ? 1 : 0) && plan->samples[i] <= 1);
                CHECK(plan->start_positions[i] >= 0);
                tokens += plan->num_tokens[i];
                if (g < plan->n_grows && plan->grow_seq_ids[g] == plan->seq_ids[i]) {
                    /* Grows follow batch order, only for need > 0. */
                    CHECK(plan->grow_num_blocks[g] > 0);
                    m.held[id] += plan->grow_num_blocks[g];
                    grown += plan->grow_num_blocks[g++];
                }
            }
            CHECK(g == plan->n_grows);
            /* The budgets: seats, tokens, and never more blocks than the caller said were free plus
             * those this step's frees released. */
            CHECK(plan->num_running <= max_seqs && tokens <= max_tokens);
            CHECK(plan->prefill_tokens + plan->decode_tokens == tokens && plan->decode_tokens <= plan->n_batch);
            CHECK(grown == 0 || grown <= num_free + released);
            CHECK(plan->num_cached_tokens >= 0);
        }
        for (i = 0; i < NUM_IDS; i++) running += m.running[i], known += m.known[i];
        CHECK(plan->num_running == running && plan->num_waiting == known - running);
        /* Arrays that moved were retired, not freed: a view Python holds stays readable (ASan). */
        if (old_seq_ids && old_capacity > 0) sink = old_seq_ids[old_capacity - 1];
        free(inputs);
    }
    np_scheduler_destroy(s);
    CHECK(np_live_allocations() == live_before); /* destroy freed everything the scheduler allocated */
    return 0;
}
