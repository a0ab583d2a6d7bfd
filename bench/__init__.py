"""Benchmarks: our coordinator against the original's polling policy, on the fake GitHub.

Run `python -m bench` (add `--quick` for a few-second smoke run). See `bench/run.py`.
"""
