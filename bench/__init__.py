"""Benchmarks; each writes its figures under bench/results."""
