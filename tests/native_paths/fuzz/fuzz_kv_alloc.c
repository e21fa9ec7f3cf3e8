/* Fuzzes the KV block allocator (kv_alloc.c): np_kv_alloc_create, then steps of frees, grows and batches. */
#include "fuzz_common.h"

#define MAX_BLOCKS 48

/* The spec's pool (docs/twin-spec.md), kept beside the C one: a FIFO free list (pop the head, free
 * to the tail, a sequence's blocks freed last-allocated first) and a table per pool id. */
typedef struct {
    int32_t ring[MAX_BLOCKS];
    int64_t head, count;
    int32_t table[NUM_IDS][MAX_BLOCKS];
    int64_t length[NUM_IDS];
    int exists[NUM_IDS];
} model;

static void model_free(model *m, int num_blocks, int id) {
    while (m->length[id] > 0) m->ring[(m->head + m->count++) % num_blocks] = m->table[id][--m->length[id]];
    m->exists[id] = 0;
}

/* The whole C state against the model: every table and the free list, block for block. */
static void check_pool(const np_kv_alloc *kv, const model *m, int32_t num_blocks) {
    int32_t free_list[MAX_BLOCKS];
    int64_t i, k, sequences = 0;
    CHECK(np_kv_alloc_num_free(kv) == m->count);
    CHECK(np_kv_alloc_free_list(kv, NULL, 0) == m->count); /* capacity 0: counts, writes nothing */
    CHECK(np_kv_alloc_free_list(kv, free_list, num_blocks) == m->count);
    for (i = 0; i < m->count; i++) {
        CHECK(free_list[i] == m->ring[(m->head + i) % num_blocks]);
        CHECK(np_kv_alloc_ref_count(kv, free_list[i]) == 0);
    }
    for (i = 0; i < NUM_IDS; i++) {
        const int32_t *blocks;
        CHECK(np_kv_alloc_table(kv, ID_POOL[i], &blocks) == m->length[i]);
        for (k = 0; k < m->length[i]; k++) {
            CHECK(blocks[k] == m->table[i][k]);
            CHECK(np_kv_alloc_ref_count(kv, blocks[k]) == 1); /* a block has one owner */
        }
        sequences += m->exists[i];
    }
    CHECK(np_kv_alloc_num_sequences(kv) == sequences);
    CHECK(np_kv_alloc_ref_count(kv, -1) == -1 && np_kv_alloc_ref_count(kv, num_blocks) == -1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size, 0};
    const int64_t live_before = np_live_allocations();
    int32_t num_blocks = (int32_t)rd_range(&r, 1, MAX_BLOCKS), block_size = (int32_t)rd_range(&r, 1, 16);
    uint8_t hostile = rd_u8(&r);
    static model m;
    np_kv_alloc *kv;
    int64_t i, steps = 0;
    if (hostile >= 248) {
        /* Out-of-range sizes: refused with NULL, nothing left allocated. */
        static const int32_t bad_blocks[] = {0, -1, INT32_MIN, INT32_MAX, INT32_MAX - 1};
        if (hostile & 1) num_blocks = bad_blocks[hostile % 5]; else block_size = hostile & 2 ? 0 : INT32_MIN;
        CHECK(np_kv_alloc_create(num_blocks, block_size) == NULL);
        CHECK(np_live_allocations() == live_before);
        return 0;
    }
    kv = np_kv_alloc_create(num_blocks, block_size);
    CHECK(kv != NULL);
    memset(&m, 0, sizeof m);
    for (i = 0; i < num_blocks; i++) m.ring[i] = (int32_t)i; /* initially 0, 1, ..., N-1 */
    m.count = num_blocks;
    while (!rd_done(&r) && steps++ < 32) {
        int64_t n_frees = rd_len(&r, 4), n_grows = rd_len(&r, 4), n_batch = rd_len(&r, 5);
        int64_t *frees = exact_alloc(n_frees, 8), *grow_ids = exact_alloc(n_grows, 8);
        int64_t *grow_counts = exact_alloc(n_grows, 8), *batch = exact_alloc(n_batch, 8);
        const np_kv_alloc_result *out = np_kv_alloc_output(kv);
        const int32_t *old_tables = out->tables;
        int64_t old_cells = out->capacity_rows * out->stride, old_version = out->version;
        int64_t expected_bad = -1, width = 0, k;
        __int128 wanted = 0;
        int expected, status;
        for (i = 0; i < n_frees; i++) frees[i] = ID_POOL[rd_id_index(&r)];
        for (i = 0; i < n_grows; i++) {
            grow_ids[i] = ID_POOL[rd_id_index(&r)];
            grow_counts[i] = rd_count(&r, 4);
        }
        for (i = 0; i < n_batch; i++) batch[i] = ID_POOL[rd_id_index(&r)];

        /* The expected outcome, from the spec: a negative count refuses the step before anything
         * changes; else the frees apply, then the grows all or nothing ("exhausted"). */
        expected = n_frees < 0 || n_grows < 0 || n_batch < 0 ? NP_ERR_ARG : NP_OK;
        for (i = 0; expected == NP_OK && i < n_grows; i++) {
            if (grow_counts[i] < 0) expected = NP_ERR_ARG, expected_bad = i;
        }
        if (expected == NP_OK) {
            for (i = 0; i < n_frees; i++) model_free(&m, num_blocks, id_index(frees[i]));
            for (i = 0; i < n_grows; i++) wanted += grow_counts[i];
            if (wanted > m.count) expected = NP_ERR_EXHAUSTED;
        }
        if (expected == NP_OK) {
            for (i = 0; i < n_grows; i++) {
                int id = id_index(grow_ids[i]);
                for (k = 0; k < grow_counts[i]; k++, m.count--) {
                    m.table[id][m.length[id]++] = m.ring[m.head];
                    m.head = (m.head + 1) % num_blocks;
                }
                m.exists[id] = 1; /* a grow of 0 blocks makes an empty table too */
            }
        }

        status = np_kv_alloc_step(kv, frees, n_frees, grow_ids, grow_counts, n_grows, batch, n_batch);
        CHECK(status == expected);
        CHECK(out->bad_index == expected_bad);
        CHECK(out->num_free == m.count);
        check_pool(kv, &m, num_blocks);
        if (status == NP_OK) {
            /* The output: one row per batch id, its table then -1 up to the stride (rows of unknown
             * ids are all -1), however much of it the incremental write left from earlier steps. */
            for (i = 0; i < n_batch; i++) {
                int id = id_index(batch[i]);
                width = m.length[id] > width ? m.length[id] : width;
            }
            CHECK(out->rows == n_batch && out->width == width);
            CHECK(n_batch == 0 || (out->stride >= width && out->capacity_rows >= n_batch && out->tables));
            for (i = 0; i < n_batch; i++) {
                int id = id_index(batch[i]);
                const int32_t *row = out->tables + i * out->stride;
                for (k = 0; k < out->stride; k++) CHECK(row[k] == (k < m.length[id] ? m.table[id][k] : -1));
            }
        }
        /* An output that moved was retired, not freed (Python may hold a view): still readable. */
        CHECK((out->tables != old_tables) == (out->version != old_version) || old_tables == NULL);
        if (old_tables && old_cells > 0) CHECK(old_tables[0] >= -1 && old_tables[old_cells - 1] >= -1);
        free(frees), free(grow_ids), free(grow_counts), free(batch);
    }
    np_kv_alloc_destroy(kv);
    CHECK(np_live_allocations() == live_before); /* destroy freed every block the pool allocated */
    return 0;
}
