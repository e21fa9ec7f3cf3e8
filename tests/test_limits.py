"""The one size and nesting limit on parsed files, and the one message for an OS error on an output path (errors.py)."""

from __future__ import annotations

import errno
import json
import tomllib
from pathlib import Path

import pytest

from infer_prof.errors import (
    MAX_NESTING,
    OutputError,
    ScenarioError,
    check_nesting,
    output_error,
    read_bounded,
)


def test_nesting_up_to_the_limit_parses_and_one_deeper_is_refused_before_the_parser() -> None:
    at_limit = "x = " + "[" * MAX_NESTING + "]" * MAX_NESTING
    check_nesting(at_limit, "f", ScenarioError)
    tomllib.loads(at_limit)
    with pytest.raises(ScenarioError, match=f"nested more than {MAX_NESTING} deep"):
        check_nesting("x = " + "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1), "f", ScenarioError)


def test_brackets_inside_strings_and_comments_do_not_count() -> None:
    many = "[" * (MAX_NESTING * 3)
    text = f"a = \"{many}\"\nb = '{many}'\nc = \"\"\"\n{many}\n\"\"\"\nd = '''{many}'''\n# {many}\ne = [[1], [2]]\n"
    check_nesting(text, "f", ScenarioError)
    assert tomllib.loads(text)["e"] == [[1], [2]]
    check_nesting(json.dumps({"k": many, "escaped": 'a \\" [[[' + many}), "f", ScenarioError)


def test_a_file_over_the_size_limit_is_refused_naming_it_and_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_text("a" * 2048)
    assert read_bounded(path, ScenarioError, limit=4096) == "a" * 2048
    with pytest.raises(ScenarioError, match=r"big\.toml: 2,048 bytes, more than the 1,024 bytes"):
        read_bounded(path, ScenarioError, limit=1024)


@pytest.mark.parametrize(
    "number", [errno.ENOSPC, errno.EROFS, errno.ENAMETOOLONG, errno.EACCES, errno.EDQUOT]
)
def test_an_os_error_on_an_output_path_names_the_path_and_what_the_errno_means(number: int) -> None:
    error = output_error(OSError(number, "the system's words"), "/out/x.json")
    assert isinstance(error, OutputError) and error.exit_code == 2
    assert (
        "/out/x.json" in str(error)
        and "the system's words" in str(error)
        and errno.errorcode[number] in str(error)
    )
