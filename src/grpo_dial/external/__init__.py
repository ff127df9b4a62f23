"""Runs logged by other trainers (TRL, verl, generic tables): file readers, importers,
diagnostics.
"""
