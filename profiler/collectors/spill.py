"""An unnamed temporary file that a long run moves its finished records into, so that its memory stays bounded.

A run keeps a record of every span, lock wait and request until it is analysed at the end; held in
memory, those records grow with the run (a soak's growth: docs/measurements.md). Spilled, a
record costs nothing resident: the bytes sit in the kernel's page cache, which is not the process's
memory and is reclaimable. The file has no name (O_TMPFILE where the file system offers it), so no
way a run ends, SIGKILL included, leaves it behind. Writes are rare (a chunk of thousands of records)
and every reader comes after the run, so one lock serialises them.
"""

from __future__ import annotations

import os
import tempfile
import threading
from array import array
from typing import IO


class SpillFile:
    """Append-only bytes in an unnamed temporary file: append() gives the offset, read() gives them back.

    The file is made at the first append; when it cannot be made or written (disk full, read-only
    temporary directory), append() returns None and the caller keeps its records in memory.
    """

    def __init__(self, directory: str | None = None) -> None:
        self._directory = directory
        self._file: IO[bytes] | None = None
        self._size = 0
        self._broken = False
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        """Bytes written so far."""
        return self._size

    def append(self, data: bytes | array) -> int | None:
        """Write `data` at the end; its offset, or None when spilling is not possible here."""
        view = memoryview(data).cast("B")
        with self._lock:
            if self._broken:
                return None
            try:
                if self._file is None:
                    self._file = tempfile.TemporaryFile(dir=self._directory)
                offset = self._size
                fd = self._file.fileno()
                written = 0
                while written < len(view):
                    written += os.pwrite(fd, view[written:], offset + written)
            except OSError:
                self._broken = True  # a partial write is never read: nothing points at it
                return None
            self._size = offset + len(view)
            return offset

    def read(self, offset: int, nbytes: int) -> bytes:
        """The `nbytes` bytes written at `offset` by one append()."""
        if nbytes == 0:
            return b""
        with self._lock:
            if self._file is None:
                raise ValueError("nothing was ever spilled to this file")
            if offset < 0 or offset + nbytes > self._size:
                raise ValueError(
                    f"bytes {offset}..{offset + nbytes} were never spilled (the file holds {self._size})"
                )
            fd = self._file.fileno()
            parts = []
            done = 0
            while done < nbytes:
                part = os.pread(fd, nbytes - done, offset + done)
                if not part:
                    raise OSError(f"spill file ended at {offset + done}, {nbytes - done} bytes short")
                parts.append(part)
                done += len(part)
        return b"".join(parts)

    def read_array(self, typecode: str, offset: int, count: int) -> array:
        """`count` items of an array of `typecode` written at `offset`."""
        values = array(typecode)
        values.frombytes(self.read(offset, count * values.itemsize))
        return values
