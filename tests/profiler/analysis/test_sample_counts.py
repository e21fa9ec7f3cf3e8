"""The one pooling of threads' sample counts (profiler.analysis.sample_counts) that breakdown and foreign use."""

from __future__ import annotations

from infer_prof.profiler.analysis.breakdown import samples_split
from infer_prof.profiler.analysis.roles import ThreadSplit
from infer_prof.profiler.analysis.sample_counts import (
    TABLES,
    TOTALS,
    from_thread_counts,
    pool_counts,
    sum_counts,
)

# Two threads as profiler.collectors.sampling.summarize_stacks gives them (no work, waits or by_category).
ENGINE = {
    "thread_ids": [7],
    "samples": 10,
    "native_samples": 10,
    "categories": {"interpreter": 4, "kernel": 6},
    "components": {"scheduler": 4, "model_kernels": 6},
    "lock_components": {},
    "gil_components": {},
    "dispatch": 1,
}
HELPER = {
    "thread_ids": [8],
    "samples": 6,
    "native_samples": 2,
    "categories": {"interpreter": 2, "lock": 4},
    "components": {"scheduler": 2, "sampler": 4},
    "lock_components": {"sampler": 4},
    "gil_components": {"sampler": 3},
    "dispatch": 0,
}


def test_counts_add_up_name_by_name_and_a_missing_key_counts_zero() -> None:
    pooled = sum_counts([ENGINE, HELPER])
    assert pooled["samples"] == 16 and pooled["native_samples"] == 12 and pooled["dispatch"] == 1
    assert pooled["categories"] == {"interpreter": 6, "kernel": 6, "lock": 4}
    assert pooled["components"] == {"scheduler": 6, "model_kernels": 6, "sampler": 4}
    assert pooled["lock_components"] == {"sampler": 4} and pooled["gil_components"] == {"sampler": 3}
    assert pooled["work"] == 0 and pooled["waits"] == {} and pooled["by_category"] == {}
    assert set(pooled) == {*TOTALS, *TABLES}
    # The inputs are read, never written.
    assert ENGINE["categories"] == {"interpreter": 4, "kernel": 6}


def test_no_sample_pools_to_none_and_no_thread_to_zeros() -> None:
    assert pool_counts([]) is None
    assert pool_counts([{**HELPER, "samples": 0}]) is None
    assert sum_counts([])["samples"] == 0
    assert pool_counts([ENGINE]) == sum_counts([ENGINE])


def test_a_foreign_servers_threads_pool_their_work_and_waits_too() -> None:
    loop = ThreadSplit(thread_id=1, name="loop", samples=8, gil_samples=1)
    loop.categories.update({"interpreter": 5, "idle": 3})
    loop.waits.update({"idle": 3})
    loop.by_category.update({"interpreter/scheduler": 5, "idle/none": 3})
    worker = ThreadSplit(thread_id=2, name="worker", samples=4)
    worker.categories.update({"waiting": 4})
    worker.waits.update({"worker": 4})
    pooled = sum_counts([loop.counts(), worker.counts()])
    assert pooled["samples"] == 12 and pooled["gil"] == 1
    assert pooled["work"] == loop.work + worker.work == 6
    assert pooled["waits"] == {"idle": 3, "worker": 4}
    assert pooled["by_category"] == {"interpreter/scheduler": 5, "idle/none": 3}


def test_the_pool_is_what_samples_split_reads() -> None:
    split = samples_split(pool_counts([ENGINE, HELPER]))
    assert split is not None and split["samples"] == 16 and split["resolution"] == "native"
    assert split["categories"]["lock"] == 4 / 16
    assert split["lock_by_component"] == {"sampler": 4 / 16}
    assert split["gil_by_component"] == {"sampler": 3 / 16}


def test_our_samplers_counts_enter_the_pool_with_every_key_and_pool_as_they_are() -> None:
    counts = from_thread_counts(ENGINE)
    assert set(counts) == {*TOTALS, *TABLES}
    assert counts["work"] == counts["gil"] == 0 and counts["waits"] == counts["by_category"] == {}
    assert counts["samples"] == 10 and counts["categories"] == {"interpreter": 4, "kernel": 6}
    assert sum_counts([from_thread_counts(ENGINE), from_thread_counts(HELPER)]) == sum_counts(
        [ENGINE, HELPER]
    )
    # A key a result read back lacks counts 0, and the input's tables are copied, never shared.
    assert from_thread_counts({"samples": 3})["lock_components"] == {}
    counts["categories"]["kernel"] = 0
    assert ENGINE["categories"] == {"interpreter": 4, "kernel": 6}
