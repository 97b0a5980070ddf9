"""The numpy references: a StableHLO module evaluated in float64 numpy (npref.py), and the
ops numpy computes bit for bit as XLA:CPU at a program's own precision (own_precision.py)."""
