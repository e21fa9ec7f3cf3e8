"""`python -m infer_prof.profiler.cli`: the same as the `infer-prof` console script."""

from infer_prof.profiler.cli.main import main

main()
