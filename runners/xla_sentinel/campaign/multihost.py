"""The process layout as a differential axis (docs/spmd.md, "Programs that span hosts").

With `accelerator.hosts: N` a campaign has one more target, named for its layout
(`hosts2x2`: N processes of D devices, D = generator.devices / N), with the options of the
campaign's first target, its twin: the same partitioned module on one process of N x D
devices. Its worker is a HostGroup (worker/hosts.py) shared by every slot. A program not
partitioned over exactly N x D devices (an unsharded one) is skipped on it.

It is judged as every target is, against the float64 truth within the noise model; and,
where IEEE 754 fixes an output bitwise (the oracle's OutputInfo.bitwise: integers that
depend on no float, data movement, exact ops; the collectives that carry them are exact
whatever the reduction order), against its twin bit for bit: a difference there is a
`mismatch` with reason `layout`, naming both layouts.

On a multi-host TPU slice (cluster/pod.py puts the platform in the driver's environment,
LAYOUT_PLATFORM_ENV) the layout is the slice's: `slice2x4` is its 2 hosts (VMs) of 4 chips
each, one host process per VM (Layout.platform `tpu`). There the twin is not the same
module on one process of N x D TPU devices: no TPU host has the chips of the whole slice.
It is the campaign's first target on pod 0 (the one-process targets of the driver's pod,
on that pod's own chips); a program partitioned over more devices than pod 0 has fails
there (no results), and the layout's target is then judged against the float64 reference
alone, as every target is.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from xla_sentinel.core.model import Verdict
from xla_sentinel.core.names import FLOATS
from xla_sentinel.core.program import Program, save_summary
from xla_sentinel.core.stablehlo import partitions
from xla_sentinel.judge import oracle
from xla_sentinel.judge.assess import Assessor, Judging, Outcome, Slot
from xla_sentinel.judge.targets import Target
from xla_sentinel.spec.campaign import CampaignSpec
from xla_sentinel.worker.client import Worker
from xla_sentinel.worker.host_link import HOST_PLATFORMS, RemoteHosts
from xla_sentinel.worker.hosts import HostGroup, Layout

# The platform of the layout's host processes, in the driver's environment: set by a pod of
# a multi-host group (cluster/pod.py driver_environment: `tpu` on a TPU slice); unset, `cpu`
# (a local run, a CPU or GPU campaign's pods).
LAYOUT_PLATFORM_ENV = "XLA_SENTINEL_LAYOUT_PLATFORM"


def layout(spec: CampaignSpec, environ: Mapping[str, str] | None = None) -> Layout | None:
    """The campaign's process layout, None for one host; its platform from `environ`
    (LAYOUT_PLATFORM_ENV; os.environ by default)."""
    hosts = spec.accelerator.hosts
    if hosts <= 1:
        return None
    env = os.environ if environ is None else environ
    platform = env.get(LAYOUT_PLATFORM_ENV) or "cpu"
    if platform not in HOST_PLATFORMS:
        raise ValueError(f"{LAYOUT_PLATFORM_ENV}={platform!r}: not one of {', '.join(HOST_PLATFORMS)}")
    return Layout(hosts, spec.generator.device_count() // hosts, platform)


def _exact(info: oracle.OutputInfo) -> bool:
    """Whether an output must be the same bits on every layout."""
    return info.bitwise or (info.dtype not in FLOATS and not info.tainted)


def layout_disagreement(twin: Sequence[np.ndarray], hosts: Sequence[np.ndarray],
                        infos: Sequence[oracle.OutputInfo], twin_name: str, lay: Layout,
                        ) -> oracle.Judgement | None:
    """The first exact output on which the multi-host run differs from its one-process
    twin, as a `mismatch` (reason `layout`); None where they agree."""
    for i, (x, y, info) in enumerate(zip(twin, hosts, infos, strict=True)):
        if not _exact(info):
            continue
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return oracle.Judgement(Verdict.MISMATCH, i, {
                "reason": "layout", "layout": lay.describe(), "against": twin_name,
                "expected_shape": list(x.shape), "actual_shape": list(y.shape)})
        # Equal as the oracle's bitwise rule reads it (oracle.same_elements): the sign of a
        # zero and a subnormal flushed or kept are XLA's to choose, and a clean 2-host run of
        # 1,000 programs had two f16 outputs +0.0 on one process and -0.0 on two.
        differ = ~oracle.same_elements(x, y, info.dtype)
        if differ.any():
            where = tuple(int(k) for k in np.argwhere(differ)[0])
            return oracle.Judgement(Verdict.MISMATCH, i, {
                "reason": "layout", "layout": lay.describe(), "against": twin_name,
                "dtype": info.dtype, "elements": int(differ.sum()), "where": list(where),
                "expected": x[where].item(), "actual": y[where].item()})
    return None


class LayoutAssessor(Assessor):
    """An Assessor with the layout's target: run only on programs partitioned over the
    group's devices, and compared with its twin where outputs are exact."""

    lay: Layout
    target: Target
    twin: str

    @classmethod
    def around(cls, base: Assessor, lay: Layout) -> LayoutAssessor:
        """`base`, with the layout's target after its own (the twin: its first)."""
        new = cls.__new__(cls)
        new.__dict__.update(base.__dict__)  # the same settings, stop event included
        new.lay = lay
        new.twin = base.targets[0].name
        new.target = Target(lay.name, dict(base.targets[0].options), lay.platform)
        new.targets = [*base.targets, new.target]
        return new

    def _run(self, slot: Slot, t: Target, program: Program, want_hlo: bool = False,
             repeat: bool = False) -> Outcome:
        if t.name == self.lay.name:
            module = program.module
            n = partitions(module) if isinstance(module, str) else 1
            if n != self.lay.devices:
                return Outcome(skipped=f"partitioned over {n} devices, the layout has {self.lay.devices}")
        return super()._run(slot, t, program, want_hlo, repeat)

    def _judge_targets(self, judging: Judging, broken: dict[str, tuple[int, dict[str, Any]]],
                       ) -> list[tuple[Target, oracle.Judgement]]:
        suspects = super()._judge_targets(judging, broken)
        name = self.lay.name
        flagged = {t.name for t, _ in suspects} | set(broken)
        if name in judging.results and self.twin in judging.results and name not in flagged:
            j = layout_disagreement(judging.results[self.twin], judging.results[name], judging.infos,
                                    self.twin, self.lay)
            if j is not None:
                suspects.append((self.target, j))
        return suspects


class MultiHost:
    """What a campaign of `accelerator.hosts > 1` adds to the engine: its layout's target,
    the assessor that knows it, and the one host group its slots share."""

    def __init__(self, lay: Layout, plugins: Sequence[str]) -> None:
        self.layout = lay
        self.plugins = list(plugins)
        self.group: HostGroup | None = None
        # The campaign's stop (the assessor's): set when a remote host's pod is gone.
        self.stop: threading.Event | None = None

    @classmethod
    def of(cls, spec: CampaignSpec, plugins: Sequence[str]) -> MultiHost | None:
        lay = layout(spec)
        return None if lay is None else cls(lay, plugins)

    def assessor(self, base: Assessor) -> LayoutAssessor:
        self.stop = base.stop
        return LayoutAssessor.around(base, self.layout)

    def add_to_summary(self, out: Path, summary: dict[str, Any]) -> None:
        """summary.json's `multihost`: the layout, the programs that ran on it, those whose
        optimized module moves data between hosts, and the group's restarts."""
        group = self.group
        summary["multihost"] = {
            "layout": self.layout.name, "hosts": self.layout.hosts,
            "devices_per_host": self.layout.devices_per_host,
            "programs": group.programs if group else 0,
            "cross_host_programs": group.cross_host_programs if group else 0,
            "group_restarts": group.restarts if group else 0}
        save_summary(out, summary)

    def attach(self, slots: Sequence[Slot], logs: Any) -> HostGroup:
        """The group, as every slot's worker of the layout's target (one program at a
        time on it: its call holds a lock). A slot's close closes it (HostGroup.close
        is idempotent)."""
        # In a cluster, hosts 1..N-1 are other pods of the slice (cluster/pod.py puts
        # where in the environment); a lost one stops the campaign: JobSet restarts the
        # slice, and the program in flight is redone on resume, not recorded as a hang.
        remote = RemoteHosts.from_environ(os.environ)
        stop = self.stop
        self.group = HostGroup(self.layout, self.plugins, logs, remote=remote,
                               on_lost=stop.set if remote is not None and stop is not None else None)
        for s in slots:
            # The group serves the part of a Worker's interface a slot uses (call, start,
            # close, name, log_path, restarts, recycles): duck-typed, not a subclass.
            s.targets[self.layout.name] = cast(Worker, self.group)
        return self.group
