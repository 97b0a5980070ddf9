"""xla-sentinel: continuous correctness testing for the XLA compiler."""

__version__ = "0.1.0"
