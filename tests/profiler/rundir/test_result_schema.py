"""result.json's schema types: the reader checks files against them, old files load, the doc is generated from them, and the type checker finds every reader of a field."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest

from infer_prof.errors import ResultError
from infer_prof.profiler.budget.spec import ALIASES
from infer_prof.profiler.rundir import schema
from infer_prof.profiler.rundir.results import RunResult, read_result
from infer_prof.reports.compare.analysis import GPU_METRICS, LATENCY_METRICS, THROUGHPUT_METRICS
from tests.support.run_dirs import make_run_dir

ROOT = Path(__file__).resolve().parents[3]
# A result.json written by the writer of 98c29ab (tests/support/run_dirs.make_run_dir of that commit): no
# target, gpu_time or replay sections, which were added later.
OLD_RESULT = Path(__file__).parents[1] / "fixtures" / "result-98c29ab.json"


def _write(path: Path, data: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "result.json").write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> dict:
    run = make_run_dir(tmp_path_factory.mktemp("good") / "run", seed=2, n_requests=6, n_steps=20)
    return json.loads((run / "result.json").read_text())


def test_a_file_of_this_version_reads_and_its_sections_have_their_types(good: dict, tmp_path: Path) -> None:
    result = read_result(_write(tmp_path / "run", good))
    assert result.metrics["completed"] == good["metrics"]["completed"]
    assert result.to_dict()["verdict"] == good["verdict"]


def test_an_older_file_the_tool_still_supports_loads_and_renders() -> None:
    from infer_prof.reports.run.summary import headline, key_figures

    result = read_result(OLD_RESULT)
    assert result.gpu_time is None and result.replay is None and result.target is None
    assert result.verdict is not None and result.verdict["component"]
    assert headline(result) and key_figures(result)
    # It names the engine's sizes as vLLM does; read, they carry the options' names.
    assert json.loads(OLD_RESULT.read_text())["config"]["engine"]["max_num_seqs"] == 48
    assert result.config["engine"]["max_batch"] == 48 and result.config["engine"]["kv_blocks"] == 2048
    assert "max_num_seqs" not in result.config["engine"] and "num_kv_blocks" not in result.config["engine"]


@pytest.mark.parametrize(
    ("change", "field", "expected"),
    [
        (lambda d: d["metrics"]["ttft_ms"].update(p99="fast"), "metrics.ttft_ms.p99", "a number or null"),
        (lambda d: d["verdict"].update(reasons="none"), "verdict.reasons", "a list of text"),
        (lambda d: d["config"]["engine"].update(policy=3), "config.engine.policy", "text"),
        (lambda d: d["collectors"]["gc"].update(status="maybe"), "collectors.gc.status", '"ok" | "skipped"'),
        (lambda d: d.update(breakdown=3), "breakdown", "a table (Breakdown) or null"),
    ],
)
def test_a_wrong_type_is_refused_with_one_line_naming_the_file_and_field(
    good: dict,
    tmp_path: Path,
    change,
    field: str,
    expected: str,  # type: ignore[no-untyped-def]
) -> None:
    data = json.loads(json.dumps(good))
    change(data)
    run = _write(tmp_path / "run", data)
    with pytest.raises(ResultError) as caught:
        read_result(run)
    message = str(caught.value)
    assert "\n" not in message and str(run / "result.json") in message
    assert f": {field} is " in message and expected in message


def test_unknown_sections_and_fields_are_tolerated(good: dict, tmp_path: Path) -> None:
    # Other branches add sections (health, target.processes...): a reader of this version keeps going.
    data = json.loads(json.dumps(good))
    data["health"] = {"anything": [1, "two"]}
    data["metrics"]["a_new_figure"] = "text where numbers live"
    assert read_result(_write(tmp_path / "run", data)).metrics["completed"] == good["metrics"]["completed"]


@pytest.mark.parametrize(
    ("version", "says"),
    [(0, "older than this infer-prof reads"), (None, "older than"), (99, "is not supported")],
)
def test_a_file_too_old_or_too_new_is_refused_with_one_line(
    good: dict, tmp_path: Path, version, says: str
) -> None:  # type: ignore[no-untyped-def]
    data = {**good, "schema_version": version}
    with pytest.raises(ResultError, match=says) as caught:
        read_result(_write(tmp_path / "run", data))
    assert "\n" not in str(caught.value) and "re-record" in str(caught.value)


def test_the_schema_doc_is_generated_from_the_types() -> None:
    committed = (ROOT / "docs" / "result-schema.md").read_text(encoding="utf-8")
    assert committed == schema.markdown(), (
        "docs/result-schema.md is stale: run `python -m infer_prof.profiler.rundir.schema > docs/result-schema.md`"
    )
    for section in schema.sections():
        assert f"## {section.__name__}" in committed


def test_the_dataclass_and_the_file_type_list_the_same_sections() -> None:
    assert list(RunResult.__dataclass_fields__) == [
        name for name in schema.hints(schema.ResultFile) if name != "schema_version"
    ] + ["schema_version"]


def _resolves(dotted: str) -> bool:
    """Whether a dotted path into result.json names a field of the schema types (a table of any key passes)."""
    hint: object = schema.ResultFile
    for part in dotted.split("."):
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(options) == 1:
            hint = options[0]  # X | None
        if typing.is_typeddict(hint):
            fields = schema.hints(hint)  # type: ignore[arg-type]
            if part not in fields:
                return False
            hint = fields[part]
        elif typing.get_origin(hint) is dict:
            hint = typing.get_args(hint)[1]
        else:
            return False
    return True


def test_the_dynamic_readers_name_fields_the_schema_has() -> None:
    # budget metrics and compare's table read by name at run time: each name must be a field of the types.
    for alias, dotted in ALIASES.items():
        assert _resolves(dotted), f"budget alias {alias} -> {dotted} is not in profiler/rundir/schema.py"
    for spec in (*THROUGHPUT_METRICS, *LATENCY_METRICS):
        assert _resolves(f"metrics.{spec.name}"), f"compare reads metrics.{spec.name}, which the schema lacks"
    for spec in GPU_METRICS:
        assert _resolves(spec.name), f"compare reads {spec.name}, which the schema lacks"
    assert not _resolves("metrics.no_such_figure")


# The field the checker test renames, and the pattern of a direct read of it by key.
RENAMED = ("Metrics", "goodput")
READ = re.compile(r"""(?:\.get\(|\[)\s*["']goodput["']""")
WRITERS = {"profiler/analysis/metrics.py"}  # builds the section: a reader only through the types


@pytest.mark.slow
def test_renaming_a_schema_field_makes_the_type_checker_name_every_reader(tmp_path: Path) -> None:
    """Every module that reads metrics' goodput by key reads it through the schema type, so that mypy finds
    it when the field changes; a reader of an untyped dict would be found by grep and missed by mypy."""
    readers = sorted(
        str(path.relative_to(ROOT))
        for folder in ("profiler", "reports")
        for path in (ROOT / folder).rglob("*.py")
        if READ.search(path.read_text(encoding="utf-8"))
        and str(path.relative_to(ROOT)) not in WRITERS
        and path.name != "schema.py"
    )
    assert readers, "no reader of metrics.goodput found: pick another field for this test"
    tree = tmp_path / "tree"
    copy = tree / "infer_prof"  # the rooms under the name they are installed as
    for name in ("engine", "profiler", "reports", "native_paths", "scenarios"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copy(ROOT / "errors.py", copy / "errors.py")
    schema_file = copy / "profiler" / "rundir" / "schema.py"

    def errors() -> set[str]:
        checked = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--follow-imports=silent",
                "--explicit-package-bases",
                "--ignore-missing-imports",
                "--no-error-summary",
                "--cache-dir",
                str(tmp_path / "cache"),
                *("infer_prof/" + reader for reader in readers),
            ],
            cwd=tree,
            capture_output=True,
            text=True,
            env={"PATH": "", "PYTHONPATH": str(tree), "HOME": str(tmp_path)},
        )
        return {
            line.removeprefix("infer_prof/") for line in checked.stdout.splitlines() if ": error: " in line
        }

    before = errors()
    section, name = RENAMED
    text = schema_file.read_text(encoding="utf-8")
    start = text.index(f"class {section}(")
    renamed = text[:start] + text[start:].replace(f"    {name}: ", f"    {name}_renamed: ", 1)
    assert renamed != text
    schema_file.write_text(renamed, encoding="utf-8")
    # A read of a key the type lacks is an `object` (or a missing-key error): each reader fails to type-check.
    new = errors() - before
    found = {line.split(":")[0] for line in new}
    assert found == set(readers), f"mypy found {sorted(found)}; readers by key: {readers}\n" + "\n".join(
        sorted(new)
    )
