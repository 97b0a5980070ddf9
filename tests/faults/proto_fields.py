"""A protobuf wire-format reader just deep enough to compare two serialized
HloModuleProtos instruction by instruction (jaxlib ships no Python proto classes).

Named uniquely (not a conftest helper) because test folders share one import namespace."""

from __future__ import annotations

# HloModuleProto.computations, HloComputationProto.name and .instructions,
# HloInstructionProto.name, and the instruction fields that are bookkeeping, not meaning:
# metadata (7), id (35), operand_ids (36), control_predecessor_ids (37),
# called_computation_ids (38). A module parsed from text is renumbered.
COMPUTATIONS, NAME, INSTRUCTIONS = 3, 1, 2
BOOKKEEPING = frozenset({7, 35, 36, 37, 38})
# HloInstructionProto.precision_config: the text parser gives a custom call (TopK) one
# DEFAULT precision per operand where the original had none; both mean DEFAULT.
PRECISION_CONFIG = 51


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """The (field number, raw value) pairs of one serialized message, in order."""
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        elif wire == 2:
            n, i = _varint(data, i)
            value, i = data[i:i + n], i + n
        else:
            raise ValueError(f"wire type {wire} at byte {i}")
        out.append((number, value))
    return out


def instructions(module: bytes) -> dict[tuple[bytes, bytes], list[tuple[int, int | bytes]]]:
    """(computation name, instruction name) -> the instruction's fields but bookkeeping."""
    found = {}
    for number, computation in fields(module):
        if number != COMPUTATIONS:
            continue
        parts = fields(computation)
        comp_name = next(v for k, v in parts if k == NAME)
        for k, instruction in parts:
            if k == INSTRUCTIONS:
                own = fields(instruction)
                name = next(v for kk, v in own if kk == NAME)
                found[(comp_name, name)] = sorted((kk, _normalized(kk, v)) for kk, v in own
                                                  if kk not in BOOKKEEPING)
    return found


def _normalized(number: int, value: int | bytes) -> int | bytes:
    """An all-DEFAULT precision config as the empty one it is equal to."""
    if number == PRECISION_CONFIG and isinstance(value, bytes):
        packed = [v for k, v in fields(value) if k == 1]
        if len(packed) == len(fields(value)) and all(set(v) <= {0} for v in packed if isinstance(v, bytes)):
            return b""
    return value
