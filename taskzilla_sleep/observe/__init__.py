"""Layer 7, observe (beside ``alerts``): what is told about the nights: metrics, report/.
Imports ``night`` and below; not ``alerts``.
"""
