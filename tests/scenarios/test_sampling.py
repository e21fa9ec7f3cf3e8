"""Sampling settings: over() takes each setting from the scenario's own settings when set, else from the base."""

from __future__ import annotations

from dataclasses import fields

import pytest

from infer_prof.scenarios.sampling import SamplingSettings

# One valid value per setting, and another for the base, so that the source of each result is visible.
OWN = {
    "temperature": 0.7,
    "top_k": 40,
    "top_p": 0.9,
    "min_p": 0.05,
    "repetition_penalty": 1.1,
    "frequency_penalty": 0.2,
    "presence_penalty": 0.3,
    "ignore_eos": True,
}
BASE = {
    "temperature": 1.0,
    "top_k": 7,
    "top_p": 0.5,
    "min_p": 0.1,
    "repetition_penalty": 1.3,
    "frequency_penalty": -0.4,
    "presence_penalty": 1.5,
    "ignore_eos": False,
}


def test_the_tables_name_every_setting() -> None:
    assert set(OWN) == set(BASE) == {field.name for field in fields(SamplingSettings)}


@pytest.mark.parametrize("name", sorted(OWN))
def test_over_takes_a_set_setting_from_self_and_the_rest_from_base(name: str) -> None:
    own = SamplingSettings(**{name: OWN[name]})
    merged = own.over(SamplingSettings(**BASE))
    assert merged.to_dict() == {**BASE, name: OWN[name]}


def test_over_leaves_unset_what_neither_sets() -> None:
    merged = SamplingSettings(top_k=3).over(SamplingSettings(temperature=0.5))
    assert merged.to_dict() == {"top_k": 3, "temperature": 0.5}


def test_to_dict_keeps_only_the_set_values_in_field_order() -> None:
    settings = SamplingSettings(ignore_eos=False, presence_penalty=0.5, top_k=0, temperature=1)
    assert list(settings.to_dict().items()) == [
        ("temperature", 1),
        ("top_k", 0),
        ("presence_penalty", 0.5),
        ("ignore_eos", False),
    ]
    full = SamplingSettings(0.5, 2, 0.5, 0.5, 0.5, 0.5, 0.5, True)  # every field, in order
    assert list(full.to_dict()) == SamplingSettings.keys()
