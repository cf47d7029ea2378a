"""Layer 5, memory: what a team's memory is and how it changes outside a night: ingest, recall,
facts, contradictions and their resolution, admin (export, import, forget), the MEMORY.md index,
vector upkeep, quarantine, the archive (undo), reconcile, ingests in flight.
Imports ``alerts``, ``llm``, ``stores`` (ports only), ``rules``, ``core``.
"""
