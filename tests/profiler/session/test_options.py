"""The engine options' one table: EngineOptions, the CLI, sweep axes and the engine's config agree with it."""

from __future__ import annotations

import inspect
import subprocess
import sys
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from infer_prof.cli.options import engine_options
from infer_prof.engine.config import EngineConfig
from infer_prof.errors import EngineConfigError, OptionError
from infer_prof.profiler.session.options import OPTION, OPTIONS, EngineOptions, options_from_values
from infer_prof.profiler.sweep.spec import engine_axes

ROOT = Path(__file__).resolve().parents[3]


def test_every_engine_options_field_is_one_entry_of_the_table_with_its_default() -> None:
    by_field = {option.field: option for option in OPTIONS}
    assert [f.name for f in fields(EngineOptions)] == [option.field for option in OPTIONS]
    for f in fields(EngineOptions):
        if f.name != "native":  # "none" on the command line, parsed to the empty set
            assert f.default == by_field[f.name].default, f.name


def test_the_engine_sizes_defaults_are_the_engines_own() -> None:
    engine = {f.name: f.default for f in fields(EngineConfig)}
    for option in OPTIONS:
        if option.engine_field:
            assert option.default == engine[option.engine_field], option.name
    config = EngineOptions(device="cpu").engine_config()
    assert (config.max_batch, config.kv_blocks) == (OPTION["max_batch"].default, None)


def test_the_cli_signature_and_the_sweep_axes_are_built_from_the_table() -> None:
    @engine_options(without=("policy",))
    def command(requests: int = 1, *, options: EngineOptions) -> None: ...

    parameters = inspect.signature(command).parameters
    assert list(parameters) == ["requests"] + [option.name for option in OPTIONS if option.name != "policy"]
    assert parameters["max_batch"].default == OPTION["max_batch"].default
    assert set(engine_axes()) == set(OPTION)


def test_the_engines_rules_are_named_as_flags() -> None:
    with pytest.raises(EngineConfigError, match="--kv-blocks and --kv-memory both size the KV pool"):
        EngineOptions(device="cpu", kv_blocks=8, kv_memory_bytes=1 << 20)
    with pytest.raises(OptionError, match=r"--max-batch=0 is impossible: use 1 to 65,536"):
        EngineOptions(device="cpu", max_batch=0)
    with pytest.raises(OptionError, match=r"--seed=-1 is impossible"):
        EngineOptions(device="cpu", seed=-1)


def test_the_options_module_stays_light() -> None:
    # The lazy CLI imports it to build --help: it may not pull in torch.
    code = "import sys, infer_prof.profiler.session.options; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_table_by_name_holds_each_option_under_its_own_name_in_the_faces_order() -> None:
    assert list(OPTION) == [option.name for option in OPTIONS]
    assert all(OPTION[option.name] is option for option in OPTIONS)


def test_to_dict_is_every_field_in_order_with_native_sorted() -> None:
    options = EngineOptions(
        device="cpu", native=frozenset({"scheduler", "kv_alloc"}), kv_blocks=64, threads=2
    )
    data = options.to_dict()
    expected = {**asdict(options), "native": ["kv_alloc", "scheduler"]}
    assert list(data) == list(expected)
    assert data == expected


def test_values_from_a_face_parse_text_and_take_defaults() -> None:
    options = options_from_values({"device": "cpu", "kv_memory": "1MiB", "native": "none", "max_batch": 4})
    assert (options.kv_memory_bytes, options.native, options.max_batch) == (1 << 20, frozenset(), 4)
    assert options.block_size == OPTION["block_size"].default
    assert options.threads is None
    assert options_from_values({"device": "cpu", "kv_memory": 4096}).kv_memory_bytes == 4096


def test_a_value_of_the_wrong_type_is_named_by_its_flag() -> None:
    with pytest.raises(OptionError, match=r"--max-batch='4' is not an integer"):
        options_from_values({"device": "cpu", "max_batch": "4"})
    with pytest.raises(OptionError, match=r"--model=3 is not text"):
        options_from_values({"device": "cpu", "model": 3})
