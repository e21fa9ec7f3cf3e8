"""Reports of one run: the terminal summary, charts, report.html and report.pdf."""
