"""Store interfaces (graph.py, vector.py), their real backends and in-memory fakes (memory.py)."""
