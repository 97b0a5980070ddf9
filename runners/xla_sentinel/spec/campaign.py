"""The campaign schema: one spec for a local `run` and for the FuzzCampaign resource.

Pure Python (no jax), so the operator validates specs with the same code the engine
uses. Every error names the offending field by its path (``spec.budget.programs``).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from xla_sentinel.core.errors import UserError
from xla_sentinel.core.model import Reference, Verdict
from xla_sentinel.core.names import DTYPES, FLOATS
from xla_sentinel.core.versions import VERSION_PATTERN, parse_version

API_VERSION = "xlasentinel.dev/v1alpha1"
# f64_numpy (numpy, no XLA) is the primary float64 reference where listed; the XLA-based
# float64 references (f64_eager, f64_jit) then run as cross-checks only: on a program a
# target fails, on every crossCheckEvery-th program, and where numpy fell back to XLA
# (docs/architecture.md, "References").
REFERENCES = tuple(r.value for r in Reference)
DEFAULT_REFERENCES = tuple(r.value for r in Reference if r is not Reference.INTERPRETER)
PLATFORMS = ("cpu", "gpu", "tpu")
# Target presets: a target named by one of these needs no options (judge/targets.py
# resolves them, xla/compiler.py compiles with them). Here, in the schema, because the
# operator validates names without jax.
PRESETS: dict[str, dict[str, Any]] = {
    "default": {},
    "O0": {"xla_backend_optimization_level": 0},
    "no_algsimp_fusion": {"xla_disable_hlo_passes": "algsimp,fusion"},
    "no_fusion": {"xla_disable_hlo_passes": "fusion"},
    "no_fusion_emitters": {"xla_cpu_use_fusion_emitters": False},
    "no_ynn": {"xla_cpu_experimental_ynn_fusion_type": ""},
    "fast_math": {"xla_cpu_enable_fast_math": True},
}
# SPMD partitioners a plan can lower with, and the most devices a program may use (the
# virtual host devices every worker process has: runners/xla_sentinel/worker/client.py).
PARTITIONERS = ("shardy", "gspmd")
MAX_DEVICES = 8
# The generator's op names (runners/xla_sentinel/ops/table.py owns the ops themselves, but the
# operator validates specs without the ops package; tests/fuzz/test_spec.py fails when the
# two lists part).
OP_NAMES = (
    "abs", "add", "and", "argmax", "argmin", "atan2", "atanh", "bitcast_convert",
    "broadcast_in_dim", "cbrt", "ceil", "clamp", "clz", "compare_eq", "compare_ge",
    "compare_gt", "compare_le", "compare_lt", "compare_ne", "concatenate", "cond",
    "conv_general_dilated", "convert", "cos", "cummax", "cummin", "cumprod", "cumsum",
    "digamma", "div", "dot_general", "dynamic_slice", "dynamic_update_slice", "erf", "erf_inv",
    "exp", "expand_dims", "expm1", "floor", "fori_loop", "gather", "iota", "is_finite",
    "lgamma", "log", "log1p", "logistic", "max", "min", "mul", "neg", "nextafter", "not", "or",
    "pad", "population_count", "pow", "reduce_and", "reduce_max", "reduce_min", "reduce_or",
    "reduce_precision", "reduce_prod", "reduce_sum", "reduce_window", "rem", "reshape", "rev",
    "round", "round_away", "rsqrt", "scan", "scatter", "select", "select_compare",
    "select_extremum", "shift_left", "shift_right_arithmetic", "shift_right_logical", "sign",
    "sin", "sinh", "slice", "sort", "sqrt", "squeeze", "sub", "tan", "tanh", "top_k",
    "transpose", "while_loop", "xor",
    # Program shapes from real bugs (SHAPE_FAMILIES, drawn when generator.shapes names them).
    "attention", "batched_matvec", "conv_acc", "dot_general_acc", "dynamic_slice_idx",
    "dynamic_update_slice_idx", "gather_idx", "layer_norm", "loop_dus", "loop_scatter_add",
    "loop_shift", "mlp_block", "scatter_add_idx", "softmax", "topk_routing",
)
# Program shapes where real XLA bugs live (issue 13): op families of runners/xla_sentinel/ops/entries
# (`OpDef.family`), and the multi-output and buffers (in-place updates, donation) openings of
# runners/xla_sentinel/programs/generator.py.
SHAPE_FAMILIES = ("loops", "indices", "mixed_precision", "templates", "multi_output", "buffers")
# Generator versions (GeneratorSpec.version, docs/detection.md "Defaults"). 1: the plain
# generator of issues 1-27; 2: shape families, several devices and sizes past XLA:CPU's kernel
# thresholds by default. A version's programs for a seed never change once released.
GENERATOR_VERSIONS = (1, 2)
GENERATOR_VERSION = GENERATOR_VERSIONS[-1]
# Version 2's default weight of each family against a plain op (1): each family op is drawn
# `weight` times as often as a plain one, an opening with `weight` times its share
# (generator.MULTI_OUTPUT_P, BUFFERS_P). Loops and templates compile slowest, the buffers
# opening's donated inputs cost a second run per target, and f64_numpy falls back to the XLA
# float64 references on the indices family's s16/s64 converts: they weigh less (issue 28's
# throughput measurement, docs/detection.md "Defaults").
DEFAULT_FAMILY_WEIGHTS = {"loops": 0.5, "indices": 0.5, "mixed_precision": 1.0, "templates": 0.5,
                          "multi_output": 0.5, "buffers": 0.15}
# Devices and sharded share when `devices`/`sharded` are unset, by version. CPU workers always
# have the virtual host devices; a partitioned program costs about 1.5x (docs/spmd.md,
# "Speed") and more when its references disagree, so version 2 partitions 15 % of them.
DEVICES_DEFAULT = {1: 1, 2: 4}
SHARDED_DEFAULT = {1: 0.5, 2: 0.15}
MAX_RANK = 8
# Seeds and counts travel as int64 (the FuzzCampaign resource, SQLite).
INT64_MAX = 2**63 - 1
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]+$")
# What Kubernetes requires of metadata.name (a DNS-1123 subdomain).
K8S_NAME_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
# A DNS-1123 label (a Kueue LocalQueue name is one, and so is a label value the operator
# sets from it): the CRD's queueName pattern, checked here as the API server checks it.
K8S_LABEL_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
TPU_TOPOLOGY_PATTERN = re.compile(r"^[0-9]+(x[0-9]+){1,2}$")
BUCKET_URI_PATTERN = re.compile(r"^(gs|s3)://.+")
PLUGIN_REF_PATTERN = re.compile(r"^[^:]+\.py(:[A-Za-z_][A-Za-z0-9_]*)?$")
# Plain strings (not the enums): specs are dumped as YAML, which knows no str subclasses.
VERDICTS = tuple(v.value for v in Verdict)


class SpecError(UserError, ValueError):
    """A campaign spec is invalid; the message names the field and what was wrong."""


def _field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def show(value: Any, limit: int = 60) -> str:
    """A value as it may appear in a one-line message: repr, cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def key_path(path: str, key: Any) -> str:
    """`path.key`, with a key that is not a plain name quoted (no newline reaches a message)."""
    if isinstance(key, str) and re.fullmatch(r"[A-Za-z0-9_./-]+", key):
        return f"{path}.{key}"
    return f"{path}[{show(key, 40)}]"


def closest(value: Any, known: typing.Iterable[str]) -> str | None:
    """The known name `value` was probably meant to be (a typo, or another case)."""
    if not isinstance(value, str):
        return None
    known = list(known)
    by_lower = {k.lower(): k for k in known}
    if value.lower() in by_lower:
        return by_lower[value.lower()]
    match = difflib.get_close_matches(value.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[match[0]] if match else None


def unknown_name(value: Any, known: typing.Sequence[str], what: str) -> str:
    """The message for a name outside a known set, with a suggestion where one is close."""
    guess = closest(value, known)
    hint = f"did you mean {guess!r}?" if guess else f"known: {', '.join(known)}"
    return f"unknown {what} {show(value)}; {hint}"


def _require_known(value: Any, known: typing.Sequence[str], path: str, what: str) -> None:
    _require(value in known, path, unknown_name(value, known, what))


def _require_finite(value: float, path: str) -> None:
    _require(math.isfinite(value), path, f"must be a finite number, got {show(value)}")


def _require_names(values: list[str], path: str, what: str) -> None:
    for i, v in enumerate(values):
        _require(bool(v.strip()), f"{path}[{i}]", f"{what} must not be empty")
        _require("\n" not in v and "\0" not in v, f"{path}[{i}]", f"{what} must be one line")


def _require_plain(value: Any, path: str) -> None:
    """A free-form field (resources, tolerations) must hold what JSON and the API can carry."""
    if isinstance(value, dict):
        for k, v in value.items():
            _require(isinstance(k, str), key_path(path, k), "keys must be strings")
            _require_plain(v, key_path(path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _require_plain(v, f"{path}[{i}]")
    elif isinstance(value, float):
        _require_finite(value, path)
    else:
        _require(value is None or isinstance(value, str | int | bool), path,
                 f"must be a string, number, boolean, list or mapping, got {type(value).__name__}")


@dataclass(frozen=True)
class GeneratorSpec:
    """How synthetic programs are drawn."""

    minOps: int = 1
    maxOps: int = 24
    dtypes: list[str] = field(default_factory=lambda: ["f32", "bf16", "f16", "s32", "u8", "bool"])
    # Up to MAX_RANK: ranks above 5 draw mostly size-1 dimensions (the rank 7-8 crashes).
    maxRank: int = 4
    maxDimSize: int = 48
    # Fraction of programs whose inputs come from the special-value pool
    # (ties, signed zeros, subnormals, NaN/Inf, out-of-range indices).
    specialValues: float = 0.2
    ops: list[str] = field(default_factory=list)
    excludeOps: list[str] = field(default_factory=list)
    # Coverage-guided generation (runners/xla_sentinel/campaign/guide.py): steer towards rarely exercised ops,
    # op pairs, dtypes and fusion kinds, and towards neighbours of near misses.
    guided: bool = False
    # Program shapes from real bugs to draw (SHAPE_FAMILIES). Unset: the version's default
    # (version 2: every family, weighted by DEFAULT_FAMILY_WEIGHTS; version 1: none); `[]`
    # draws none.
    shapes: list[str] | None = None
    # SPMD (runners/xla_sentinel/programs/spmd.py): programs run on `devices` devices (virtual host devices on
    # the CPU), and a `sharded` share of them is partitioned over a random mesh by one of
    # `partitioners`, drawn per program. Unset: the version's default (DEVICES_DEFAULT,
    # SHARDED_DEFAULT; resolve_generator lowers devices to what an accelerator target has).
    devices: int | None = None
    sharded: float | None = None
    partitioners: list[str] = field(default_factory=lambda: list(PARTITIONERS))
    # Which generator draws the programs (docs/detection.md, "Defaults"): the newest by
    # default; `version: 1` keeps the programs a seed gave before issue 28 (no shape
    # families, one device, no sizes past XLA:CPU's kernel thresholds).
    version: int = GENERATOR_VERSION

    def families(self) -> tuple[str, ...]:
        """The shape families drawn: `shapes` when set, else the version's default."""
        if self.shapes is not None:
            return tuple(self.shapes)
        return tuple(DEFAULT_FAMILY_WEIGHTS) if self.version >= 2 else ()

    def family_weight(self, family: str) -> float:
        """How much a family's ops and opening weigh against the plain ops (1): named
        families weigh 1 (their programs stay those of version 1), default ones less."""
        if family not in self.families():
            return 0.0
        return 1.0 if self.shapes is not None else DEFAULT_FAMILY_WEIGHTS[family]

    def device_count(self) -> int:
        if self.devices is not None:
            return self.devices
        return DEVICES_DEFAULT[self.version]

    def sharded_share(self) -> float:
        if self.sharded is not None:
            return self.sharded
        return SHARDED_DEFAULT[self.version]

    def check(self, path: str) -> None:
        # maxOps first: `maxOps: 0` is the field at fault, not minOps.
        _require(1 <= self.maxOps <= 2000, f"{path}.maxOps", "must be >= 1 and <= 2000")
        _require(1 <= self.minOps <= self.maxOps, f"{path}.minOps", "must be >= 1 and <= maxOps")
        _require(0 <= self.maxRank <= MAX_RANK, f"{path}.maxRank", f"must be between 0 and {MAX_RANK}")
        _require(1 <= self.maxDimSize <= 4096, f"{path}.maxDimSize", "must be between 1 and 4096")
        _require(0.0 <= self.specialValues <= 1.0, f"{path}.specialValues", "must be in [0, 1]")
        _require(bool(self.dtypes), f"{path}.dtypes", "must name at least one dtype")
        _require(self.version in GENERATOR_VERSIONS, f"{path}.version",
                 f"must be one of {', '.join(map(str, GENERATOR_VERSIONS))}, got {show(self.version)}")
        _require(1 <= self.device_count() <= MAX_DEVICES, f"{path}.devices",
                 f"must be between 1 and {MAX_DEVICES}")
        _require(0.0 <= self.sharded_share() <= 1.0, f"{path}.sharded", "must be in [0, 1]")
        _require(bool(self.partitioners), f"{path}.partitioners", "must name at least one partitioner")
        for i, p in enumerate(self.partitioners):
            _require_known(p, PARTITIONERS, f"{path}.partitioners[{i}]", "partitioner")
        for i, d in enumerate(self.dtypes):
            _require_known(d, DTYPES, f"{path}.dtypes[{i}]", "dtype")
        for i, f in enumerate(self.shapes or ()):
            _require_known(f, SHAPE_FAMILIES, f"{path}.shapes[{i}]", "shape family")
        for name in ("ops", "excludeOps"):
            for i, op in enumerate(getattr(self, name)):
                _require_known(op, OP_NAMES, f"{path}.{name}[{i}]", "op")
        _require(not self.ops or bool(set(self.ops) - set(self.excludeOps)), f"{path}.excludeOps",
                 "excludes every op that ops allows")


@dataclass(frozen=True)
class TargetSpec:
    """One XLA configuration under test: a preset by name, or a name with options."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    platform: str = "cpu"
    # Cluster only: the runner image of another jaxlib for cross-version targets.
    image: str | None = None
    # Another jaxlib release (docs/versions.md): locally the worker runs in the environment
    # `make version-envs` created for it; with `image`, the jaxlib that image holds.
    jaxlib: str | None = None
    # Local only: the interpreter of another Python environment (its jaxlib is whatever
    # that environment holds; the worker reports it).
    python: str | None = None

    def says_what_it_tests(self, accelerator: str) -> bool:
        """A preset, or a custom name with options, another jaxlib (image, jaxlib, python)
        or another platform than the campaign's: anything else is a misspelled preset that
        would quietly test the default configuration."""
        return (self.name in PRESETS or bool(self.options) or self.image is not None
                or self.jaxlib is not None or self.python is not None
                or self.platform != accelerator)

    def check(self, path: str) -> None:
        _require(bool(NAME_PATTERN.match(self.name)), f"{path}.name",
                 f"must be a non-empty name of letters, digits, '-' and '_', got {show(self.name)}")
        _require_known(self.platform, PLATFORMS, f"{path}.platform", "platform")
        for k, v in self.options.items():
            _require(k.startswith("xla_") and bool(NAME_PATTERN.match(k)), key_path(f"{path}.options", k),
                     "XLA option names start with 'xla_' (then letters, digits, '-', '_')")
            _require(isinstance(v, str | int | float | bool), key_path(f"{path}.options", k),
                     "must be a string, number or boolean")
            if isinstance(v, float):
                _require_finite(v, key_path(f"{path}.options", k))
        if self.image is not None:
            _require(bool(self.image.strip()), f"{path}.image", "must not be empty when set")
        if self.jaxlib is not None:
            _require(bool(VERSION_PATTERN.match(self.jaxlib)), f"{path}.jaxlib",
                     f"must be a released jaxlib version like 0.10.1, got {show(self.jaxlib)}")
        if self.python is not None:
            _require(bool(self.python.strip()), f"{path}.python", "must not be empty when set")


@dataclass(frozen=True)
class ToleranceSpec:
    """Oracle factor k for one dtype: flag when error > k * max(best other, noise, u)."""

    k: float

    def check(self, path: str) -> None:
        _require_finite(self.k, f"{path}.k")
        _require(self.k >= 1.0, f"{path}.k", "must be >= 1")


@dataclass(frozen=True)
class BudgetSpec:
    programs: int | None = None
    seconds: float | None = None
    continuous: bool = False

    def check(self, path: str) -> None:
        if self.programs is not None:
            _require(1 <= self.programs <= INT64_MAX, f"{path}.programs", "must be >= 1")
        if self.seconds is not None:
            _require_finite(self.seconds, f"{path}.seconds")
            _require(self.seconds > 0, f"{path}.seconds", "must be > 0")
        _require(self.continuous or self.programs is not None or self.seconds is not None,
                 path, "set programs, seconds or continuous: true")


@dataclass(frozen=True)
class TimeoutSpec:
    # A target that takes longer than this on one program is a `hang` finding.
    programSeconds: float = 120.0

    def check(self, path: str) -> None:
        _require_finite(self.programSeconds, f"{path}.programSeconds")
        _require(self.programSeconds > 0, f"{path}.programSeconds", "must be > 0")


# Mutations of each trace (runners/xla_sentinel/programs/mutate.py owns them; here for the operator's checks).
MUTATION_KINDS = ("dtype", "special_values", "swap_op", "round_trip", "perturb_constant", "batch", "donation",
                  "sharding")


@dataclass(frozen=True)
class MutationSpec:
    # Mutants per trace unit, on top of the trace itself; kinds taken in turn.
    perTrace: int = 0
    kinds: list[str] = field(default_factory=lambda: list(MUTATION_KINDS))

    def check(self, path: str) -> None:
        _require(0 <= self.perTrace <= 10_000, f"{path}.perTrace", "must be between 0 and 10000")
        _require(bool(self.kinds), f"{path}.kinds", "must name at least one mutation kind")
        for i, kind in enumerate(self.kinds):
            _require_known(kind, MUTATION_KINDS, f"{path}.kinds[{i}]", "mutation kind")


@dataclass(frozen=True)
class BisectSpec:
    enabled: bool = True
    # Bisect the first N findings of each new candidate signature.
    perSignature: int = 1
    reduce: bool = True
    # "A..B": each bisection also finds the first jaxlib release in A..B that shows the
    # finding (`bisect --versions`, docs/versions.md), in the environments of the runner
    # image (a cluster: an image built with them, docs/operator.md).
    versions: str | None = None

    def check(self, path: str) -> None:
        _require(0 <= self.perSignature <= INT64_MAX, f"{path}.perSignature", "must be >= 0")
        if self.versions is not None:
            _require(len(self.versions) <= VERSION_RANGE_MAX, f"{path}.versions",
                     f"must be at most {VERSION_RANGE_MAX} characters")
            first, sep, last = self.versions.partition("..")
            _require(bool(sep) and all(VERSION_PATTERN.match(v) for v in (first, last)),
                     f"{path}.versions", "must be a range of released jaxlib versions "
                     f"OLDEST..NEWEST like 0.9.0..0.10.2, got {show(self.versions)}")
            _require(parse_version(first) < parse_version(last), f"{path}.versions",
                     f"{first} is not older than {last}")


# The longest `bisect.versions` range (the CRD's maxLength: it bounds its CEL rule's cost).
VERSION_RANGE_MAX = 64


@dataclass(frozen=True)
class SecretKeyRef:
    name: str
    key: str = "url"

    def check(self, path: str) -> None:
        _require(bool(self.name), f"{path}.name", "must not be empty")
        _require(bool(self.key), f"{path}.key", "must not be empty")


@dataclass(frozen=True)
class AlertSpec:
    teams: list[str] = field(default_factory=list)
    webhookSecretRef: SecretKeyRef | None = None

    def check(self, path: str) -> None:
        _require_names(self.teams, f"{path}.teams", "a team name")
        if self.webhookSecretRef:
            self.webhookSecretRef.check(f"{path}.webhookSecretRef")


@dataclass(frozen=True)
class ArtifactSpec:
    pvc: str | None = None
    bucketURI: str | None = None

    def check(self, path: str) -> None:
        _require(self.pvc is None or self.bucketURI is None, path, "set pvc or bucketURI, not both")
        if self.pvc is not None:
            _require(bool(self.pvc.strip()), f"{path}.pvc", "must not be empty when set")
        if self.bucketURI is not None:
            _require(bool(BUCKET_URI_PATTERN.match(self.bucketURI)), f"{path}.bucketURI",
                     f"must be gs://... or s3://..., got {show(self.bucketURI)}")


# The agent swarm (FuzzCampaign spec.agents, docs/agents.md "Running a swarm"): the roles an
# agent takes work of (agents/tasks.py queues tasks by these), the model providers whose
# credential the operator hands an agent pod, and the variable each provider reads it from.
AGENT_ROLES = ("stress", "reproduce", "fix")
# openai: the Responses API; openai-chat: Chat Completions, what most OpenAI-compatible
# servers (vLLM, llama.cpp, LiteLLM) serve.
AGENT_CREDENTIAL_ENV = {"openai": "OPENAI_API_KEY", "openai-chat": "OPENAI_API_KEY",
                        "anthropic": "ANTHROPIC_API_KEY", "google": "GOOGLE_API_KEY"}
# google-cloud (Vertex AI) authenticates as the pod's cloud identity (Workload Identity): no
# Secret; its project and location come from GOOGLE_CLOUD_PROJECT / GOOGLE_CLOUD_LOCATION.
AGENT_PROVIDERS = (*AGENT_CREDENTIAL_ENV, "google-cloud")
# pydantic-ai 2.x's renames: the old names are refused with the new one named.
RENAMED_PROVIDERS = {"google-gla": "google", "google-vertex": "google-cloud"}
AGENT_REPLICAS_MAX = 64
ENDPOINT_PATTERN = re.compile(r"^https?://[^\s/]+(/\S*)?$")


@dataclass(frozen=True)
class CredentialRef(SecretKeyRef):
    """The Secret key holding a model provider's API key."""

    key: str = "api-key"


# A Google Cloud project id (6 to 30 of lowercase letters, digits and hyphens) and a Vertex
# AI location (a region such as us-central1, or `global`).
GCP_PROJECT_PATTERN = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
GCP_LOCATION_PATTERN = re.compile(r"^[a-z]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class VertexSpec:
    """Where `google-cloud:` models run (Vertex AI): GOOGLE_CLOUD_PROJECT and
    GOOGLE_CLOUD_LOCATION of the agent pods, whose identity is their ServiceAccount's
    (GKE Workload Identity, docs/deploy.md), not a key."""

    project: str
    location: str = "global"

    def check(self, path: str) -> None:
        _require(bool(GCP_PROJECT_PATTERN.match(self.project)), f"{path}.project",
                 f"must be a Google Cloud project id, got {show(self.project)}")
        _require(bool(GCP_LOCATION_PATTERN.match(self.location)), f"{path}.location",
                 f"must be a Vertex AI location such as us-central1 or global, got {show(self.location)}")


# GKE's longest flex-start run (Dynamic Workload Scheduler): 7 days; the node is reclaimed then.
MAX_RUN_DURATION_S = 7 * 24 * 3600


@dataclass(frozen=True)
class ProvisioningSpec:
    """Capacity asked for when the queue admits the campaign, through its ClusterQueue's
    ProvisioningRequest admission check (Kueue's provisioning controller; on GKE, flex-start
    with queued provisioning of the Dynamic Workload Scheduler, docs/operator.md): what
    Kueue passes on to the ProvisioningRequest it makes for the queued Jobs, as their
    `provreq.kueue.x-k8s.io/` annotations."""

    # How long the provisioned nodes are kept: the run ends there, so a campaign's budget
    # in seconds should fit in it.
    maxRunDurationSeconds: int

    def check(self, path: str) -> None:
        _require(1 <= self.maxRunDurationSeconds <= MAX_RUN_DURATION_S, f"{path}.maxRunDurationSeconds",
                 f"must be between 1 and {MAX_RUN_DURATION_S} (7 days, GKE's longest flex-start run), "
                 f"got {show(self.maxRunDurationSeconds)}")


@dataclass(frozen=True)
class AgentBudgetSpec:
    """What one agent pod may spend on one task (`xla-sentinel agent --max-*`)."""

    tokens: int = 400_000
    toolCalls: int = 60
    seconds: float = 1800.0

    def check(self, path: str) -> None:
        _require(1 <= self.tokens <= INT64_MAX, f"{path}.tokens", "must be >= 1")
        _require(1 <= self.toolCalls <= INT64_MAX, f"{path}.toolCalls", "must be >= 1")
        _require_finite(self.seconds, f"{path}.seconds")
        _require(self.seconds > 0, f"{path}.seconds", "must be > 0")


@dataclass(frozen=True)
class AgentSpendingSpec:
    """What a campaign's whole swarm may spend over all its tasks (unset: no limit), counted
    from the model's reported usage; money priced by genai-prices' offline data
    (agents/spend.py), so a model it does not know spends tokens only."""

    tokens: int | None = None
    usd: float | None = None

    def check(self, path: str) -> None:
        if self.tokens is not None:
            _require(1 <= self.tokens <= INT64_MAX, f"{path}.tokens", "must be >= 1")
        if self.usd is not None:
            _require_finite(self.usd, f"{path}.usd")
            _require(self.usd > 0, f"{path}.usd", "must be > 0")


@dataclass(frozen=True)
class AgentRoleSpec:
    """`replicas` agent pods of one role; model and budget default to spec.agents'."""

    role: str
    replicas: int = 1
    model: str | None = None
    budget: AgentBudgetSpec | None = None

    def check(self, path: str) -> None:
        _require_known(self.role, AGENT_ROLES, f"{path}.role", "agent role")
        _require(1 <= self.replicas <= AGENT_REPLICAS_MAX, f"{path}.replicas",
                 f"must be between 1 and {AGENT_REPLICAS_MAX}")
        if self.model is not None:
            check_model(self.model, f"{path}.model")
        if self.budget is not None:
            self.budget.check(f"{path}.budget")


def check_model(model: str, path: str) -> None:
    provider, sep, name = model.partition(":")
    _require(bool(sep and name.strip()), path, f"must be provider:model like openai:gpt-5, got {show(model)}")
    _require(provider not in RENAMED_PROVIDERS, path,
             f"provider {provider!r} was renamed in pydantic-ai 2: use "
             f"{RENAMED_PROVIDERS.get(provider)}:{name}")
    _require_known(provider, AGENT_PROVIDERS, path, "model provider")


@dataclass(frozen=True)
class AgentsSpec:
    """The agent swarm of a campaign: pods per role beside the workers, taking tasks from
    one queue of Leases, with the model's credential from a Secret."""

    roles: list[AgentRoleSpec]
    model: str = "openai:gpt-5"
    # The Secret key holding the provider's API key (AGENT_CREDENTIAL_ENV names the variable).
    credentialSecretRef: CredentialRef | None = None
    # An OpenAI-compatible endpoint (OPENAI_BASE_URL) for openai: models.
    endpoint: str | None = None
    # The project and location of google-cloud: models (Vertex AI).
    vertex: VertexSpec | None = None
    budget: AgentBudgetSpec = field(default_factory=AgentBudgetSpec)
    # How long a taken task stays an agent's before another may take it (a dead pod's task).
    leaseSeconds: int = 3600
    # Tasks each agent pod takes one after another (each under `budget`); it stops early
    # when its role's queue is empty or a budget stopped one.
    tasks: int = 1
    # The campaign-wide budget of the swarm; the agents take no task once it is spent.
    spending: AgentSpendingSpec | None = None
    # Attempts at one task (a crash, a budget stop, a dead pod) before it is dropped.
    taskAttempts: int = 3

    def role_model(self, role: AgentRoleSpec) -> str:
        return role.model or self.model

    def role_budget(self, role: AgentRoleSpec) -> AgentBudgetSpec:
        return role.budget or self.budget

    def check(self, path: str) -> None:
        _require(bool(self.roles), f"{path}.roles", "must name at least one role (stress, reproduce, fix)")
        seen: list[str] = []
        for i, r in enumerate(self.roles):
            r.check(f"{path}.roles[{i}]")
            _require(r.role not in seen, f"{path}.roles[{i}].role", f"duplicate role {r.role!r}")
            seen.append(r.role)
        check_model(self.model, f"{path}.model")
        self.budget.check(f"{path}.budget")
        _require(60 <= self.leaseSeconds <= 7 * 86400, f"{path}.leaseSeconds",
                 "must be between 60 and 604800")
        _require(1 <= self.tasks <= 1000, f"{path}.tasks", "must be between 1 and 1000")
        _require(1 <= self.taskAttempts <= 20, f"{path}.taskAttempts", "must be between 1 and 20")
        if self.spending is not None:
            self.spending.check(f"{path}.spending")
        providers = {self.role_model(r).partition(":")[0] for r in self.roles}
        needs = sorted({AGENT_CREDENTIAL_ENV[p] for p in providers if p in AGENT_CREDENTIAL_ENV})
        if self.credentialSecretRef is None:
            _require(not needs, f"{path}.credentialSecretRef",
                     f"missing: the models of {', '.join(sorted(providers))} need an API key from a "
                     f"Secret ({{name: SECRET, key: KEY}}, given to the pods as {', '.join(needs)})")
        else:
            self.credentialSecretRef.check(f"{path}.credentialSecretRef")
            _require(len(needs) <= 1, f"{path}.credentialSecretRef",
                     f"one Secret key cannot hold {' and '.join(needs)}: use one provider")
        if self.endpoint is not None:
            _require(bool(ENDPOINT_PATTERN.match(self.endpoint)), f"{path}.endpoint",
                     f"must be an http(s) URL, got {show(self.endpoint)}")
            _require(providers <= {"openai", "openai-chat"}, f"{path}.endpoint",
                     "is an OpenAI-compatible endpoint (OPENAI_BASE_URL): for openai: and "
                     "openai-chat: models only")
        if self.vertex is None:
            _require("google-cloud" not in providers, f"{path}.vertex",
                     "missing: google-cloud: models run in a Vertex AI project and location "
                     "({project: PROJECT, location: us-central1})")
        else:
            self.vertex.check(f"{path}.vertex")
            _require("google-cloud" in providers, f"{path}.vertex",
                     "is where google-cloud: models run: no role uses one")


@dataclass(frozen=True)
class AcceleratorSpec:
    type: str = "cpu"
    tpuAccelerator: str | None = None
    tpuTopology: str | None = None
    # GKE's machine type where a topology comes in two (v6e 2x4: one VM or two); unset, the
    # operator takes the one-VM shape (its tpu.py holds GKE's table and checks the pair).
    tpuMachineType: str | None = None
    count: int = 1
    gpuType: str | None = None
    # Host processes a partitioned program spans (worker/hosts.py, docs/spmd.md): its
    # generator.devices split evenly over them. A TPU slice's hosts come from its topology.
    hosts: int = 1

    def check(self, path: str) -> None:
        _require_known(self.type, PLATFORMS, f"{path}.type", "accelerator")
        _require(1 <= self.count <= INT64_MAX, f"{path}.count", "must be >= 1")
        _require(1 <= self.hosts <= MAX_DEVICES, f"{path}.hosts", f"must be between 1 and {MAX_DEVICES}")
        _require(self.type != "tpu" or self.hosts == 1, f"{path}.hosts",
                 "a TPU slice's hosts come from tpuTopology: leave hosts unset")
        if self.type == "tpu":
            _require(bool(self.tpuAccelerator and self.tpuTopology), path,
                     "type tpu needs tpuAccelerator and tpuTopology")
        else:
            _require(self.tpuAccelerator is None and self.tpuTopology is None, path,
                     "tpuAccelerator and tpuTopology apply to type tpu only")
            _require(self.tpuMachineType is None, f"{path}.tpuMachineType",
                     "applies to type tpu only")
        _require(self.type == "gpu" or self.gpuType is None, f"{path}.gpuType",
                 "applies to type gpu only")
        if self.tpuTopology is not None:
            _require(bool(TPU_TOPOLOGY_PATTERN.match(self.tpuTopology)), f"{path}.tpuTopology",
                     f"must look like 2x4 or 2x2x4, got {show(self.tpuTopology)}")


@dataclass(frozen=True)
class CampaignSpec:
    """The spec of a campaign. Cluster-only fields are accepted and ignored locally."""

    seed: int = 0
    generator: GeneratorSpec = field(default_factory=GeneratorSpec)
    targets: list[TargetSpec] = field(default_factory=lambda: [
        TargetSpec("default"), TargetSpec("O0"), TargetSpec("no_fusion_emitters"),
    ])
    references: list[str] = field(default_factory=lambda: list(DEFAULT_REFERENCES))
    crossCheckEvery: int = 20
    tolerances: dict[str, ToleranceSpec] = field(default_factory=dict)
    budget: BudgetSpec = field(default_factory=lambda: BudgetSpec(programs=100))
    workers: int = 2
    injectPasses: list[str] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)
    mutations: MutationSpec = field(default_factory=MutationSpec)
    corpus: list[str] = field(default_factory=list)
    timeouts: TimeoutSpec = field(default_factory=TimeoutSpec)
    bisect: BisectSpec = field(default_factory=BisectSpec)
    # Cluster fields (FuzzCampaign only).
    image: str | None = None
    resources: dict[str, Any] = field(default_factory=dict)
    nodeSelector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    accelerator: AcceleratorSpec = field(default_factory=AcceleratorSpec)
    suspend: bool = False
    artifacts: ArtifactSpec = field(default_factory=ArtifactSpec)
    alerts: AlertSpec = field(default_factory=AlertSpec)
    queueName: str | None = None
    # With queueName: the fewest workers Kueue may admit (partial admission,
    # kueue.x-k8s.io/job-min-parallelism: it runs the shards that fit the free quota);
    # unset, all of them or none.
    minWorkers: int | None = None
    # With queueName: capacity asked for through the queue's ProvisioningRequest check.
    provisioning: ProvisioningSpec | None = None
    agents: AgentsSpec | None = None

    def check(self, path: str = "spec") -> None:
        # Generated programs draw from numpy's SeedSequence, which takes no negative seed.
        _require(0 <= self.seed <= INT64_MAX, f"{path}.seed", "must be >= 0 (and fit in 64 bits)")
        self.generator.check(f"{path}.generator")
        _require(bool(self.targets), f"{path}.targets", "must name at least one target")
        names = [t.name for t in self.targets]
        for i, t in enumerate(self.targets):
            t.check(f"{path}.targets[{i}]")
            _require(t.name not in names[:i], f"{path}.targets[{i}].name",
                     f"duplicate target name {t.name!r}")
        for i, r in enumerate(self.references):
            _require_known(r, REFERENCES, f"{path}.references[{i}]", "reference")
            _require(r not in self.references[:i], f"{path}.references[{i}]",
                     f"duplicate reference {r!r}")
        _require(0 <= self.crossCheckEvery <= INT64_MAX, f"{path}.crossCheckEvery",
                 "must be >= 0 (0: cross-check only programs a target fails)")
        _require(len(self.targets) + len(self.references) >= 2, f"{path}.targets",
                 "the oracle needs at least two configurations (targets plus references)")
        for i, t in enumerate(self.targets):
            _require(t.says_what_it_tests(self.accelerator.type), f"{path}.targets[{i}].name",
                     unknown_name(t.name, list(PRESETS), "target preset")
                     + " (a custom target needs options, an image, a jaxlib, a python or another platform)")
        for d, tol in self.tolerances.items():
            # s32 is a dtype, just not a float one: a suggestion only for what is no dtype.
            guess = None if d in DTYPES else closest(d, FLOATS)
            _require(d in FLOATS, key_path(f"{path}.tolerances", d),
                     f"tolerances are per float dtype: {', '.join(FLOATS)}"
                     + (f"; did you mean {guess!r}?" if guess else ""))
            tol.check(f"{path}.tolerances.{d}")
        self.budget.check(f"{path}.budget")
        _require(1 <= self.workers <= 4096, f"{path}.workers", "must be between 1 and 4096")
        for i, ref in enumerate(self.injectPasses):
            _require(bool(PLUGIN_REF_PATTERN.match(ref)), f"{path}.injectPasses[{i}]",
                     f"must be FILE.py[:FUNC], got {show(ref)}")
        _require_names(self.traces, f"{path}.traces", "a trace path")
        _require_names(self.corpus, f"{path}.corpus", "a corpus folder")
        self.timeouts.check(f"{path}.timeouts")
        self.mutations.check(f"{path}.mutations")
        self.bisect.check(f"{path}.bisect")
        if self.image is not None:
            _require(bool(self.image.strip()), f"{path}.image", "must not be empty when set")
        _require_plain(self.resources, f"{path}.resources")
        _require_plain(self.tolerations, f"{path}.tolerations")
        self.accelerator.check(f"{path}.accelerator")
        if self.accelerator.hosts > 1:
            devices = self.generator.device_count()
            _require(devices % self.accelerator.hosts == 0, f"{path}.accelerator.hosts",
                     f"must divide generator.devices ({devices}): each host gets as many devices")
        self.artifacts.check(f"{path}.artifacts")
        self.alerts.check(f"{path}.alerts")
        if self.queueName is not None:
            _require(bool(self.queueName), f"{path}.queueName", "must not be empty when set")
            _require(bool(K8S_LABEL_PATTERN.fullmatch(self.queueName)), f"{path}.queueName",
                     f"must be a DNS label (a Kueue LocalQueue name: lower-case letters, digits "
                     f"and '-', at most 63), got {show(self.queueName)}")
        if self.minWorkers is not None:
            _require(self.queueName is not None, f"{path}.minWorkers",
                     "takes a queueName: it is how many of the workers Kueue may admit")
            _require(1 <= self.minWorkers <= self.workers, f"{path}.minWorkers",
                     f"must be between 1 and workers ({self.workers}), got {show(self.minWorkers)}")
        if self.provisioning is not None:
            self.provisioning.check(f"{path}.provisioning")
            _require(self.queueName is not None, f"{path}.provisioning",
                     "takes a queueName: Kueue makes the ProvisioningRequest for the queued Jobs")
        if self.agents is not None:
            self.agents.check(f"{path}.agents")

    def to_dict(self) -> dict[str, Any]:
        return dict(_plain(self))


def _plain(v: Any) -> Any:
    """Plain data, unset optional fields left out; a None inside a free-form field stays,
    so that parse(to_dict(spec)) == spec."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)
                if getattr(v, f.name) is not None}
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _require(ok: bool, path: str, message: str) -> None:
    if not ok:
        raise SpecError(f"{path}: {message}")


def _type_name(tp: Any) -> str:
    names = {int: "integer", float: "number", str: "string", bool: "boolean",
             list: "list", dict: "mapping"}
    origin = typing.get_origin(tp) or tp
    if dataclasses.is_dataclass(origin):
        return "mapping"
    return names.get(origin, getattr(origin, "__name__", str(origin)))


def _convert(tp: Any, value: Any, path: str) -> Any:
    """Convert parsed YAML `value` to the annotated type `tp`, or raise SpecError."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _convert(args[0], value, path)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return build(tp, value, path)
    if origin is list:
        if not isinstance(value, list):
            raise SpecError(f"{path}: expected a list, got {_type_name(type(value))} {show(value)}")
        (item,) = typing.get_args(tp)
        return [_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise SpecError(f"{path}: expected a mapping, got {_type_name(type(value))} {show(value)}")
        _, item = typing.get_args(tp)
        return {str(k): _convert(item, v, key_path(path, k)) for k, v in value.items()}
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise SpecError(f"{path}: expected a boolean, got {show(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{path}: expected an integer, got {show(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(f"{path}: expected a number, got {show(value)}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise SpecError(f"{path}: expected a string, got {show(value)}")
        return value
    raise SpecError(f"{path}: unsupported type {_type_name(tp)}")


def build(cls: type, data: Any, path: str) -> Any:
    """Build dataclass `cls` from a mapping, rejecting unknown fields by path."""
    if cls is TargetSpec and isinstance(data, str):
        data = {"name": data}  # `targets: [default, O0]` is shorthand for presets
    if cls is ToleranceSpec and isinstance(data, int | float) and not isinstance(data, bool):
        data = {"k": data}
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping, got {_type_name(type(data))} {show(data)}")
    hints = typing.get_type_hints(cls)
    known = _field_names(cls)
    for key in data:
        if key not in known:
            guess = closest(key, known)
            hint = f"did you mean {guess!r}?" if guess else f"known fields: {', '.join(sorted(known))}"
            raise SpecError(f"{key_path(path, key)}: unknown field; {hint}")
    kwargs = {k: _convert(hints[k], v, f"{path}.{k}") for k, v in data.items()}
    missing = [f.name for f in dataclasses.fields(cls)
               if f.name not in kwargs and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise SpecError(f"{path}.{missing[0]}: required field is missing")
    return cls(**kwargs)


def resolve_generator(spec: CampaignSpec) -> GeneratorSpec:
    """The generator spec a campaign's programs are drawn with: an unset `devices` becomes
    the version's default where every target runs on the CPU (whose workers always have
    the virtual host devices), and no more than the accelerator's `count` where a target
    runs on an accelerator (1 locally, where the count is not given)."""
    gen = spec.generator
    if gen.devices is not None or all(t.platform == "cpu" for t in spec.targets):
        return gen
    return dataclasses.replace(gen, devices=min(gen.device_count(), spec.accelerator.count))


def parse_spec(data: Any, path: str = "spec") -> CampaignSpec:
    """Validate a spec mapping and return the CampaignSpec with defaults filled in."""
    spec: CampaignSpec = build(CampaignSpec, {} if data is None else data, path)

    spec.check(path)
    return spec


@dataclass(frozen=True)
class Campaign:
    name: str
    spec: CampaignSpec
    source: str = ""


def load_campaign(path: str | Path) -> Campaign:
    """Read a campaign YAML: either a bare spec or a full FuzzCampaign manifest."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise SpecError(f"{p}: cannot read campaign file ({e.strerror or e})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"{p}: malformed YAML{where}: {problem}") from None
    return campaign_from_data(data, default_name=p.stem, source=str(p))


def campaign_from_data(data: Any, default_name: str = "campaign", source: str = "") -> Campaign:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError(f"{source or 'campaign'}: expected a mapping at the top level, "
                        f"got {_type_name(type(data))}")
    if "kind" in data or "apiVersion" in data:
        if data.get("kind") != "FuzzCampaign":
            raise SpecError(f"kind: expected FuzzCampaign, got {show(data.get('kind'))}")
        if data.get("apiVersion") != API_VERSION:
            raise SpecError(f"apiVersion: expected {API_VERSION}, got {show(data.get('apiVersion'))}")
        extra = sorted(map(str, set(data) - {"apiVersion", "kind", "metadata", "spec", "status"}))
        if extra:
            raise SpecError(f"{key_path('', extra[0]).lstrip('.')}: unknown top-level field of a FuzzCampaign")
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise SpecError(f"metadata: expected a mapping, got {_type_name(type(metadata))}")
        name = metadata.get("name", default_name)
        if not (isinstance(name, str) and K8S_NAME_PATTERN.match(name)):
            raise SpecError(f"metadata.name: must be a lowercase DNS name (a-z, 0-9, '-', '.'), "
                            f"got {show(name)}")
        return Campaign(name=name, spec=parse_spec(data.get("spec"), "spec"), source=source)
    return Campaign(name=default_name, spec=parse_spec(data, "spec"), source=source)
