"""Per-prompt pass rates: the tidy table, its sources, estimation from a policy, the running
tracker.
"""
