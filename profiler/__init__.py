"""The composition root: CLI, profiled sessions, collectors, breakdown, verdict, comparison and budgets."""
