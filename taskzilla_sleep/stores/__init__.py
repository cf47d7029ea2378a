"""Store interfaces (ports.py), their real backends, the in-memory fakes (memory/) and the embedder.

Layer 3: imports only ``core``. Nothing outside ``stores/`` names a concrete store: ``app`` opens
them through ``stores.backends`` (the importlinter contract ``concrete-stores``).
"""
