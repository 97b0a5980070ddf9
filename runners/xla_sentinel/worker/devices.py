"""Who opens an accelerator: one process per host owns each one (docs/architecture.md,
"Accelerators: one owner per device").

libtpu lets one process per host hold the chips (the others fail with "Device or resource
busy" or fall back to the CPU), and jax preallocates 75% of a GPU's memory in every
process that opens it. So every target on an accelerator platform runs in one worker
process per platform, the platform's owner, shared by all slots of the campaign (their
requests queue for it, judge/assess.py `device_owners`); CPU targets and every reference
keep one process per slot and never open an accelerator.

Pure functions of the platform and the environment, no jax: the coordinator decides with
them which process a target's programs go to, and the worker (server.py) which
environment it sets before jax creates a backend.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

# The platforms a process opens exclusively: everything jax runs on that is not the host's
# CPU (spec PLATFORMS names cpu, gpu, tpu; jax's own names for GPUs are cuda and rocm).
ACCELERATORS = frozenset({"tpu", "gpu", "cuda", "rocm"})

# Test-only: platforms (comma-separated) treated as exclusive devices on top of
# ACCELERATORS. This machine has no accelerator, so tests set it to `cpu` to run the
# owner path (one process for a platform's targets, fed by every slot) for real.
TEST_EXCLUSIVE_ENV = "XLA_SENTINEL_TEST_EXCLUSIVE_PLATFORMS"

ProcessKind = Literal["device_owner", "per_slot"]


def exclusive_platforms(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """ACCELERATORS, plus the test knob's platforms where it is set."""
    env = os.environ if environ is None else environ
    extra = {p.strip() for p in env.get(TEST_EXCLUSIVE_ENV, "").split(",") if p.strip()}
    return ACCELERATORS | extra


def process_kind(platform: str | None, exclusive: frozenset[str] | None = None) -> ProcessKind:
    """Which process a target of `platform` runs in: the platform's one owner per host
    (`device_owner`), or a worker of its own in each slot (`per_slot`: the CPU, and None,
    which is what references and program generation run on)."""
    if platform is not None and not isinstance(platform, str):
        raise TypeError(f"platform: expected a name such as cpu or tpu, got {platform!r}")
    if platform is None or platform == "":
        return "per_slot"
    return "device_owner" if platform in (exclusive if exclusive is not None else exclusive_platforms()) \
        else "per_slot"


# Device visibility variables an accelerator's runtime reads when it starts: empty means
# no device. libtpu's own (TPU_VISIBLE_CHIPS) is left alone: its empty value is not
# documented as "no chip", and libtpu is loaded only when jax creates a TPU backend, which
# jax_platforms=cpu rules out.
_HIDE_DEVICES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def held_off_environment() -> dict[str, str]:
    """What a worker that owns no accelerator sets before jax creates a backend: the CPU
    only (JAX_PLATFORMS, also for anything it starts; a pod's says tpu or cuda,
    operator desired.py) and no GPU visible, so it cannot open one by accident."""
    return {"JAX_PLATFORMS": "cpu", **dict.fromkeys(_HIDE_DEVICES, "")}


# The variables with which an operator sizes an owner's GPU memory themselves
# (jax's GPU memory allocation settings); either one leaves the owner's default alone.
GPU_MEMORY_SETTINGS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                       "XLA_PYTHON_CLIENT_ALLOCATOR")


def owner_environment(platform: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the owner of `platform` sets before jax creates its backend.

    On a GPU: no preallocation (XLA_PYTHON_CLIENT_PREALLOCATE=false), unless the
    environment sizes the memory itself (GPU_MEMORY_SETTINGS; MEM_FRACTION=.3 caps the
    preallocation instead). jax's default takes 75% of the GPU at start, so nothing else
    could share the device: not an owner restarted after a crash or hang while the
    driver still frees its predecessor's memory, not a bisector or fix-verification
    Job, another pod on a time-sliced or MPS-shared GPU, or a profiler. Memory then
    grows as programs need it (the owner runs one program at a time). TPU and others: no
    setting (libtpu holds the chips whole; the one-owner rule is what lets it start)."""
    env = os.environ if environ is None else environ
    if process_kind(platform, ACCELERATORS) != "device_owner":
        return {}
    if platform in ("gpu", "cuda", "rocm") and not any(k in env for k in GPU_MEMORY_SETTINGS):
        return {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    return {}
