/* Fuzzes the sampler (sampler.c): np_sampler_create, then steps of removals, registrations and logits to draw from. */
#include <math.h>

#include "fuzz_common.h"

/* What the harness knows of each pool id: registered, its parameters, tokens drawn, and the largest
 * token id its penalties look at (the sampler refuses a vocabulary that does not hold it). */
typedef struct {
    int known[NUM_IDS];
    np_sampling_params params[NUM_IDS];
    int64_t position[NUM_IDS], max_token[NUM_IDS];
} model;

static const double TEMPERATURES[8] = {0.0, 1e-30, 0.5, 1.0, 1e30, NAN, -1.0, INFINITY};
static const double TOP_PS[8] = {1.0, 1.0, 0.9, 0.5, 1e-9, 0.0, 1.5, NAN};
static const double MIN_PS[8] = {0.0, 0.0, 0.1, 0.5, 1.0, -0.1, 2.0, NAN};
static const double REPETITIONS[8] = {1.0, 1.0, 1.0, 3.0, 0.5, 1e-30, 0.0, INFINITY};
static const double FREQUENCIES[8] = {0.0, 0.0, 0.0, 2.0, -1.0, 0.5, NAN, -INFINITY};
static const double PRESENCES[8] = {0.0, 0.0, 0.0, -2.0, 1.5, 0.25, INFINITY, NAN};
static const int64_t TOP_KS[8] = {0, 0, 1, 1, 2, 50, INT64_MAX, -1};

static int params_valid(const np_sampling_params *p) { /* SamplingParams' rules, as the C code checks them */
    return isfinite(p->temperature) && p->temperature >= 0 && p->top_p > 0 && p->top_p <= 1 && p->min_p >= 0 &&
           p->min_p <= 1 && isfinite(p->repetition_penalty) && p->repetition_penalty > 0 &&
           isfinite(p->frequency_penalty) && isfinite(p->presence_penalty) && p->top_k >= 0;
}

static int penalized(const np_sampling_params *p) {
    return p->repetition_penalty != 1.0 || p->frequency_penalty != 0.0 || p->presence_penalty != 0.0;
}

/* A row of logits: smooth random values, one repeated value (ties), or random with specials mixed in. */
static void fill_row(reader *r, float *row, int64_t vocab) {
    static const float specials[6] = {NAN, INFINITY, -INFINITY, -0.0f, 1e-45f, 3.4e38f};
    uint8_t mode = rd_u8(r), rate = rd_u8(r);
    uint64_t state = rd_u8(r) * 0x9E3779B97F4A7C15ULL + 1;
    int64_t i;
    for (i = 0; i < vocab; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        row[i] = mode < 60 ? (float)(rate % 16) - 8.0f : (float)(state % 4000) / 200.0f - 10.0f;
        if (mode >= 200 && state % 256 < rate % 32) row[i] = specials[(state >> 8) % (mode >= 250 ? 3 : 6)];
        if (mode >= 252) row[i] = -INFINITY; /* nothing to sample */
    }
}

/* np_sampler_draw_rows on the same logits (another engine's batch, temperature 1): per-row top-k and top-p
 * (NULL columns too), refused before any draw when a setting is impossible, then NaN, +inf or only -inf rows
 * refused; otherwise every token in range, top-k 1 the first largest logit, and no history kept. */
static void check_draw_rows(reader *r, np_sampler *s, const float *logits, int64_t rows, int64_t vocab) {
    static const int32_t KS[8] = {0, 0, 1, 2, 5, 50, INT32_MAX, -1};
    static const float PS[8] = {1.0f, 1.0f, 0.9f, 0.5f, 1e-9f, 0.0f, 1.5f, NAN};
    int32_t *ks = exact_alloc(rows, 4);
    float *ps = exact_alloc(rows, 4);
    int64_t *seeds = exact_alloc(rows, 8), *out = exact_alloc(rows, 8), bad = 0, expected_bad = -1, i, k;
    uint8_t columns = rd_u8(r);
    int use_k = columns & 1, use_p = columns & 2, expected = NP_OK, status;
    int64_t requests = np_sampler_num_requests(s);
    for (i = 0; i < rows; i++) {
        ks[i] = KS[rd_u8(r) % 8];
        ps[i] = PS[rd_u8(r) % 8];
        seeds[i] = (int64_t)rd_u64(r);
    }
    for (i = 0; expected == NP_OK && i < rows; i++)
        if ((use_k && ks[i] < 0) || (use_p && !(ps[i] > 0.0f && ps[i] <= 1.0f))) expected = NP_ERR_ARG, expected_bad = i;
    for (i = 0; expected == NP_OK && i < rows; i++) {
        const float *row = logits + i * vocab;
        int nan = 0, pos_inf = 0, finite_or_pos = 0;
        for (k = 0; k < vocab; k++) {
            nan |= isnan(row[k]);
            pos_inf |= row[k] == INFINITY;
            finite_or_pos |= row[k] > -INFINITY;
        }
        if (nan || pos_inf || !finite_or_pos) expected = NP_ERR_NONFINITE, expected_bad = i;
    }
    status = np_sampler_draw_rows(s, logits, rows, vocab, use_k ? ks : NULL, use_p ? ps : NULL, seeds, out, &bad);
    CHECK(status == expected && bad == expected_bad);
    for (i = 0; status == NP_OK && i < rows; i++) {
        const float *row = logits + i * vocab;
        int64_t best = 0;
        CHECK(out[i] >= 0 && out[i] < vocab);
        if (use_k && ks[i] == 1 && vocab > 1) {
            for (k = 1; k < vocab; k++)
                if (row[k] > row[best]) best = k;
            CHECK(out[i] == best);
        }
    }
    CHECK(np_sampler_num_requests(s) == requests); /* no request registered, none forgotten */
    free(ks), free(ps), free(seeds), free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size, 0};
    const int64_t live_before = np_live_allocations();
    np_sampler *s = np_sampler_create();
    int64_t steps = 0, i, k;
    static model m;
    CHECK(s != NULL);
    memset(&m, 0, sizeof m);
    while (!rd_done(&r) && steps++ < 24) {
        int64_t n_remove = rd_len(&r, 2), n_add = rd_len(&r, 3), rows = rd_len(&r, 4), vocab;
        int64_t *removes = exact_alloc(n_remove, 8), *add_ids = exact_alloc(n_add, 8), bad = 0;
        int64_t *offsets = malloc(8 * (n_add > 0 ? n_add + 1 : 1)), n_prompt, expected_bad = -1;
        np_sampling_params *params = exact_alloc(n_add, sizeof *params);
        int32_t prompts[3 * 12 + 1], *prompt_tokens;
        int64_t *seq_ids = exact_alloc(rows, 8), *out_tokens = exact_alloc(rows, 8);
        float *logits = NULL;
        int expected = NP_OK, status;
        uint8_t b = rd_u8(&r);
        vocab = b < 200 ? 1 + b : b < 248 ? 129 + (b - 200) * 6 : b & 1 ? 0 : INT32_MAX - 127;

        for (i = 0; i < n_remove; i++) removes[i] = ID_POOL[rd_id_index(&r)];
        offsets[0] = 0;
        for (i = 0; i < n_add; i++) {
            add_ids[i] = ID_POOL[rd_id_index(&r)];
            params[i].temperature = TEMPERATURES[rd_u8(&r) % 8];
            params[i].top_p = TOP_PS[rd_u8(&r) % 8];
            params[i].min_p = MIN_PS[rd_u8(&r) % 8];
            params[i].repetition_penalty = REPETITIONS[rd_u8(&r) % 8];
            params[i].frequency_penalty = FREQUENCIES[rd_u8(&r) % 8];
            params[i].presence_penalty = PRESENCES[rd_u8(&r) % 8];
            params[i].top_k = TOP_KS[rd_u8(&r) % 8];
            params[i].seed = rd_u64(&r);
            offsets[i + 1] = offsets[i] + rd_range(&r, 0, 12);
        }
        n_prompt = n_add > 0 ? offsets[n_add] : 0;
        for (i = 0; i < n_prompt; i++) {
            uint8_t t = rd_u8(&r);
            prompts[i] = t < 240 ? t % 90 : t < 248 ? INT32_MAX : -1 - t % 2; /* ids >= vocab, or < 0 */
        }
        if (n_add > 0 && rd_u8(&r) >= 245) offsets[rd_u8(&r) % (n_add + 1)] = rd_range(&r, -1, n_prompt);
        prompt_tokens = exact_alloc(n_prompt, 4);
        if (n_prompt) memcpy(prompt_tokens, prompts, (size_t)n_prompt * 4);
        for (i = 0; i < rows; i++) seq_ids[i] = ID_POOL[rd_id_index(&r)];
        if (rows > 0 && vocab >= 1 && vocab <= 411) {
            logits = malloc((size_t)(rows * vocab) * sizeof(float));
            for (i = 0; i < rows; i++) fill_row(&r, logits + i * vocab, vocab);
        }

        /* Refusals before anything changes: counts and vocabulary, then each registration's
         * parameters and offsets (NP_ERR_ARG) and prompt ids >= 0 (NP_ERR_TOKEN_RANGE). */
        if (n_remove < 0 || n_add < 0 || rows < 0 || (rows > 0 && (vocab < 1 || vocab > INT32_MAX - 128)))
            expected = NP_ERR_ARG;
        for (i = 0; expected == NP_OK && i < n_add; i++) {
            if (!params_valid(&params[i]) || offsets[i] < 0 || offsets[i + 1] < offsets[i])
                expected = NP_ERR_ARG, expected_bad = i;
            for (k = offsets[i]; expected == NP_OK && k < offsets[i + 1]; k++)
                if (prompt_tokens[k] < 0) expected = NP_ERR_TOKEN_RANGE, expected_bad = i;
        }
        if (expected == NP_OK) {
            /* Applied: removals, then registrations (a later one of an id replaces an earlier one). */
            for (i = 0; i < n_remove; i++) m.known[id_index(removes[i])] = 0;
            for (i = 0; i < n_add; i++) {
                int id = id_index(add_ids[i]);
                m.known[id] = 1;
                m.params[id] = params[i];
                m.position[id] = 0;
                m.max_token[id] = -1;
                for (k = offsets[i]; params[i].repetition_penalty != 1.0 && k < offsets[i + 1]; k++)
                    m.max_token[id] = prompt_tokens[k] > m.max_token[id] ? prompt_tokens[k] : m.max_token[id];
            }
            /* Then, row by row: an unknown id, or a penalized token outside the vocabulary; then a
             * row that cannot be sampled: NaN anywhere, or (temperature > 0) +inf or only -inf. */
            for (i = 0; expected == NP_OK && i < rows; i++) {
                int id = id_index(seq_ids[i]);
                if (!m.known[id]) expected = NP_ERR_UNKNOWN_SEQ, expected_bad = i;
                else if (m.max_token[id] >= vocab) expected = NP_ERR_TOKEN_RANGE, expected_bad = i;
            }
            for (i = 0; expected == NP_OK && i < rows; i++) {
                const float *row = logits + i * vocab;
                int nan = 0, pos_inf = 0, finite_or_pos = 0;
                for (k = 0; k < vocab; k++) {
                    nan |= isnan(row[k]);
                    pos_inf |= row[k] == INFINITY;
                    finite_or_pos |= row[k] > -INFINITY;
                }
                if (nan || (m.params[id_index(seq_ids[i])].temperature > 0 && (pos_inf || !finite_or_pos)))
                    expected = NP_ERR_NONFINITE, expected_bad = i;
            }
        }

        int64_t exact_before = np_sampler_exact_passes(s);
        status = np_sampler_step(s, removes, n_remove, add_ids, params, offsets, prompt_tokens, n_add, logits, rows,
                                 vocab, seq_ids, out_tokens, &bad);
        CHECK(status == expected && bad == expected_bad);
        /* At most one exact redo per row drawn. */
        CHECK(np_sampler_exact_passes(s) >= exact_before);
        CHECK(np_sampler_exact_passes(s) <= exact_before + (rows > 0 ? rows : 0));
        for (i = 0; status == NP_OK && i < rows; i++) {
            int id = id_index(seq_ids[i]);
            const np_sampling_params *p = &m.params[id];
            const float *row = logits + i * vocab;
            int64_t best = 0;
            CHECK(out_tokens[i] >= 0 && out_tokens[i] < vocab);
            /* Without penalties, greedy is the first largest logit, and top-k 1 the first largest
             * x / temperature (division may tie distinct floats: the lowest id wins). */
            if (!penalized(p) && (p->temperature == 0.0 || (p->top_k == 1 && vocab > 1))) {
                for (k = 1; k < vocab; k++) {
                    double x = row[k], y = row[best];
                    if (p->temperature > 0) x /= p->temperature, y /= p->temperature;
                    if (x > y) best = k;
                }
                CHECK(out_tokens[i] == best);
            }
            /* The draw is recorded: position advances, and a penalized token joins the history. */
            m.position[id]++;
            if (penalized(p) && out_tokens[i] > m.max_token[id]) m.max_token[id] = out_tokens[i];
        }
        /* A failed draw records no token anywhere; registrations stay (unless refused up front). */
        for (i = 0; i < NUM_IDS; i++) CHECK(np_sampler_position(s, ID_POOL[i]) == (m.known[i] ? m.position[i] : -1));
        {
            int64_t known = 0;
            for (i = 0; i < NUM_IDS; i++) known += m.known[i];
            CHECK(np_sampler_num_requests(s) == known);
        }
        if (logits != NULL) check_draw_rows(&r, s, logits, rows, vocab);
        free(removes), free(add_ids), free(offsets), free(params), free(prompt_tokens), free(seq_ids);
        free(out_tokens), free(logits);
    }
    np_sampler_destroy(s);
    CHECK(np_live_allocations() == live_before); /* destroy freed everything the sampler allocated */
    return 0;
}
