"""Bisection: localize a finding to its culprit op, fusion and curing pass; reduce it to a reproducer."""
