"""TPU slice arithmetic for GKE: from the node labels a campaign names (accelerator and
topology) to chips, hosts and chips per host, with one table row per TPU generation.

A slice larger than one host (v5e or v6e 4x4: 16 chips on 4 hosts) runs as one Indexed
Job of `hosts` pods, one per host, each requesting every chip of its host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


class TopologyError(ValueError):
    """A TPU accelerator, topology or chip count GKE cannot schedule."""


@dataclass(frozen=True)
class Generation:
    name: str
    dims: int  # 2 (v5e, v6e: AxB) or 3 (v4, v5p: AxBxC)
    single_host_max: int  # the most chips one host of a single-host slice has
    chips_per_host: int  # chips per host in a multi-host slice
    multi_host: bool = True


# Keyed by the node label cloud.google.com/gke-tpu-accelerator (GKE TPU documentation).
GENERATIONS: dict[str, Generation] = {
    "tpu-v4-podslice": Generation("v4", dims=3, single_host_max=4, chips_per_host=4),
    "tpu-v5p-slice": Generation("v5p", dims=3, single_host_max=4, chips_per_host=4),
    "tpu-v5-lite-podslice": Generation("v5e", dims=2, single_host_max=8, chips_per_host=4),
    "tpu-v5-lite-device": Generation("v5e", dims=2, single_host_max=8, chips_per_host=8,
                                     multi_host=False),
    "tpu-v6e-slice": Generation("v6e", dims=2, single_host_max=8, chips_per_host=4),
}


@dataclass(frozen=True)
class Slice:
    generation: str
    chips: int
    hosts: int
    chips_per_host: int

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1


def slice_of(accelerator: str, topology: str) -> Slice:
    """Chips, hosts and chips per host of a slice; TopologyError names what is wrong."""
    gen = GENERATIONS.get(accelerator)
    if gen is None:
        raise TopologyError(f"accelerator.tpuAccelerator: unknown TPU accelerator {accelerator!r}; "
                            f"known: {', '.join(sorted(GENERATIONS))}")
    try:
        dims = [int(d) for d in topology.split("x")]
    except ValueError:
        raise TopologyError(f"accelerator.tpuTopology: {topology!r} is not AxB or AxBxC") from None
    if len(dims) != gen.dims or min(dims) < 1:
        shape = "AxB" if gen.dims == 2 else "AxBxC"
        raise TopologyError(f"accelerator.tpuTopology: {gen.name} topologies are {shape}, "
                            f"not {topology!r}")
    chips = math.prod(dims)
    if chips <= gen.single_host_max:
        return Slice(gen.name, chips, 1, chips)
    if not gen.multi_host:
        raise TopologyError(f"accelerator.tpuTopology: {accelerator} is single-host "
                            f"(at most {gen.single_host_max} chips), not {topology}")
    if chips % gen.chips_per_host:
        raise TopologyError(f"accelerator.tpuTopology: {topology} ({chips} chips) is not a whole "
                            f"number of {gen.name} hosts of {gen.chips_per_host} chips")
    return Slice(gen.name, chips, chips // gen.chips_per_host, gen.chips_per_host)


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
