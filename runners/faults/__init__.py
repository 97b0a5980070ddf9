"""Injected miscompilations: HLO pass plugins that prove the oracle catches real fault classes.

Each fault is one module in this folder that can be loaded by file path (`--inject-pass
FILE.py`) and exposes `transform(proto: bytes) -> bytes | None`, `NAME` and `FIRES_ON`.
"""

from pathlib import Path

FAULTS: dict[str, str] = {
    "fusion_bf16_rounding": "fusion_bf16_rounding.py",
    "select_ge_to_gt": "select_ge_to_gt.py",
    "shift_right_logical": "shift_right_logical.py",
}


def fault_path(name: str) -> str:
    """Absolute path of the plugin file for fault `name`, usable as `--inject-pass`."""
    if name not in FAULTS:
        raise KeyError(f"unknown fault {name!r}; known: {', '.join(sorted(FAULTS))}")
    return str(Path(__file__).resolve().parent / FAULTS[name])
