"""The language-model layer: one protocol (base.py), a litellm client, an offline provider, prompts."""
