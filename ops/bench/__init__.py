"""The benchmarks (BENCHMARKS.md): ``make bench`` (run.py), the synthetic team (generate.py), quality (quality.py)."""
