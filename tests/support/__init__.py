"""Helpers shared by several test folders (synthetic run directories)."""
