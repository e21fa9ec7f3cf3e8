/* The fused core: one call per engine step runs input preparation's pending work, the scheduler, the
 * KV allocator over its plan and input preparation over plan and tables ("Python says: do the step").
 *
 * The three parts are the very objects of scheduler.c, kv_alloc.c and prepare.c, so the core makes
 * the same decisions as the separate twins; only the crossings from Python are fewer.
 */
#include "native_paths.h"

struct np_core {
    np_scheduler *scheduler;
    np_kv_alloc *kv;
    np_prepare *prepare;
    int status; /* why the allocator or preparation failed in the last step */
};

np_core *np_core_create(int32_t num_blocks, int32_t block_size, int64_t max_batch, int64_t max_batched_tokens,
                        int policy) {
    np_core *core = np_calloc(1, sizeof *core);
    if (!core) return NULL;
    core->scheduler = np_scheduler_create(block_size, max_batch, max_batched_tokens, policy);
    core->kv = np_kv_alloc_create(num_blocks, block_size);
    core->prepare = np_prepare_create(block_size);
    if (!core->scheduler || !core->kv || !core->prepare) {
        np_core_destroy(core);
        return NULL;
    }
    return core;
}

void np_core_destroy(np_core *core) {
    if (!core) return;
    np_scheduler_destroy(core->scheduler);
    np_kv_alloc_destroy(core->kv);
    np_prepare_destroy(core->prepare);
    np_free(core);
}

np_scheduler *np_core_scheduler(np_core *core) { return core->scheduler; }

np_kv_alloc *np_core_kv_alloc(np_core *core) { return core->kv; }

np_prepare *np_core_prepare(np_core *core) { return core->prepare; }

int np_core_status(const np_core *core) { return core->status; }

/* A failure of the allocator or of preparation does not undo the plan: as with separate twins, the
 * step's plan stands and the engine hears of the failure when it asks for the tables or the input. */
int np_core_step(np_core *core, const int64_t *inputs, int64_t n_arrivals, int64_t n_finished,
                 const int64_t *sampled, int64_t n_sampled, const int64_t *remove_ids, int64_t n_remove,
                 const int64_t *add_ids, const int64_t *add_offsets, const int32_t *add_tokens, int64_t n_add) {
    const np_plan *plan = np_scheduler_plan(core->scheduler);
    const np_kv_alloc_result *tables = np_kv_alloc_output(core->kv);
    int applied, status, changed;
    core->status = NP_OK;
    applied = np_prepare_apply(core->prepare, sampled, n_sampled, remove_ids, n_remove, add_ids, add_offsets,
                               add_tokens, n_add);
    changed = np_scheduler_step(core->scheduler, inputs, n_arrivals, n_finished, np_kv_alloc_num_free(core->kv));
    if (changed < 0) return changed;
    status = np_kv_alloc_step(core->kv, plan->frees, plan->n_frees, plan->grow_seq_ids, plan->grow_num_blocks,
                              plan->n_grows, plan->seq_ids, plan->n_batch);
    if (status) {
        core->status = status;
        return changed | NP_CORE_KV_FAILED;
    }
    if (applied) {
        core->status = applied;
        return changed | NP_CORE_PREPARE_FAILED;
    }
    /* An empty batch computes nothing: the engine asks no input of it (and the table buffer may not exist yet). */
    status = plan->n_batch == 0 ? np_prepare_build(core->prepare, NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0)
                                : np_prepare_build(core->prepare, plan->seq_ids, plan->num_tokens,
                                                   plan->start_positions, plan->samples, plan->n_batch,
                                                   tables->tables, tables->rows, tables->width, tables->stride);
    if (status) {
        core->status = status;
        return changed | NP_CORE_PREPARE_FAILED;
    }
    return changed;
}
