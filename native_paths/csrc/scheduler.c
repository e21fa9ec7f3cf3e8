/* The C twin of engine/scheduler.py: the same StepPlan, step by step, from counters in C arrays.
 *
 * Sequences live in slots (reused after they finish). `running` is an array of slots in the order
 * they entered running; `waiting` is a binary min-heap of slots with their positions indexed, keyed
 * FCFS by a double-ended counter (tail arrivals count up, preempted sequences pushed to the head
 * count down) and by (priority, arrival) under the priority policy: one structure for both orders.
 * Each policy is an entry of POLICIES (its waiting key and its victim), the twin of engine/request_queue.py's
 * classes: the scheduler's step names no policy.
 * The plan's arrays are written in place (np_plan), and the return value says which of their
 * lengths changed, so that a steady step costs Python no new view.
 */
#include "native_paths.h"

#include <string.h>

typedef struct {
    int64_t seq_id;
    int64_t priority;
    int64_t arrival; /* admission counter: FCFS order and the priority tie-break */
    int64_t total;   /* prompt tokens + tokens generated so far */
    int64_t prompt;  /* a one-token chunk past the prompt is a decode */
    int64_t computed;
    int64_t held;
    int64_t order_major; /* waiting-heap key */
    int64_t order_minor;
    int32_t heap_at; /* index in the waiting heap, -1 when running */
    int32_t running;
} seq_state;

typedef struct np_policy np_policy;

struct np_scheduler {
    int64_t block_size;
    int block_shift; /* log2(block_size) when it is a power of two (a shift beats a division), else -1 */
    int64_t max_batch;
    int64_t max_batched_tokens;
    const np_policy *policy;
    int64_t next_arrival;
    int64_t fcfs_head; /* next key for a push at the head (counts down) */
    int64_t fcfs_tail; /* next key for a push at the tail (counts up) */
    np_idmap slots;
    seq_state *seqs;
    int64_t seqs_capacity, seqs_used;
    int32_t *spare;
    int64_t spare_capacity, num_spare;
    int32_t *running;
    int64_t running_capacity, num_running;
    int32_t *heap;
    int64_t heap_capacity, num_waiting;
    int64_t cached; /* sum of `computed` over running sequences */
    int32_t *scheduled; /* the batch's slots */
    int64_t scheduled_capacity;
    np_plan plan; /* the step's decisions, rewritten in place */
    np_retired *retired;
    int64_t last_counts[4]; /* the previous plan's n_batch, n_frees, n_preempted, n_grows (-1: unknown) */
};

/* ---- The policies ---- */

/* Where a sequence waits (its waiting-heap key; at_head: preempted this step) and which running sequence
 * gives way when blocks run out: `running[index]` or a later one, none already scheduled this step. */
struct np_policy {
    void (*wait_key)(np_scheduler *s, seq_state *q, int at_head);
    int64_t (*pick_victim)(const np_scheduler *s, int64_t index);
};

/* FCFS: arrivals at the tail, a preempted sequence back at the head; the newest running one gives way. */
static void fcfs_key(np_scheduler *s, seq_state *q, int at_head) {
    q->order_major = 0;
    q->order_minor = at_head ? s->fcfs_head-- : s->fcfs_tail++;
}

static int64_t fcfs_victim(const np_scheduler *s, int64_t index) {
    (void)index;
    return s->num_running - 1;
}

/* Priority: by (priority, arrival) wherever a sequence came from; the largest (priority, arrival) among
 * running[index:] gives way, so that nothing already scheduled this step is taken back (as in Python). */
static void priority_key(np_scheduler *s, seq_state *q, int at_head) {
    (void)s;
    (void)at_head;
    q->order_major = q->priority;
    q->order_minor = q->arrival;
}

static int64_t priority_victim(const np_scheduler *s, int64_t index) {
    int64_t best = s->num_running - 1, at;
    for (at = index; at < s->num_running; at++) {
        const seq_state *q = &s->seqs[s->running[at]], *b = &s->seqs[s->running[best]];
        if (q->priority > b->priority || (q->priority == b->priority && q->arrival > b->arrival)) best = at;
    }
    return best;
}

/* Indexed by NP_POLICY_* (native_paths/scheduler.py's POLICIES names them). */
static const np_policy POLICIES[] = {
    [NP_POLICY_FCFS] = {fcfs_key, fcfs_victim},
    [NP_POLICY_PRIORITY] = {priority_key, priority_victim},
};

np_scheduler *np_scheduler_create(int64_t block_size, int64_t max_batch, int64_t max_batched_tokens, int policy) {
    np_scheduler *s;
    if (block_size < 1 || max_batch < 1 || max_batched_tokens < 1) return NULL;
    if (policy < 0 || policy >= (int)(sizeof POLICIES / sizeof POLICIES[0])) return NULL;
    s = np_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->block_size = block_size;
    s->block_shift = -1;
    if ((block_size & (block_size - 1)) == 0) {
        for (s->block_shift = 0; ((int64_t)1 << s->block_shift) < block_size; s->block_shift++) {
        }
    }
    s->max_batch = max_batch;
    s->max_batched_tokens = max_batched_tokens;
    s->policy = &POLICIES[policy];
    s->fcfs_head = -1;
    s->plan.bad_index = -1;
    memset(s->last_counts, 0xff, sizeof s->last_counts);
    return s;
}

void np_scheduler_destroy(np_scheduler *s) {
    if (!s) return;
    np_idmap_release(&s->slots);
    np_free(s->seqs);
    np_free(s->spare);
    np_free(s->running);
    np_free(s->heap);
    np_free(s->scheduled);
    np_free(s->plan.seq_ids);
    np_free(s->plan.num_tokens);
    np_free(s->plan.start_positions);
    np_free(s->plan.samples);
    np_free(s->plan.frees);
    np_free(s->plan.preempted);
    np_free(s->plan.grow_seq_ids);
    np_free(s->plan.grow_num_blocks);
    np_retired_release(&s->retired);
    np_free(s);
}

int64_t np_scheduler_num_waiting(const np_scheduler *s) { return s->num_waiting; }

int64_t np_scheduler_num_running(const np_scheduler *s) { return s->num_running; }

/* ---- The waiting heap ---- */

static int heap_before(const np_scheduler *s, int32_t a, int32_t b) {
    const seq_state *x = &s->seqs[a], *y = &s->seqs[b];
    return x->order_major < y->order_major || (x->order_major == y->order_major && x->order_minor < y->order_minor);
}

static void heap_place(np_scheduler *s, int64_t at, int32_t slot) {
    s->heap[at] = slot;
    s->seqs[slot].heap_at = (int32_t)at;
}

static void heap_up(np_scheduler *s, int64_t at) {
    int32_t slot = s->heap[at];
    while (at > 0) {
        int64_t parent = (at - 1) / 2;
        if (!heap_before(s, slot, s->heap[parent])) break;
        heap_place(s, at, s->heap[parent]);
        at = parent;
    }
    heap_place(s, at, slot);
}

static void heap_down(np_scheduler *s, int64_t at) {
    int32_t slot = s->heap[at];
    for (;;) {
        int64_t child = 2 * at + 1;
        if (child >= s->num_waiting) break;
        if (child + 1 < s->num_waiting && heap_before(s, s->heap[child + 1], s->heap[child])) child++;
        if (!heap_before(s, s->heap[child], slot)) break;
        heap_place(s, at, s->heap[child]);
        at = child;
    }
    heap_place(s, at, slot);
}

/* Room for every sequence is reserved before a step changes anything, so pushes cannot fail. */
static void push_waiting(np_scheduler *s, int32_t slot, int at_head) {
    seq_state *q = &s->seqs[slot];
    q->running = 0;
    s->policy->wait_key(s, q, at_head);
    s->heap[s->num_waiting] = slot;
    q->heap_at = (int32_t)s->num_waiting++;
    heap_up(s, s->num_waiting - 1);
}

static void remove_waiting(np_scheduler *s, int32_t slot) {
    int64_t at = s->seqs[slot].heap_at;
    int32_t last = s->heap[--s->num_waiting];
    s->seqs[slot].heap_at = -1;
    if (at == s->num_waiting) return;
    heap_place(s, at, last);
    heap_up(s, at);
    heap_down(s, s->seqs[last].heap_at);
}

/* ---- The running array ---- */

static void remove_running_at(np_scheduler *s, int64_t at) {
    memmove(&s->running[at], &s->running[at + 1], (size_t)(s->num_running - at - 1) * sizeof(int32_t));
    s->num_running--;
}

static void remove_running(np_scheduler *s, int32_t slot) {
    int64_t at;
    for (at = 0; s->running[at] != slot; at++) {
    }
    remove_running_at(s, at);
}

/* ---- One step ---- */

static int64_t blocks_needed(const np_scheduler *s, const seq_state *q, int64_t num_tokens) {
    int64_t slots = q->computed + num_tokens + s->block_size - 1;
    return (s->block_shift >= 0 ? slots >> s->block_shift : slots / s->block_size) - q->held;
}

static void forget(np_scheduler *s, int32_t slot) {
    np_idmap_remove(&s->slots, s->seqs[slot].seq_id);
    s->spare[s->num_spare++] = slot;
}

static void admit(np_scheduler *s, int32_t slot, int64_t num_tokens, int64_t need) {
    seq_state *q = &s->seqs[slot];
    np_plan *plan = &s->plan;
    int64_t k = plan->n_batch++;
    q->held += need;
    s->scheduled[k] = slot;
    plan->seq_ids[k] = q->seq_id;
    plan->num_tokens[k] = num_tokens;
    plan->start_positions[k] = q->computed;
    if (need > 0) {
        plan->grow_seq_ids[plan->n_grows] = q->seq_id;
        plan->grow_num_blocks[plan->n_grows++] = need;
    }
}

/* Grows one plan array, keeping the old one alive for views Python may still hold. */
static int reserve_plan_array(np_scheduler *s, void *array_address, int64_t capacity, int64_t needed,
                              size_t item_size) {
    int64_t have = capacity, version = 0;
    return np_reserve_stable(array_address, &have, needed, item_size, &s->retired, &version);
}

/* Reserves every array a step can fill, before the step changes anything. A plan holds at most
 * min(max_batch, sequences known) entries in each array: frees and preemptions come from running. */
static int reserve_step(np_scheduler *s, int64_t n_arrivals) {
    int64_t live = s->slots.size + n_arrivals + 1, slots = s->seqs_used + n_arrivals + 1;
    int64_t entries = live < s->max_batch ? live : s->max_batch, capacity = s->plan.capacity;
    np_plan *plan = &s->plan;
    if (np_idmap_reserve(&s->slots, n_arrivals) || np_reserve(&s->seqs, &s->seqs_capacity, slots, sizeof(seq_state)) ||
        np_reserve(&s->spare, &s->spare_capacity, slots, sizeof(int32_t)) ||
        np_reserve(&s->running, &s->running_capacity, live, sizeof(int32_t)) ||
        np_reserve(&s->heap, &s->heap_capacity, live, sizeof(int32_t)) ||
        np_reserve(&s->scheduled, &s->scheduled_capacity, entries, sizeof(int32_t)))
        return NP_ERR_NOMEM;
    if (entries <= capacity) return NP_OK;
    if (entries < 2 * capacity) entries = 2 * capacity;
    /* All eight grow to the same capacity; one that fails leaves the others bigger, which is harmless. */
    if (reserve_plan_array(s, &plan->seq_ids, capacity, entries, sizeof(int64_t)) ||
        reserve_plan_array(s, &plan->num_tokens, capacity, entries, sizeof(int64_t)) ||
        reserve_plan_array(s, &plan->start_positions, capacity, entries, sizeof(int64_t)) ||
        reserve_plan_array(s, &plan->samples, capacity, entries, sizeof(uint8_t)) ||
        reserve_plan_array(s, &plan->frees, capacity, entries, sizeof(int64_t)) ||
        reserve_plan_array(s, &plan->preempted, capacity, entries, sizeof(int64_t)) ||
        reserve_plan_array(s, &plan->grow_seq_ids, capacity, entries, sizeof(int64_t)) ||
        reserve_plan_array(s, &plan->grow_num_blocks, capacity, entries, sizeof(int64_t))) {
        plan->version++; /* some arrays may have moved */
        return NP_ERR_NOMEM;
    }
    plan->capacity = entries;
    plan->version++;
    return NP_OK;
}

/* Fills the plan's counts and says which of the array lengths changed since the last step. */
static int finish_plan(np_scheduler *s, int64_t version_before) {
    np_plan *plan = &s->plan;
    int64_t counts[4];
    int changed = 0, k;
    counts[0] = plan->n_batch, counts[1] = plan->n_frees, counts[2] = plan->n_preempted, counts[3] = plan->n_grows;
    for (k = 0; k < 4; k++) {
        if (counts[k] != s->last_counts[k]) changed |= 1 << k;
        s->last_counts[k] = counts[k];
    }
    if (plan->version != version_before) changed |= NP_PLAN_MOVED;
    plan->num_waiting = s->num_waiting;
    plan->num_running = s->num_running;
    plan->num_cached_tokens = s->cached;
    return changed;
}

/* A failed step: the plan is empty, and the next one reports everything as changed. */
static int fail_plan(np_scheduler *s, int status) {
    np_plan *plan = &s->plan;
    plan->n_batch = plan->n_frees = plan->n_preempted = plan->n_grows = 0;
    plan->first_admitted = plan->prefill_tokens = plan->decode_tokens = 0;
    plan->num_waiting = s->num_waiting;
    plan->num_running = s->num_running;
    plan->num_cached_tokens = s->cached;
    memset(s->last_counts, 0xff, sizeof s->last_counts);
    return status;
}

const np_plan *np_scheduler_plan(const np_scheduler *s) { return &s->plan; }

int np_scheduler_step(np_scheduler *s, const int64_t *inputs, int64_t n_arrivals, int64_t n_finished,
                      int64_t num_free_blocks) {
    np_plan *plan = &s->plan;
    const int64_t *arrival_ids = NULL, *arrival_prompt_tokens = NULL, *arrival_priorities = NULL, *finished = NULL;
    int64_t free = num_free_blocks, budget = s->max_batched_tokens, index, i, version_before = plan->version;
    int preempted = 0;
    plan->bad_index = -1;
    /* The counts are checked before any pointer is made from them: 3 * n_arrivals + n_finished must not
       overflow, and a NULL buffer is only legal when it holds nothing (no NULL + 0 either). */
    if (n_arrivals < 0 || n_finished < 0 || n_arrivals > (INT64_MAX - n_finished) / 4) return fail_plan(s, NP_ERR_ARG);
    if (n_arrivals + n_finished > 0) {
        if (inputs == NULL) return fail_plan(s, NP_ERR_ARG);
        arrival_ids = inputs;
        arrival_prompt_tokens = inputs + n_arrivals;
        arrival_priorities = inputs + 2 * n_arrivals;
        finished = inputs + 3 * n_arrivals;
    }
    for (i = 0; i < n_arrivals; i++) {
        /* Keeps every count far from int64 overflow; the adapter says the same in its own words. */
        if (arrival_prompt_tokens[i] < 0 || arrival_prompt_tokens[i] > ((int64_t)1 << 60)) {
            plan->bad_index = i;
            return fail_plan(s, NP_ERR_ARG);
        }
    }
    if (reserve_step(s, n_arrivals) != NP_OK) return fail_plan(s, NP_ERR_NOMEM);
    plan->n_batch = plan->n_frees = plan->n_preempted = plan->n_grows = 0;

    for (i = 0; i < n_finished; i++) {
        int32_t slot = np_idmap_get(&s->slots, finished[i]);
        if (slot < 0) continue; /* unknown ids are ignored */
        if (s->seqs[slot].running) {
            remove_running(s, slot);
            plan->frees[plan->n_frees++] = finished[i];
            /* Saturating: the caller's free count may be anything up to INT64_MAX (Python's is unbounded). */
            free = free > INT64_MAX - s->seqs[slot].held ? INT64_MAX : free + s->seqs[slot].held;
            s->cached -= s->seqs[slot].computed;
        } else {
            remove_waiting(s, slot);
        }
        forget(s, slot);
    }
    for (i = 0; i < n_arrivals; i++) {
        int32_t slot;
        seq_state *q;
        if (np_idmap_get(&s->slots, arrival_ids[i]) >= 0) {
            /* As in Python: the finished and earlier arrivals stay applied. */
            plan->bad_index = i;
            return fail_plan(s, NP_ERR_DUPLICATE);
        }
        slot = s->num_spare > 0 ? s->spare[--s->num_spare] : (int32_t)s->seqs_used++;
        np_idmap_put(&s->slots, arrival_ids[i], slot); /* room reserved above */
        q = &s->seqs[slot];
        memset(q, 0, sizeof *q);
        q->seq_id = arrival_ids[i];
        q->priority = arrival_priorities[i];
        q->arrival = s->next_arrival++;
        q->total = q->prompt = arrival_prompt_tokens[i];
        push_waiting(s, slot, 0);
    }

    /* Running phase: oldest to newest, preempting the newest (or worst priority) when blocks run out. */
    for (index = 0; index < s->num_running; index++) {
        int32_t slot = s->running[index];
        seq_state *q = &s->seqs[slot];
        int64_t num_tokens = q->total - q->computed < budget ? q->total - q->computed : budget;
        int64_t need;
        if (num_tokens == 0) break;
        need = blocks_needed(s, q, num_tokens);
        while (need > free) {
            int64_t at = s->policy->pick_victim(s, index);
            int32_t victim = s->running[at];
            seq_state *v = &s->seqs[victim];
            remove_running_at(s, at);
            free += v->held;
            s->cached -= v->computed;
            v->held = v->computed = 0;
            plan->frees[plan->n_frees++] = v->seq_id;
            plan->preempted[plan->n_preempted++] = v->seq_id;
            push_waiting(s, victim, 1);
            preempted = 1;
            if (victim == slot) break;
        }
        if (!q->running) break;
        free -= need;
        admit(s, slot, num_tokens, need);
        budget -= num_tokens;
    }
    plan->first_admitted = plan->n_batch;

    /* Waiting phase, only when nothing was preempted: admit from the head while it fits. */
    while (!preempted && s->num_running < s->max_batch && budget > 0 && s->num_waiting > 0) {
        int32_t slot = s->heap[0];
        seq_state *q = &s->seqs[slot];
        int64_t num_tokens = q->total - q->computed < budget ? q->total - q->computed : budget;
        int64_t need = blocks_needed(s, q, num_tokens);
        if (need > free) break; /* head-of-line: nothing behind it is admitted */
        remove_waiting(s, slot);
        q->running = 1;
        s->running[s->num_running++] = slot;
        free -= need;
        admit(s, slot, num_tokens, need);
        budget -= num_tokens;
    }

    plan->prefill_tokens = plan->decode_tokens = 0;
    for (i = 0; i < plan->n_batch; i++) {
        seq_state *q = &s->seqs[s->scheduled[i]];
        int64_t start = plan->start_positions[i], n = plan->num_tokens[i];
        uint8_t sample = start + n == q->total;
        plan->samples[i] = sample;
        if (n == 1 && start >= q->prompt) {
            plan->decode_tokens++;
        } else {
            plan->prefill_tokens += n;
        }
        q->computed += n;
        s->cached += n;
        if (sample) q->total += 1;
    }
    return finish_plan(s, version_before);
}
