"""Records of a few names and numbers each, as a list of names and an 8-byte array, spillable to a file."""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator
from typing import Generic, TypeVar, cast

from .spill import SpillFile

# One record: its names (str), then its numbers (int for an "q" log, float for a "d" one).
Row = TypeVar("Row", bound=tuple[object, ...], covariant=True)


class RecordLog(Generic[Row]):
    """Records of a few names (str) and numbers each, kept as a list of names and an 8-byte array of numbers.

    The tracer keeps a record per span for the whole run, so its size is the profiler's memory growth: as
    Python ints in a list a span's six numbers cost ~200 bytes (a 32-byte int object and an 8-byte
    slot each), in an array 48. Arrays hold no objects, so they add nothing to the garbage collector's
    work either. One thread appends at a time (the tracer's decoder, under its lock), names first, then
    numbers, so the two stay aligned. spill() moves the records held so far into a SpillFile (names as
    codes into `_name_table`), so a run of any length holds at most a chunk of them; records() reads the
    spilled chunks first.
    """

    __slots__ = ("_chunks", "_codes", "_name_table", "name_width", "names", "pack", "value_width", "values")

    def __init__(self, name_width: int, value_width: int, typecode: str = "q") -> None:
        self.name_width = name_width
        self.value_width = value_width
        self.names: list[str] = []
        self.values = array(typecode)
        # A record's numbers go in as bytes (values.frombytes(pack(...))): array.extend from a tuple converts
        # item by item, several times slower a span (struct's native layout is the array's).
        self.pack = struct.Struct(f"{value_width}{typecode}").pack
        self._codes: dict[str, int] = {}
        self._name_table: list[str] = []
        # Spilled chunks: (file, records, offset of the name codes, offset of the numbers).
        self._chunks: list[tuple[SpillFile, int, int, int]] = []

    def __len__(self) -> int:
        return sum(chunk[1] for chunk in self._chunks) + len(self.names) // self.name_width

    def spill(self, file: SpillFile) -> bool:
        """Move the records held in memory into `file` (owning thread only); False when the file refused them."""
        count = len(self.names) // self.name_width
        if not count:
            return True
        codes = self._codes
        for name in set(self.names):
            if name not in codes:
                codes[name] = len(self._name_table)
                self._name_table.append(name)
        name_codes = array("i", map(codes.__getitem__, self.names))
        names_at = file.append(name_codes)
        values_at = file.append(self.values) if names_at is not None else None
        if names_at is None or values_at is None:
            return False
        self._chunks.append((file, count, names_at, values_at))
        self.names = []
        del self.values[:]  # frees the buffer; the array object is kept
        return True

    def records(self) -> Iterator[Row]:
        """Each record as a tuple: its names, then its numbers (spilled ones first, in the order written)."""
        for file, count, names_at, values_at in self._chunks:
            table = self._name_table
            names = [table[code] for code in file.read_array("i", names_at, count * self.name_width)]
            values = file.read_array(self.values.typecode, values_at, count * self.value_width)
            yield from self._tuples(names, values)
        yield from self._tuples(self.names, self.values)

    def _tuples(self, names: list[str], values: array) -> Iterator[Row]:
        heads = zip(*([iter(names)] * self.name_width), strict=False)
        tails = zip(*([iter(values)] * self.value_width), strict=False)
        # The rows' shape is the one the log was made for (its owner names it as Row): names and numbers
        # come back from bytes here, so this is where they get their type, once per chunk.
        return cast(Iterator[Row], (head + tail for head, tail in zip(heads, tails, strict=False)))
