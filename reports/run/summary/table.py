"""The summary's table: a title, columns and printable cells, drawn by the terminal, HTML and PDF."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Table:
    """A titled table of printable cells; `note` explains an empty or partial table."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    sections: list[int] = field(default_factory=list)  # row indices that start a new group
    note: str | None = None
    text: bool = False  # a column of sentences, not numbers: left-aligned
    left_columns: tuple[int, ...] = ()  # columns of names among numbers: left-aligned too
