"""The prediction ledger: every predicted gain checked against a measured one, kept across runs, and its score.

LedgerRecord                                  one predicted/measured pair (records.py)
append_record(record, path=None) -> Path      append it under a lock (store.py)
read_ledger(path) -> list[LedgerRecord]       read them back, damaged lines skipped with a warning
summarize(records) -> LedgerSummary           pairs, median |error|, interval coverage (summary.py)
"""

from __future__ import annotations

from .records import LedgerRecord
from .store import append_record, ledger_path, load_ledger, read_ledger

__all__ = ["LedgerRecord", "append_record", "ledger_path", "load_ledger", "read_ledger"]
