/* The C twin of engine/kv_alloc.py: the same free list, the same block ids, one call per step. */
#include "native_paths.h"

#include <stdlib.h>
#include <string.h>

/* ---- Shared helpers: counted allocation and the id map (declared in native_paths.h) ---- */

/* Counted so that tests can prove every object frees all it allocated; atomic because cffi calls
 * run without the GIL and two components may be used from two threads. */
static int64_t live_allocations = 0;

static void count_allocation(int64_t delta) {
#if defined(__GNUC__)
    __atomic_add_fetch(&live_allocations, delta, __ATOMIC_RELAXED);
#else
    live_allocations += delta;
#endif
}

int64_t np_live_allocations(void) {
#if defined(__GNUC__)
    return __atomic_load_n(&live_allocations, __ATOMIC_RELAXED);
#else
    return live_allocations;
#endif
}

void *np_malloc(size_t size) {
    void *pointer = malloc(size ? size : 1);
    if (pointer) count_allocation(1);
    return pointer;
}

void *np_calloc(size_t count, size_t size) {
    void *pointer = calloc(count ? count : 1, size ? size : 1);
    if (pointer) count_allocation(1);
    return pointer;
}

void np_free(void *pointer) {
    if (pointer) {
        free(pointer);
        count_allocation(-1);
    }
}

/* The capacity to grow to for `needed` items (doubling from 16), or 0 when it cannot be allocated. */
static int64_t grown_capacity(int64_t capacity, int64_t needed, size_t item_size) {
    int64_t grown = capacity > 0 ? capacity : 16;
    while (grown < needed) {
        if (grown > INT64_MAX / 2) return 0;
        grown *= 2;
    }
    return (uint64_t)grown > SIZE_MAX / item_size ? 0 : grown;
}

int np_reserve(void *array_address, int64_t *capacity, int64_t needed, size_t item_size) {
    /* The array pointer is read and written through memcpy so that any T ** can be passed. */
    void *array, *bigger;
    int64_t grown;
    if (needed <= *capacity) return NP_OK;
    grown = grown_capacity(*capacity, needed, item_size);
    if (!grown) return NP_ERR_NOMEM;
    memcpy(&array, array_address, sizeof array);
    bigger = realloc(array, (size_t)grown * item_size);
    if (!bigger) return NP_ERR_NOMEM;
    if (!array) count_allocation(1);
    memcpy(array_address, &bigger, sizeof bigger);
    *capacity = grown;
    return NP_OK;
}

int np_reserve_stable(void *array_address, int64_t *capacity, int64_t needed, size_t item_size,
                      np_retired **retired, int64_t *version) {
    void *array, *bigger;
    np_retired *node;
    int64_t grown;
    if (needed <= *capacity) return NP_OK;
    grown = grown_capacity(*capacity, needed, item_size);
    if (!grown) return NP_ERR_NOMEM;
    memcpy(&array, array_address, sizeof array);
    bigger = np_malloc((size_t)grown * item_size);
    node = array ? np_malloc(sizeof *node) : NULL;
    if (!bigger || (array && !node)) {
        np_free(bigger);
        np_free(node);
        return NP_ERR_NOMEM;
    }
    if (array) {
        memcpy(bigger, array, (size_t)*capacity * item_size);
        node->pointer = array;
        node->next = *retired;
        *retired = node;
    }
    memcpy(array_address, &bigger, sizeof bigger);
    *capacity = grown;
    ++*version;
    return NP_OK;
}

void np_retired_release(np_retired **retired) {
    while (*retired) {
        np_retired *next = (*retired)->next;
        np_free((*retired)->pointer);
        np_free(*retired);
        *retired = next;
    }
}

static uint64_t mix_id(int64_t key) {
    uint64_t z = (uint64_t)key * 0x9E3779B97F4A7C15ULL;
    return z ^ (z >> 29);
}

int32_t np_idmap_get(const np_idmap *map, int64_t key) {
    uint64_t mask, at;
    if (map->capacity == 0) return -1;
    mask = (uint64_t)map->capacity - 1;
    for (at = mix_id(key) & mask;; at = (at + 1) & mask) {
        int32_t value = map->values[at];
        if (value == -1) return -1;
        if (value >= 0 && map->keys[at] == key) return value;
    }
}

/* Rebuilds the table at `capacity`, dropping tombstones. */
static int idmap_rehash(np_idmap *map, int64_t capacity) {
    int64_t *keys = np_malloc((size_t)capacity * sizeof *keys);
    int32_t *values = np_malloc((size_t)capacity * sizeof *values);
    int64_t i;
    uint64_t mask = (uint64_t)capacity - 1;
    if (!keys || !values) {
        np_free(keys);
        np_free(values);
        return NP_ERR_NOMEM;
    }
    for (i = 0; i < capacity; i++) values[i] = -1;
    for (i = 0; i < map->capacity; i++) {
        uint64_t at;
        if (map->values[i] < 0) continue;
        for (at = mix_id(map->keys[i]) & mask; values[at] != -1; at = (at + 1) & mask) {
        }
        keys[at] = map->keys[i];
        values[at] = map->values[i];
    }
    np_free(map->keys);
    np_free(map->values);
    map->keys = keys;
    map->values = values;
    map->capacity = capacity;
    map->used = map->size;
    return NP_OK;
}

int np_idmap_reserve(np_idmap *map, int64_t extra) {
    int64_t capacity;
    /* Keep at most half the slots used (tombstones included) so that probes stay short. */
    if (2 * (map->used + extra) <= map->capacity) return NP_OK;
    capacity = map->capacity ? map->capacity : 16;
    while (4 * (map->size + extra) > capacity) capacity *= 2;
    return idmap_rehash(map, capacity);
}

int np_idmap_put(np_idmap *map, int64_t key, int32_t value) {
    uint64_t mask, at;
    int64_t tombstone = -1;
    if (np_idmap_reserve(map, 1) != NP_OK) return NP_ERR_NOMEM;
    mask = (uint64_t)map->capacity - 1;
    for (at = mix_id(key) & mask;; at = (at + 1) & mask) {
        int32_t current = map->values[at];
        if (current == -1) break;
        if (current == -2) {
            if (tombstone < 0) tombstone = (int64_t)at;
        } else if (map->keys[at] == key) {
            map->values[at] = value;
            return NP_OK;
        }
    }
    if (tombstone >= 0) {
        at = (uint64_t)tombstone;
    } else {
        map->used++;
    }
    map->keys[at] = key;
    map->values[at] = value;
    map->size++;
    return NP_OK;
}

void np_idmap_remove(np_idmap *map, int64_t key) {
    uint64_t mask, at;
    if (map->capacity == 0) return;
    mask = (uint64_t)map->capacity - 1;
    for (at = mix_id(key) & mask;; at = (at + 1) & mask) {
        int32_t value = map->values[at];
        if (value == -1) return;
        if (value >= 0 && map->keys[at] == key) {
            map->values[at] = -2;
            map->size--;
            return;
        }
    }
}

void np_idmap_release(np_idmap *map) {
    np_free(map->keys);
    np_free(map->values);
    memset(map, 0, sizeof *map);
}

/* ---- The block pool ---- */

typedef struct {
    int32_t *blocks;
    int64_t length;
    int64_t capacity;
    int64_t pending; /* blocks this step will append (a sequence may grow twice in one step) */
    int64_t epoch;   /* changes whenever blocks leave the table (or it starts over for a new sequence) */
} block_table;

struct np_kv_alloc {
    int32_t num_blocks;
    int32_t block_size;
    int32_t head; /* sentinel ids: num_blocks and num_blocks + 1 */
    int32_t tail;
    int32_t *next;
    int32_t *prev;
    int32_t *ref_count;
    int64_t num_free;
    np_idmap seq_slots; /* seq id -> index into tables */
    block_table *tables;
    int64_t tables_capacity;
    int64_t tables_used;    /* slots ever handed out */
    int32_t *spare_slots;   /* freed slots, reused before new ones (their buffers are kept) */
    int64_t spare_capacity;
    int64_t num_spare;
    int64_t epochs;         /* the last table epoch handed out */
    int64_t membership;     /* changes when a table is made or freed: cached batch slots go stale */
    np_kv_alloc_result result;
    int64_t out_cells;      /* capacity of result.tables, in int32 */
    np_retired *retired;
    /* What each output row holds: the table slot and epoch it copies and how many blocks of it. */
    int32_t *row_slot;
    int64_t *row_epoch;
    int64_t *row_length;
    int64_t row_capacity, row_epoch_capacity, row_length_capacity;
    int32_t *slot_scratch;  /* the batch's table slots, found once per step */
    int64_t slot_scratch_capacity;
    int64_t *last_batch;    /* the last step's batch ids and membership: the same batch reuses slot_scratch */
    int64_t last_batch_capacity, last_batch_size, last_membership;
};

np_kv_alloc *np_kv_alloc_create(int32_t num_blocks, int32_t block_size) {
    np_kv_alloc *kv;
    int32_t i;
    if (num_blocks < 1 || num_blocks > INT32_MAX - 2 || block_size < 1) return NULL;
    kv = np_calloc(1, sizeof *kv);
    if (!kv) return NULL;
    kv->num_blocks = num_blocks;
    kv->block_size = block_size;
    kv->head = num_blocks;
    kv->tail = num_blocks + 1;
    kv->next = np_malloc(((size_t)num_blocks + 2) * sizeof(int32_t));
    kv->prev = np_malloc(((size_t)num_blocks + 2) * sizeof(int32_t));
    kv->ref_count = np_calloc((size_t)num_blocks, sizeof(int32_t));
    if (!kv->next || !kv->prev || !kv->ref_count) {
        np_kv_alloc_destroy(kv);
        return NULL;
    }
    /* head -> 0 -> 1 -> ... -> N-1 -> tail, as in the Python pool. */
    for (i = 0; i < num_blocks; i++) {
        kv->next[i] = i + 1 < num_blocks ? i + 1 : kv->tail;
        kv->prev[i] = i > 0 ? i - 1 : kv->head;
    }
    kv->next[kv->head] = 0;
    kv->prev[kv->head] = -1;
    kv->next[kv->tail] = -1;
    kv->prev[kv->tail] = num_blocks - 1;
    kv->num_free = num_blocks;
    kv->result.num_free = num_blocks;
    kv->result.bad_index = -1;
    kv->last_batch_size = -1;
    return kv;
}

void np_kv_alloc_destroy(np_kv_alloc *kv) {
    int64_t i;
    if (!kv) return;
    for (i = 0; i < kv->tables_used; i++) np_free(kv->tables[i].blocks);
    np_free(kv->tables);
    np_free(kv->spare_slots);
    np_free((void *)kv->result.tables);
    np_retired_release(&kv->retired);
    np_free(kv->row_slot);
    np_free(kv->row_epoch);
    np_free(kv->row_length);
    np_free(kv->slot_scratch);
    np_free(kv->last_batch);
    np_idmap_release(&kv->seq_slots);
    np_free(kv->next);
    np_free(kv->prev);
    np_free(kv->ref_count);
    np_free(kv);
}

static int32_t pop_block(np_kv_alloc *kv) {
    int32_t block = kv->next[kv->head];
    int32_t after = kv->next[block];
    kv->next[kv->head] = after;
    kv->prev[after] = kv->head;
    kv->ref_count[block] = 1;
    kv->num_free--;
    return block;
}

static void release_block(np_kv_alloc *kv, int32_t block) {
    int32_t last;
    if (kv->ref_count[block] <= 0) return; /* cannot happen: every table owns its blocks alone */
    if (--kv->ref_count[block] > 0) return;
    last = kv->prev[kv->tail];
    kv->next[last] = block;
    kv->prev[block] = last;
    kv->next[block] = kv->tail;
    kv->prev[kv->tail] = block;
    kv->num_free++;
}

static void free_sequence(np_kv_alloc *kv, int64_t seq_id) {
    int32_t slot = np_idmap_get(&kv->seq_slots, seq_id);
    block_table *table;
    int64_t i;
    if (slot < 0) return; /* unknown ids are a no-op, as in Python */
    table = &kv->tables[slot];
    for (i = table->length - 1; i >= 0; i--) release_block(kv, table->blocks[i]);
    table->length = 0;
    table->epoch = ++kv->epochs;
    kv->membership++;
    np_idmap_remove(&kv->seq_slots, seq_id);
    kv->spare_slots[kv->num_spare++] = slot; /* room reserved when the slot was made */
}

/* The slot of seq_id's table, made (empty) if the sequence is new; -1 when out of memory. */
static int32_t table_slot(np_kv_alloc *kv, int64_t seq_id) {
    int32_t slot = np_idmap_get(&kv->seq_slots, seq_id);
    int reuse = kv->num_spare > 0;
    if (slot >= 0) return slot;
    if (reuse) {
        slot = kv->spare_slots[kv->num_spare - 1];
    } else {
        if (kv->tables_used >= INT32_MAX) return -1;
        if (np_reserve(&kv->tables, &kv->tables_capacity, kv->tables_used + 1, sizeof(block_table)) ||
            np_reserve(&kv->spare_slots, &kv->spare_capacity, kv->tables_used + 1, sizeof(int32_t)))
            return -1;
        slot = (int32_t)kv->tables_used;
        memset(&kv->tables[slot], 0, sizeof(block_table));
    }
    if (np_idmap_put(&kv->seq_slots, seq_id, slot) != NP_OK) return -1;
    kv->tables[slot].epoch = ++kv->epochs;
    kv->membership++;
    if (reuse) {
        kv->num_spare--;
    } else {
        kv->tables_used++;
    }
    return slot;
}

/* Room for `rows` x `width` in the output; a new buffer (all -1, every row to be rewritten) when
 * it must grow, the old one retired. */
static int reserve_output(np_kv_alloc *kv, int64_t rows, int64_t width) {
    np_kv_alloc_result *out = &kv->result;
    int64_t stride = out->stride, capacity_rows = out->capacity_rows, cells, i;
    int32_t *buffer;
    np_retired *node;
    if (rows <= capacity_rows && width <= stride && out->tables) return NP_OK;
    if (stride < width) stride = width > 2 * stride ? width : 2 * stride;
    if (stride < 8) stride = 8;
    if (capacity_rows < rows) capacity_rows = rows > 2 * capacity_rows ? rows : 2 * capacity_rows;
    if (capacity_rows < 16) capacity_rows = 16;
    if (capacity_rows > INT64_MAX / stride || (uint64_t)(capacity_rows * stride) > SIZE_MAX / sizeof(int32_t))
        return NP_ERR_NOMEM;
    /* The row records cover every row of the buffer; they are reset below with it. */
    if (np_reserve(&kv->row_slot, &kv->row_capacity, capacity_rows, sizeof(int32_t)) ||
        np_reserve(&kv->row_epoch, &kv->row_epoch_capacity, capacity_rows, sizeof(int64_t)) ||
        np_reserve(&kv->row_length, &kv->row_length_capacity, capacity_rows, sizeof(int64_t)))
        return NP_ERR_NOMEM;
    cells = capacity_rows * stride;
    buffer = np_malloc((size_t)cells * sizeof(int32_t));
    node = out->tables ? np_malloc(sizeof *node) : NULL;
    if (!buffer || (out->tables && !node)) {
        np_free(buffer);
        np_free(node);
        return NP_ERR_NOMEM;
    }
    for (i = 0; i < cells; i++) buffer[i] = -1;
    if (out->tables) {
        node->pointer = (void *)out->tables;
        node->next = kv->retired;
        kv->retired = node;
    }
    out->tables = buffer;
    out->stride = stride;
    out->capacity_rows = capacity_rows;
    out->version++;
    kv->out_cells = cells;
    for (i = 0; i < capacity_rows; i++) {
        kv->row_slot[i] = -1;
        kv->row_epoch[i] = -1;
        kv->row_length[i] = 0;
    }
    return NP_OK;
}

/* The batch's table slots, looked up once per step; a batch equal to the last one, with no table made
 * or freed since, keeps the slots found then. */
static int find_slots(np_kv_alloc *kv, const int64_t *batch_seq_ids, int64_t n_batch) {
    int64_t i;
    if (n_batch == kv->last_batch_size && kv->membership == kv->last_membership &&
        (n_batch == 0 || !memcmp(batch_seq_ids, kv->last_batch, (size_t)n_batch * sizeof(int64_t))))
        return NP_OK;
    if (np_reserve(&kv->slot_scratch, &kv->slot_scratch_capacity, n_batch, sizeof(int32_t)) ||
        np_reserve(&kv->last_batch, &kv->last_batch_capacity, n_batch, sizeof(int64_t)))
        return NP_ERR_NOMEM;
    for (i = 0; i < n_batch; i++) kv->slot_scratch[i] = np_idmap_get(&kv->seq_slots, batch_seq_ids[i]);
    if (n_batch) memcpy(kv->last_batch, batch_seq_ids, (size_t)n_batch * sizeof(int64_t));
    kv->last_batch_size = n_batch;
    kv->last_membership = kv->membership;
    return NP_OK;
}

/* Each row gets its table, padded with -1; a row that copied the same table (slot and epoch) last
 * time gets only the blocks appended since. Cells past a row's blocks are -1 up to the stride. */
static void write_rows(np_kv_alloc *kv, int64_t n_batch) {
    np_kv_alloc_result *out = &kv->result;
    int64_t i, k;
    for (i = 0; i < n_batch; i++) {
        int32_t slot = kv->slot_scratch[i];
        int32_t *row = (int32_t *)out->tables + i * out->stride;
        const block_table *table = slot >= 0 ? &kv->tables[slot] : NULL;
        int64_t length = table ? table->length : 0, from = 0;
        if (table && kv->row_slot[i] == slot && kv->row_epoch[i] == table->epoch && kv->row_length[i] <= length)
            from = kv->row_length[i];
        /* A row rewritten whole (the batch shifted when a sequence left) is tens of blocks: memcpy's
         * vector copy; a row that only grew gets one or two blocks, where a call costs more than the copy. */
        if (length - from > 8)
            memcpy(row + from, table->blocks + from, (size_t)(length - from) * sizeof(int32_t));
        else
            for (k = from; k < length; k++) row[k] = table->blocks[k];
        for (k = length; k < kv->row_length[i]; k++) row[k] = -1;
        kv->row_slot[i] = slot;
        kv->row_epoch[i] = table ? table->epoch : -1;
        kv->row_length[i] = length;
    }
}

int np_kv_alloc_step(np_kv_alloc *kv, const int64_t *frees, int64_t n_frees, const int64_t *grow_seq_ids,
                     const int64_t *grow_num_blocks, int64_t n_grows, const int64_t *batch_seq_ids,
                     int64_t n_batch) {
    np_kv_alloc_result *result = &kv->result;
    int64_t i, total = 0, width = 0;
    result->bad_index = -1;
    result->rows = 0;
    result->width = 0;
    result->num_free = kv->num_free;
    if (n_frees < 0 || n_grows < 0 || n_batch < 0) return NP_ERR_ARG;
    /* Validate before changing anything, so that a bad plan leaves the pool as it was. */
    for (i = 0; i < n_grows; i++) {
        if (grow_num_blocks[i] < 0) {
            result->bad_index = i;
            return NP_ERR_ARG;
        }
    }
    for (i = 0; i < n_frees; i++) free_sequence(kv, frees[i]);
    for (i = 0; i < n_grows; i++) {
        /* Compared before adding, so that no sum overflows (counts are >= 0, checked above). */
        if (grow_num_blocks[i] > kv->num_free - total) {
            total = kv->num_free + 1;
            break;
        }
        total += grow_num_blocks[i];
    }
    result->num_free = kv->num_free;
    if (total > kv->num_free) return NP_ERR_EXHAUSTED; /* frees applied, no table grown: as in Python */
    /* Reserve every table's room first, so that running out of memory pops no block. */
    for (i = 0; i < n_grows; i++) {
        int32_t slot = table_slot(kv, grow_seq_ids[i]);
        block_table *table = slot >= 0 ? &kv->tables[slot] : NULL;
        if (table) table->pending += grow_num_blocks[i];
        if (!table || np_reserve(&table->blocks, &table->capacity, table->length + table->pending,
                                 sizeof(int32_t))) {
            int64_t undo;
            for (undo = 0; undo <= i; undo++) {
                slot = np_idmap_get(&kv->seq_slots, grow_seq_ids[undo]);
                if (slot >= 0) kv->tables[slot].pending = 0;
            }
            result->bad_index = i;
            return NP_ERR_NOMEM;
        }
    }
    for (i = 0; i < n_grows; i++) {
        block_table *table = &kv->tables[np_idmap_get(&kv->seq_slots, grow_seq_ids[i])];
        int64_t k;
        for (k = 0; k < grow_num_blocks[i]; k++) table->blocks[table->length++] = pop_block(kv);
        table->pending = 0;
    }
    result->num_free = kv->num_free;
    if (find_slots(kv, batch_seq_ids, n_batch)) return NP_ERR_NOMEM;
    for (i = 0; i < n_batch; i++) {
        int32_t slot = kv->slot_scratch[i];
        if (slot >= 0 && kv->tables[slot].length > width) width = kv->tables[slot].length;
    }
    if (n_batch > 0 && reserve_output(kv, n_batch, width)) return NP_ERR_NOMEM;
    write_rows(kv, n_batch);
    result->rows = n_batch;
    result->width = width;
    return NP_OK;
}

const np_kv_alloc_result *np_kv_alloc_output(const np_kv_alloc *kv) { return &kv->result; }

int64_t np_kv_alloc_table(const np_kv_alloc *kv, int64_t seq_id, const int32_t **blocks) {
    int32_t slot = np_idmap_get(&kv->seq_slots, seq_id);
    if (slot < 0) {
        *blocks = NULL;
        return 0;
    }
    *blocks = kv->tables[slot].blocks;
    return kv->tables[slot].length;
}

int64_t np_kv_alloc_free_list(const np_kv_alloc *kv, int32_t *out, int64_t capacity) {
    int64_t count = 0;
    int32_t block;
    for (block = kv->next[kv->head]; block != kv->tail; block = kv->next[block]) {
        if (count < capacity) out[count] = block;
        count++;
    }
    return count;
}

int32_t np_kv_alloc_ref_count(const np_kv_alloc *kv, int32_t block) {
    if (block < 0 || block >= kv->num_blocks) return -1;
    return kv->ref_count[block];
}

int64_t np_kv_alloc_num_free(const np_kv_alloc *kv) { return kv->num_free; }

int64_t np_kv_alloc_num_sequences(const np_kv_alloc *kv) { return kv->seq_slots.size; }
