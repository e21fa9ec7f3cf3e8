"""Checks of the product itself: golden token equivalence of the twins, verify (predicted vs measured), selftest and its planted cases."""
