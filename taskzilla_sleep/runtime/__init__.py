"""Layer 8, runtime: more than one worker process: the lease, the team handover, presence.
Imports ``observe`` and below.
"""
