"""Prints a report Table on the terminal (Rich): the one way every view draws its tables."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from .run.summary import Table


def print_table(console: Console, table: Table) -> None:
    """The title on its own line (as a Rich title it would wrap to the width of a narrow table), the rows, the note."""
    console.print(Text(table.title, style="bold"))
    if table.rows:
        rich_table = RichTable(box=box.SIMPLE_HEAD, show_edge=False)
        for index, column in enumerate(table.columns):
            # Fold rather than truncate: a narrow terminal wraps a number, it never hides one.
            left = index == 0 or table.text or index in table.left_columns
            rich_table.add_column(column, justify="left" if left else "right", overflow="fold")
        for index, row in enumerate(table.rows):
            if index in table.sections and index > 0:
                rich_table.add_section()
            rich_table.add_row(*row)
        console.print(rich_table)
    if table.note:
        console.print(Text(f"  {table.note}", style="dim"))
    console.print()
