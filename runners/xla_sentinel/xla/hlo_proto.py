"""HLO modules through jaxlib: full text of a compiled module, HloModuleProto to and from
text, running HLO text, and the proto rewrite every fault plugin shares (imports jaxlib
when called; hlo.py is the jax-free text side)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xla_sentinel.xla.hlo import HloModule, parse


def full_text(module: Any) -> str:
    """A jaxlib `HloModule` as parsable text, every constant in full.

    The default printer (`to_string()`, `get_hlo_text()`) shortens a constant of more than
    a few elements to `{...}`, which the parser reads back as an uninitialized literal: a
    round trip through it changed results and made them vary between compiles (scatter
    indices from an s32[11,1] constant). That, not the injected faults, was behind the
    `nondeterministic` findings of the first detection bench.
    """
    import jaxlib._hlo as _hlo

    options = _hlo.HloPrintOptions()
    options.print_large_constants = True
    text: str = module.to_string(options)
    return text


def text_from_proto(proto: bytes) -> str:
    import jaxlib._hlo as _hlo

    return full_text(_hlo.HloModule.from_serialized_hlo_module_proto(proto))


def proto_from_text(text: str) -> bytes:
    import jaxlib._hlo as _hlo

    proto: bytes = _hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
    return proto


def run_hlo(text: str, args: Sequence[Any]) -> list[np.ndarray]:
    """Compile HLO text on the CPU backend (through StableHLO, as replay does) and run it.
    Optimized HLO must go through `defuse` first."""
    import jax
    import jaxlib._jax as _jax
    from jax._src import compiler, xla_bridge
    from jaxlib import xla_client

    device = jax.devices("cpu")[0]
    stablehlo = _jax.mlir.hlo_to_stablehlo(proto_from_text(text))
    executable = xla_bridge.get_backend("cpu").compile_and_load(
        stablehlo, xla_client.DeviceList((device,)),
        compiler.get_compile_options(num_replicas=1, num_partitions=1))
    outputs = executable.execute_sharded([jax.device_put(a, device) for a in args])
    return [np.asarray(out[0]) for out in outputs.disassemble_into_single_device_arrays()]


def rewrite_proto(proto: bytes, edit: Callable[[HloModule], bool]) -> bytes | None:
    """The plugin body every fault shares: parse the module, let `edit` change it in place
    and say whether it did, and serialize it again; None (unchanged) when it did not."""
    module = parse(text_from_proto(proto))
    if not edit(module):
        return None
    return proto_from_text(module.to_text())
