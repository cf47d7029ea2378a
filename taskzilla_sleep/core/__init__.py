"""Layer 1, core: models, errors, settings, the instruments protocol, text and small shared helpers
(logs, faults, throttle). Imports nothing else of taskzilla_sleep.
"""
