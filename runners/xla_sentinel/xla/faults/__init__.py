"""Injected miscompilations: HLO pass plugins that prove the oracle catches real fault classes.

Each fault is one module in this folder that can be loaded by file path (`--inject-pass
FILE.py`) and exposes `transform(proto: bytes) -> bytes | None`, `NAME` and `FIRES_ON`.
No fault edits the body of a kCustom (YNNPACK) fusion or what it calls: that library
rejects ops it does not know when the program first runs, which would be a crash, not a
silent miscompilation.
"""

from pathlib import Path

# Fault name -> its plugin file in this folder. abort_on_pattern crashes on purpose: it
# tests crash containment and is no miscompilation; circular_simplification_log only logs
# what XLA logs in a compile anomaly, and leaves the module as it is.
FAULTS: dict[str, str] = {
    "fusion_bf16_rounding": "fusion_bf16_rounding.py",
    "reduce_max_init_zero": "reduce_max_init_zero.py",
    "select_ge_to_gt": "select_ge_to_gt.py",
    "dynamic_slice_wraps": "dynamic_slice_wraps.py",
    "dus_copy_elided": "dus_copy_elided.py",
    "fused_transpose_as_copy": "fused_transpose_as_copy.py",
    "nan_dropping_max": "nan_dropping_max.py",
    "bf16_convert_truncates": "bf16_convert_truncates.py",
    "concat_off_by_one": "concat_off_by_one.py",
    "shift_right_logical": "shift_right_logical.py",
    "signed_compare_unsigned": "signed_compare_unsigned.py",
    "odd_tail_multiply": "odd_tail_multiply.py",
    "loop_state_bf16": "loop_state_bf16.py",
    "softmax_max_dropped": "softmax_max_dropped.py",
    "variance_one_pass": "variance_one_pass.py",
    # SPMD faults: they see the partitioned per-device module (programs on devices > 1).
    "allreduce_wrong_groups": "allreduce_wrong_groups.py",
    "allreduce_twice": "allreduce_twice.py",
    "partition_id_off_by_one": "partition_id_off_by_one.py",
    # A multi-host fault: it fires on host 1 of a group only (worker/hosts.py).
    "allreduce_skipped_on_one_host": "allreduce_skipped_on_one_host.py",
    "abort_on_pattern": "abort_on_pattern.py",
    "circular_simplification_log": "circular_simplification_log.py",
}


def fault_path(name: str) -> str:
    """Absolute path of the plugin file for fault `name`, usable as `--inject-pass`."""
    if name not in FAULTS:
        raise KeyError(f"unknown fault {name!r}; known: {', '.join(sorted(FAULTS))}")
    return str(Path(__file__).resolve().parent / FAULTS[name])
