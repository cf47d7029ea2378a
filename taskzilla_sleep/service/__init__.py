"""Layer 9, service: the calls every interface makes, access-checked and audited
(memory_service, audit_trail). Imports ``runtime`` and below.
"""
