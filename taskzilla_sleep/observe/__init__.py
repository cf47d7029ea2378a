"""Layer 7, observe: what is told about the nights: metrics, report/.
Imports ``night`` and below.
"""
