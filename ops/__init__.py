"""Operator tooling: benchmarks, sample generators, the local Neo4j launcher."""
