"""`python -m infer_prof.cli`: the same as the `infer-prof` console script."""

from .main import main

main()
