"""Sluice's benchmarks: `make bench` (quick) and `make bench-full`; see bench/run.py."""
