"""Before/after comparison of runs: the statistics of the comparison and its terminal, HTML and PDF faces."""
