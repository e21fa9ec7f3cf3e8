"""engine.types' plain data: a copied StepPlan carries every field and owns its arrays."""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from infer_prof.engine.types import PLAN_ARRAYS, PLAN_COUNTS, StepPlan


def _plan_unlike_the_default() -> StepPlan:
    """Every field set to a value no default has, so that a field copy() forgets shows up."""
    plan = StepPlan()
    for index, name in enumerate(PLAN_ARRAYS):
        dtype = np.bool_ if name == "samples" else np.int64
        setattr(plan, name, np.arange(1, index + 3).astype(dtype))
    for index, name in enumerate(PLAN_COUNTS):
        setattr(plan, name, 10 + index)
    return plan


def test_every_field_is_an_array_or_a_count() -> None:
    assert {field.name for field in fields(StepPlan)} == {*PLAN_ARRAYS, *PLAN_COUNTS}


def test_copy_keeps_every_field_and_owns_its_arrays() -> None:
    plan = _plan_unlike_the_default()
    copied = plan.copy()
    assert copied == plan
    assert copied.as_lists() == plan.as_lists()
    for name in PLAN_ARRAYS:
        assert not np.shares_memory(getattr(copied, name), getattr(plan, name)), name
    for name in PLAN_COUNTS:
        assert type(getattr(copied, name)) is int, name
