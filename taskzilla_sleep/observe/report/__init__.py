"""What ops read about the nights: the ledger's figures and health signals, and how they are shown.

``model`` (the figures) and ``signals`` (the health rules) are all a Prometheus scrape needs, so
``metrics`` imports only those two; ``text``, ``svg`` and ``html`` render a report for the
``report`` command, and ``night`` is the plain-text account of one night (run-once, demo, the
nightly chat summary) and the dry-run plan. Callers import from the submodules.
"""
