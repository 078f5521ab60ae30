"""Benchmarks run by hand (see docs/benchmarks.md); never part of the test suite."""
