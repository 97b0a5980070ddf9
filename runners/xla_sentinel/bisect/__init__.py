"""Bisection: localize a finding to its culprit op, fusion and curing pass; reduce it to a
reproducer bundle. Importing this package does not import jax: the jax work runs in worker
processes (lab.py), so the campaign coordinator can call it.
"""

from xla_sentinel.bisect.pipeline import BisectError, bisect_finding

__all__ = ["BisectError", "bisect_finding"]
