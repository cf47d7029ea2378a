"""Layer 6, night: the nightly cycle: steps/, the pipeline, the budget, the watchdog, the run ledger,
progress, the schedule. Imports ``memory`` and below.
"""
