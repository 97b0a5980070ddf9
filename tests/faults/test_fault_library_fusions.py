"""No fault edits a kCustom (YNNPACK) fusion: that library rejects ops it does not know
when the program first runs, which would turn a silent miscompilation into a crash (a
real generated program did exactly that before the guard). The same body as a kLoop
fusion is fair game, which shows the patterns are really inside it."""

from __future__ import annotations

import pytest
from fault_harness import load_fault
from xla_sentinel.xla import hlo_proto

# One fused body holding the pattern of every fault that can fire inside a fusion.
_MODULE = """HloModule library_guard

%max_region (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}

%body (p0: f32[5,5], p1: s32[5], p2: s32[]) -> (bf16[5,5], s32[5], pred[5], f32[10,5], f32[2,5], f32[5]) {
  %p0 = f32[5,5]{1,0} parameter(0)
  %p1 = s32[5]{0} parameter(1)
  %p2 = s32[] parameter(2)
  %exp = f32[5,5]{1,0} exponential(%p0)
  %tr = f32[5,5]{0,1} transpose(%exp), dimensions={1,0}
  %cp = f32[5,5]{1,0} copy(%tr)
  %mul = f32[5,5]{1,0} multiply(%cp, %p0)
  %ge = pred[5,5]{1,0} compare(%mul, %p0), direction=GE
  %sel = f32[5,5]{1,0} select(%ge, %mul, %p0)
  %mx = f32[5,5]{1,0} maximum(%sel, %p0)
  %cv = bf16[5,5]{1,0} convert(%mx)
  %sh = s32[5]{0} shift-right-arithmetic(%p1, %p1)
  %lt = pred[5]{0} compare(%p1, %sh), direction=LT
  %cat = f32[10,5]{1,0} concatenate(%mx, %p0), dimensions={0}
  %zero = s32[] constant(0)
  %ds = f32[2,5]{1,0} dynamic-slice(%p0, %p2, %zero), dynamic_slice_sizes={2,5}
  %ninf = f32[] constant(-inf)
  %red = f32[5]{0} reduce(%p0, %ninf), dimensions={1}, to_apply=%max_region
  ROOT %out = (bf16[5,5]{1,0}, s32[5]{0}, pred[5]{0}, f32[10,5]{1,0}, f32[2,5]{1,0}, f32[5]{0}) tuple(%cv, %sh, %lt, %cat, %ds, %red)
}

ENTRY %main (x: f32[5,5], k: s32[5], i: s32[]) -> (bf16[5,5], s32[5], pred[5], f32[10,5], f32[2,5], f32[5]) {
  %x = f32[5,5]{1,0} parameter(0)
  %k = s32[5]{0} parameter(1)
  %i = s32[] parameter(2)
  ROOT %f = (bf16[5,5]{1,0}, s32[5]{0}, pred[5]{0}, f32[10,5]{1,0}, f32[2,5]{1,0}, f32[5]{0}) fusion(%x, %k, %i), kind=KIND, calls=%body
}"""

_LIBRARY = _MODULE.replace(
    "kind=KIND, calls=%body",
    'kind=kCustom, calls=%body, backend_config={"fusion_config":{"kind":"__ynn_fusion"}}')
_LOOP = _MODULE.replace("kind=KIND", "kind=kLoop")

FUSION_FAULTS = ["bf16_convert_truncates", "concat_off_by_one", "dynamic_slice_wraps",
                 "fused_transpose_as_copy", "fusion_bf16_rounding", "nan_dropping_max",
                 "odd_tail_multiply", "reduce_max_init_zero", "select_ge_to_gt",
                 "shift_right_logical", "signed_compare_unsigned"]


@pytest.mark.parametrize("fault", FUSION_FAULTS)
def test_fault_edits_the_loop_fusion_but_never_the_library_fusion(fault: str) -> None:
    transform = load_fault(fault).transform

    assert transform(hlo_proto.proto_from_text(_LOOP)) is not None
    assert transform(hlo_proto.proto_from_text(_LIBRARY)) is None
