"""Trace files other tools open: Chrome Trace Event JSON (Perfetto) and speedscope."""
