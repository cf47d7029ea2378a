"""The benchmarks of SPEC §7: ``make bench`` (run.py), the synthetic team (generate.py), quality (quality.py)."""
