"""Pure functions from collected data to answers: the time split, stack classification, serving metrics and the verdict."""
