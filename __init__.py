"""infer_prof: the repository root is the package, so each room imports the others relatively (docs/architecture.md, "The installed namespace")."""
