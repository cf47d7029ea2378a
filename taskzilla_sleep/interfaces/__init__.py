"""Layer 11, interfaces: what a person or a program talks to: the CLI (cli*), the HTTP API, the
console, chat ops, the MCP server, the worker daemon that wires them, demo and status. May import
everything, ``taskzilla_sleep.app`` (layer 10, the composition root) included; nothing imports it.
"""
