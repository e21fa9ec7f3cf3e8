"""Performance budgets for CI: the budget file, its noise-aware check against runs, and the files CI dashboards read."""
