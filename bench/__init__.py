"""Benchmarks against peer tools measured in the same run (python3 -m bench.bench_<topic>)."""
