"""The hostile-input corpus: hundreds of bad inputs across every command, each refused with exit 2 and one line."""
