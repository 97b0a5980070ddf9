"""Injected fault: an all-reduce over the wrong device groups.

Imitates a partitioner that maps a mesh axis to the wrong devices when it spells a
collective's replica groups (the public bugs: groups for the wrong mesh axis, or a
transposed device order): every all-reduce of the partitioned module is given groups of
the same size made of other devices, consecutive device ids where they were strided and
strided where they were consecutive; an all-reduce over every device is split in halves.

Fires when: the partitioned (per-device) module holds an all-reduce whose groups are
spelled as lists (`{{0,2},{1,3}}`) or iota tiles (`[2,2]<=[4]`), over at least two devices.
"""

import re

from xla_sentinel.xla import hlo, hlo_proto

NAME = "allreduce_wrong_groups"
FIRES_ON = "all-reduce of a partitioned module over groups of two or more devices"

_IOTA = re.compile(r"^\[(\d+),(\d+)\]<=\[([\d,]+)\](T\(([\d,]+)\))?$")


def _groups(spelled: str) -> list[list[int]] | None:
    """The device groups of a replica_groups attribute, or None for a form not handled."""
    if spelled.startswith("{{"):
        return [[int(d) for d in g.split(",")] for g in re.findall(r"\{([\d,]+)\}", spelled)]
    m = _IOTA.match(spelled)
    if not m:
        return None
    n_groups, size = int(m.group(1)), int(m.group(2))
    dims = [int(d) for d in m.group(3).split(",")]
    ids = list(range(n_groups * size))
    if m.group(5):  # transposed iota: ids laid out over `dims`, then permuted
        import numpy as np
        perm = [int(p) for p in m.group(5).split(",")]
        ids = np.arange(n_groups * size).reshape(dims).transpose(perm).reshape(-1).tolist()
    return [ids[g * size:(g + 1) * size] for g in range(n_groups)]


def _wrong(groups: list[list[int]]) -> list[list[int]] | None:
    devices = sorted(d for g in groups for d in g)
    n, size = len(devices), len(groups[0])
    if size < 2:
        return None
    if len(groups) == 1:
        return [devices[:n // 2], devices[n // 2:]] if n % 2 == 0 else None
    consecutive = [devices[i:i + size] for i in range(0, n, size)]
    strided = [devices[i::len(groups)] for i in range(len(groups))]
    normal = sorted(sorted(g) for g in groups)
    for other in (consecutive, strided):
        if sorted(other) != normal:
            return other
    return None


def _edit(module: hlo.HloModule) -> bool:
    changed = False
    for comp in module.editable_computations():
        for instr in comp:
            spelled = instr.attr("replica_groups") if instr.opcode == "all-reduce" else None
            groups = _groups(spelled) if spelled else None
            wrong = _wrong(groups) if groups else None
            if wrong is None:
                continue
            instr.set_attr("replica_groups", "{" + ",".join(
                "{" + ",".join(map(str, g)) + "}" for g in wrong) + "}")
            changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
