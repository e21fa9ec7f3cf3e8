"""What infer-prof injects into the processes of a foreign server it launches: the span probe `sitecustomize.py`."""
