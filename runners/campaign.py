"""The campaign schema: one spec for a local `run` and for the FuzzCampaign resource.

Pure Python (no jax), so the operator validates specs with the same code the engine
uses. Every error names the offending field by its path (``spec.budget.programs``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DTYPES = ("f32", "bf16", "f16", "f64", "s32", "s8", "u8", "u32", "bool")
FLOAT_DTYPES = ("f32", "bf16", "f16", "f64")
REFERENCES = ("f64_eager", "f64_jit", "eager", "interpreter")
PLATFORMS = ("cpu", "gpu", "tpu")
VERDICTS = (
    "pass",
    "mismatch",
    "nan_mismatch",
    "crash",
    "hang",
    "compile_error",
    "nondeterministic",
)


class SpecError(ValueError):
    """A campaign spec is invalid; the message names the field and what was wrong."""


def _field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


@dataclass(frozen=True)
class GeneratorSpec:
    """How synthetic programs are drawn."""

    minOps: int = 1
    maxOps: int = 24
    dtypes: list[str] = field(default_factory=lambda: ["f32", "bf16", "f16", "s32", "u8", "bool"])
    maxRank: int = 4
    maxDimSize: int = 48
    # Fraction of programs whose inputs come from the special-value pool
    # (ties, signed zeros, subnormals, NaN/Inf, out-of-range indices).
    specialValues: float = 0.2
    ops: list[str] = field(default_factory=list)
    excludeOps: list[str] = field(default_factory=list)
    # Coverage-guided generation (runners/guide.py): steer towards rarely exercised ops,
    # op pairs, dtypes and fusion kinds, and towards neighbours of near misses.
    guided: bool = False

    def check(self, path: str) -> None:
        _require(1 <= self.minOps <= self.maxOps, f"{path}.minOps", "must be >= 1 and <= maxOps")
        _require(self.maxOps <= 2000, f"{path}.maxOps", "must be <= 2000")
        _require(0 <= self.maxRank <= 5, f"{path}.maxRank", "must be between 0 and 5")
        _require(1 <= self.maxDimSize <= 4096, f"{path}.maxDimSize", "must be between 1 and 4096")
        _require(0.0 <= self.specialValues <= 1.0, f"{path}.specialValues", "must be in [0, 1]")
        _require(bool(self.dtypes), f"{path}.dtypes", "must name at least one dtype")
        for i, d in enumerate(self.dtypes):
            _require(d in DTYPES, f"{path}.dtypes[{i}]", f"unknown dtype {d!r}; known: {', '.join(DTYPES)}")


@dataclass(frozen=True)
class TargetSpec:
    """One XLA configuration under test, or a named preset (see targets.PRESETS)."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    platform: str = "cpu"
    # Cluster only: the runner image of another jaxlib for cross-version targets.
    image: str | None = None

    def check(self, path: str) -> None:
        _require(bool(self.name) and self.name.replace("_", "").replace("-", "").isalnum(),
                 f"{path}.name", "must be a non-empty name of letters, digits, '-' and '_'")
        _require(self.platform in PLATFORMS, f"{path}.platform",
                 f"unknown platform {self.platform!r}; known: {', '.join(PLATFORMS)}")
        for k, v in self.options.items():
            _require(isinstance(k, str) and k.startswith("xla_"), f"{path}.options.{k}",
                     "XLA option names start with 'xla_'")
            _require(isinstance(v, str | int | float | bool), f"{path}.options.{k}",
                     "must be a string, number or boolean")


@dataclass(frozen=True)
class ToleranceSpec:
    """Oracle factor k for one dtype: flag when error > k * max(best other, noise, u)."""

    k: float

    def check(self, path: str) -> None:
        _require(self.k >= 1.0, f"{path}.k", "must be >= 1")


@dataclass(frozen=True)
class BudgetSpec:
    programs: int | None = None
    seconds: float | None = None
    continuous: bool = False

    def check(self, path: str) -> None:
        if self.programs is not None:
            _require(self.programs >= 1, f"{path}.programs", "must be >= 1")
        if self.seconds is not None:
            _require(self.seconds > 0, f"{path}.seconds", "must be > 0")
        _require(self.continuous or self.programs is not None or self.seconds is not None,
                 path, "set programs, seconds or continuous: true")


@dataclass(frozen=True)
class TimeoutSpec:
    # A target that takes longer than this on one program is a `hang` finding.
    programSeconds: float = 120.0

    def check(self, path: str) -> None:
        _require(self.programSeconds > 0, f"{path}.programSeconds", "must be > 0")


@dataclass(frozen=True)
class BisectSpec:
    enabled: bool = True
    # Bisect the first N findings of each new candidate signature.
    perSignature: int = 1
    reduce: bool = True

    def check(self, path: str) -> None:
        _require(self.perSignature >= 0, f"{path}.perSignature", "must be >= 0")


@dataclass(frozen=True)
class SecretKeyRef:
    name: str
    key: str = "url"

    def check(self, path: str) -> None:
        _require(bool(self.name), f"{path}.name", "must not be empty")


@dataclass(frozen=True)
class AlertSpec:
    teams: list[str] = field(default_factory=list)
    webhookSecretRef: SecretKeyRef | None = None

    def check(self, path: str) -> None:
        if self.webhookSecretRef:
            self.webhookSecretRef.check(f"{path}.webhookSecretRef")


@dataclass(frozen=True)
class ArtifactSpec:
    pvc: str | None = None
    bucketURI: str | None = None

    def check(self, path: str) -> None:
        _require(not (self.pvc and self.bucketURI), path, "set pvc or bucketURI, not both")


@dataclass(frozen=True)
class AcceleratorSpec:
    type: str = "cpu"
    tpuAccelerator: str | None = None
    tpuTopology: str | None = None
    count: int = 1
    gpuType: str | None = None

    def check(self, path: str) -> None:
        _require(self.type in PLATFORMS, f"{path}.type",
                 f"unknown accelerator {self.type!r}; known: {', '.join(PLATFORMS)}")
        _require(self.count >= 1, f"{path}.count", "must be >= 1")
        if self.type == "tpu":
            _require(bool(self.tpuAccelerator and self.tpuTopology), path,
                     "type tpu needs tpuAccelerator and tpuTopology")


@dataclass(frozen=True)
class CampaignSpec:
    """The spec of a campaign. Cluster-only fields are accepted and ignored locally."""

    seed: int = 0
    generator: GeneratorSpec = field(default_factory=GeneratorSpec)
    targets: list[TargetSpec] = field(default_factory=lambda: [
        TargetSpec("default"), TargetSpec("O0"), TargetSpec("no_fusion_emitters"),
    ])
    references: list[str] = field(default_factory=lambda: ["f64_eager", "f64_jit", "eager"])
    tolerances: dict[str, ToleranceSpec] = field(default_factory=dict)
    budget: BudgetSpec = field(default_factory=lambda: BudgetSpec(programs=100))
    workers: int = 2
    injectPasses: list[str] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)
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

    def check(self, path: str = "spec") -> None:
        self.generator.check(f"{path}.generator")
        _require(bool(self.targets), f"{path}.targets", "must name at least one target")
        names = [t.name for t in self.targets]
        for i, t in enumerate(self.targets):
            t.check(f"{path}.targets[{i}]")
            _require(t.name not in names[:i], f"{path}.targets[{i}].name",
                     f"duplicate target name {t.name!r}")
        for i, r in enumerate(self.references):
            _require(r in REFERENCES, f"{path}.references[{i}]",
                     f"unknown reference {r!r}; known: {', '.join(REFERENCES)}")
        _require(len(self.targets) + len(self.references) >= 2, f"{path}.targets",
                 "the oracle needs at least two configurations (targets plus references)")
        for d, tol in self.tolerances.items():
            _require(d in FLOAT_DTYPES, f"{path}.tolerances.{d}",
                     f"tolerances are per float dtype: {', '.join(FLOAT_DTYPES)}")
            tol.check(f"{path}.tolerances.{d}")
        self.budget.check(f"{path}.budget")
        _require(1 <= self.workers <= 4096, f"{path}.workers", "must be between 1 and 4096")
        self.timeouts.check(f"{path}.timeouts")
        self.bisect.check(f"{path}.bisect")
        self.accelerator.check(f"{path}.accelerator")
        self.artifacts.check(f"{path}.artifacts")
        self.alerts.check(f"{path}.alerts")

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(dataclasses.asdict(self))


def _drop_none(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _drop_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_none(x) for x in v]
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
    if dataclasses.is_dataclass(tp):
        return build(tp, value, path)
    if origin is list:
        if not isinstance(value, list):
            raise SpecError(f"{path}: expected a list, got {type(value).__name__}")
        (item,) = typing.get_args(tp)
        return [_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise SpecError(f"{path}: expected a mapping, got {type(value).__name__}")
        _, item = typing.get_args(tp)
        return {str(k): _convert(item, v, f"{path}.{k}") for k, v in value.items()}
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise SpecError(f"{path}: expected a boolean, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(f"{path}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise SpecError(f"{path}: expected a string, got {value!r}")
        return value
    raise SpecError(f"{path}: unsupported type {_type_name(tp)}")


def build(cls: type, data: Any, path: str) -> Any:
    """Build dataclass `cls` from a mapping, rejecting unknown fields by path."""
    if cls is TargetSpec and isinstance(data, str):
        data = {"name": data}  # `targets: [default, O0]` is shorthand for presets
    if cls is ToleranceSpec and isinstance(data, int | float) and not isinstance(data, bool):
        data = {"k": data}
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    known = _field_names(cls)
    for key in data:
        if key not in known:
            raise SpecError(f"{path}.{key}: unknown field; known fields: {', '.join(sorted(known))}")
    kwargs = {k: _convert(hints[k], v, f"{path}.{k}") for k, v in data.items()}
    missing = [f.name for f in dataclasses.fields(cls)
               if f.name not in kwargs and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise SpecError(f"{path}.{missing[0]}: required field is missing")
    return cls(**kwargs)


def parse_spec(data: Any, path: str = "spec") -> CampaignSpec:
    """Validate a spec mapping and return the CampaignSpec with defaults filled in."""
    spec = build(CampaignSpec, {} if data is None else data, path)
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
        raise SpecError(f"{source or 'campaign'}: expected a mapping at the top level")
    if "kind" in data or "apiVersion" in data:
        if data.get("kind") != "FuzzCampaign":
            raise SpecError(f"kind: expected FuzzCampaign, got {data.get('kind')!r}")
        extra = set(data) - {"apiVersion", "kind", "metadata", "spec", "status"}
        if extra:
            raise SpecError(f"{sorted(extra)[0]}: unknown top-level field of a FuzzCampaign")
        name = (data.get("metadata") or {}).get("name") or default_name
        return Campaign(name=name, spec=parse_spec(data.get("spec"), "spec"), source=source)
    return Campaign(name=default_name, spec=parse_spec(data, "spec"), source=source)
