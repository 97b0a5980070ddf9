"""Injected fault: shard offsets off by one shard.

Imitates a partitioner that computes each device's position one too far (an off-by-one
in the device-to-shard bookkeeping): every `partition-id` of the partitioned module reads
one more than the device's own, so the slice a device takes of a replicated value, its
`axis_index` and every offset derived from them belong to the next device (the last
device's lookups clamp).

Fires when: the partitioned (per-device) module reads `partition-id`: a replicated value
sliced per device, a shard_map region that uses axis_index, or a resharding.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "partition_id_off_by_one"
FIRES_ON = "partition-id in a partitioned module (per-device slices, axis_index)"


def _edit(module: hlo.HloModule) -> bool:
    changed = False
    for comp in module.editable_computations():
        for instr in list(comp):
            if instr.opcode != "partition-id":
                continue
            one = hlo.constant(module.fresh_name("fault_one"), instr.array_shape.dtype, "1")
            shifted = hlo.make_instruction(module.fresh_name("fault_partition_id"), instr.array_shape,
                                           "add", [instr.name, one.name])
            comp.insert_after(instr, [one, shifted])
            comp.replace_uses(instr.name, shifted.name, skip=[shifted.name])
            changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
