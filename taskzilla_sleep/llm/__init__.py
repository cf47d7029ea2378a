"""The language-model layer: one protocol (base.py), a litellm client, an offline provider, prompts.

Layer 4, beside ``alerts`` (neither imports the other): imports ``stores`` (ports), ``rules``, ``core``.
"""
