"""TPU slices on GKE: from the node labels a campaign names (accelerator and topology) and
its machine type to chips, VMs and chips per VM, read from GKE's table of the shapes its
node pools offer. A shape not in the table is refused: no node pool would ever hold it.

A slice of more than one VM (v5e or v6e 4x4: 16 chips on 4 VMs) runs as one Indexed Job
of `hosts` pods, one per VM, each requesting every chip of its VM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


class TopologyError(ValueError):
    """A TPU accelerator, topology, machine type or chip count GKE cannot schedule."""


@dataclass(frozen=True)
class Shape:
    """One row of GKE's table: a topology as a node pool of `vms` VMs of `machine_type`."""
    topology: str
    chips: int
    vms: int
    machine_type: str


def _rows(machine_type: str, *shapes: tuple[str, int, int]) -> tuple[Shape, ...]:
    return tuple(Shape(t, chips, vms, machine_type) for t, chips, vms in shapes)


# Keyed by the node label cloud.google.com/gke-tpu-accelerator. Rows from Google Cloud's
# "TPU v6e" (topology, chips, VMs, "Machine type (GKE API)") and "TPU v5e" (topologies and
# its 1-, 4- and 8-chip VM types) pages, as GKE's "Plan TPUs in GKE" page refers to them.
# tpu7x is refused until its rows are read from those pages.
TABLE: dict[str, tuple[Shape, ...]] = {
    "tpu-v5-lite-podslice": (
        _rows("ct5lp-hightpu-1t", ("1x1", 1, 1)) + _rows("ct5lp-hightpu-4t", ("2x2", 4, 1))
        + _rows("ct5lp-hightpu-8t", ("2x4", 8, 1))
        + _rows("ct5lp-hightpu-4t", ("4x4", 16, 4), ("4x8", 32, 8), ("8x8", 64, 16),
                ("8x16", 128, 32), ("16x16", 256, 64))),
    "tpu-v5-lite-device": (
        _rows("ct5l-hightpu-1t", ("1x1", 1, 1)) + _rows("ct5l-hightpu-4t", ("2x2", 4, 1))
        + _rows("ct5l-hightpu-8t", ("2x4", 8, 1))),
    "tpu-v6e-slice": (
        _rows("ct6e-standard-1t", ("1x1", 1, 1)) + _rows("ct6e-standard-4t", ("2x2", 4, 1))
        + _rows("ct6e-standard-8t", ("2x4", 8, 1))
        + _rows("ct6e-standard-4t", ("2x4", 8, 2), ("4x4", 16, 4), ("4x8", 32, 8),
                ("8x8", 64, 16), ("8x16", 128, 32), ("16x16", 256, 64))),
}


# v4 and v5p (3-D tori of 4-chip VMs): the stored pages list only some of their many shapes
# ("most (but not all)", says the v5p page), so a rule stands in for rows: AxBxC of whole
# 4-chip VMs, one VM for 2x2x1. It refuses what no node pool can be (1x1x1, 3x3x3) and keeps
# the large shapes users run; a table of rows would refuse those until every row is read.
CUBE_MACHINE_TYPES = {"tpu-v4-podslice": "ct4p-hightpu-4t", "tpu-v5p-slice": "ct5p-hightpu-4t"}
CUBE_VM_CHIPS = 4
CUBE_RULE = "AxBxC with A*B*C a multiple of 4 (2x2x1, 2x2x2, 2x2x4, 2x4x4, 4x4x4, ...)"

# The generation each accelerator label is, as messages name it.
GENERATIONS = {"tpu-v4-podslice": "v4", "tpu-v5p-slice": "v5p", "tpu-v5-lite-podslice": "v5e",
               "tpu-v5-lite-device": "v5e", "tpu-v6e-slice": "v6e"}


@dataclass(frozen=True)
class Slice:
    generation: str
    chips: int
    hosts: int  # VMs, one pod each
    chips_per_host: int
    machine_type: str
    # More than one machine type offers this topology: pods select theirs by instance type.
    ambiguous: bool = False

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1


def _topologies(shapes: tuple[Shape, ...]) -> str:
    return ", ".join(dict.fromkeys(s.topology for s in shapes))


def slice_of(accelerator: str, topology: str, machine_type: str | None = None) -> Slice:
    """The slice GKE's table has for (accelerator, topology, machine type); without a
    machine type, the single-VM shape where the topology has one. TopologyError names the
    field, the value and what GKE offers instead."""
    if accelerator in CUBE_MACHINE_TYPES:
        return _cube(accelerator, topology, machine_type)
    shapes = TABLE.get(accelerator)
    if shapes is None:
        raise TopologyError(f"accelerator.tpuAccelerator: unknown TPU accelerator {accelerator!r}; "
                            f"known: {', '.join(sorted([*TABLE, *CUBE_MACHINE_TYPES]))}")
    rows = [s for s in shapes if s.topology == topology]
    if not rows:
        raise TopologyError(f"accelerator.tpuTopology: {topology!r} is not a {accelerator} "
                            f"topology GKE offers; valid: {_topologies(shapes)}")
    if machine_type is None:
        row = min(rows, key=lambda s: s.vms)
    else:
        matching = [s for s in rows if s.machine_type == machine_type]
        if not matching:
            raise TopologyError(f"accelerator.tpuMachineType: {machine_type!r} does not offer "
                                f"{accelerator} {topology}; valid: "
                                f"{', '.join(s.machine_type for s in rows)}")
        row = matching[0]
    return Slice(GENERATIONS[accelerator], row.chips, row.vms, row.chips // row.vms, row.machine_type,
                 ambiguous=len(rows) > 1)


def _cube(accelerator: str, topology: str, machine_type: str | None) -> Slice:
    """A v4 or v5p slice by CUBE_RULE."""
    dims = topology.split("x")
    chips = math.prod(int(d) for d in dims) if all(d.isdigit() for d in dims) else 0
    if len(dims) != 3 or chips == 0 or chips % CUBE_VM_CHIPS:
        raise TopologyError(f"accelerator.tpuTopology: {topology!r} is not a {accelerator} "
                            f"topology GKE offers; valid: {CUBE_RULE}")
    expected = CUBE_MACHINE_TYPES[accelerator]
    if machine_type not in (None, expected):
        raise TopologyError(f"accelerator.tpuMachineType: {machine_type!r} does not offer "
                            f"{accelerator} {topology}; valid: {expected}")
    return Slice(GENERATIONS[accelerator], chips, chips // CUBE_VM_CHIPS, CUBE_VM_CHIPS, expected)


def check_count(s: Slice, count: int, topology: str) -> None:
    """A pod of a multi-host slice requests every chip of its host; a single-host slice's
    pod may take some of them (accelerator.count chips)."""
    if s.multi_host and count != s.chips_per_host:
        raise TopologyError(f"accelerator.count: {count} does not fit topology {topology}: a "
                            f"{s.generation} slice of {s.chips} chips has {s.chips_per_host} "
                            f"chips on each of its {s.hosts} hosts; set count: {s.chips_per_host}")
    if not s.multi_host and not 1 <= count <= s.chips:
        raise TopologyError(f"accelerator.count: {count} does not fit topology {topology}: "
                            f"its one host has {s.chips} chips")
