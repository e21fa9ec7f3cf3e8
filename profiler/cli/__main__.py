"""`python -m profiler.cli`: the same as the `infer-prof` console script."""

from profiler.cli.main import main

main()
