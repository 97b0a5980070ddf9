"""The worker protocol: one class per request and per reply (docs/architecture.md, "Workers").

Campaign workers and bisection workers are the same process serving the same requests
(the handler table (worker/registry.py), one table from request class to handler). The coordinator sends a
request object and gets the reply class its request names back; a request the worker
could not serve comes back as `Failed` and is raised as `RequestFailed`. Objects cross
the pipe pickled, program graphs as `Graph` objects (core/graph.py). No jax here: the
coordinator imports this.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Generic, Literal, TypeVar

import numpy as np

from xla_sentinel.core.anomalies import AnomalyLine
from xla_sentinel.core.graph import Graph

Arrays = list[np.ndarray]


@dataclass
class Reply:
    """What every reply carries: the time the worker spent on the request (inside jax/XLA;
    the campaign's measure of harness overhead)."""

    busy_s: float = field(default=0.0, kw_only=True)


R = TypeVar("R", bound=Reply)


class Request(Generic[R]):
    """A request whose reply is an R. `cmd` is its name in the JSON form (`from_wire`).
    Defining a subclass registers it (REQUESTS): the list of requests is never written
    out, so none can be left out of it."""

    cmd: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.cmd in _BY_CMD:
            raise TypeError(f"requests {_BY_CMD[cls.cmd].__name__} and {cls.__name__} share cmd {cls.cmd!r}")
        _BY_CMD[cls.cmd] = cls


_BY_CMD: dict[str, type[Request[Any]]] = {}


# --- replies -------------------------------------------------------------------------------

@dataclass
class Failed(Reply):
    """The handler raised: the error as `Type: message`, and where."""

    error: str
    traceback: str = ""


@dataclass
class Pong(Reply):
    pass


@dataclass
class Validated(Reply):
    errors: list[str]  # one line per unusable plugin or target, naming the spec field
    # Targets whose platform this machine lacks (name -> why): skipped, not an error.
    unavailable: dict[str, str] = field(default_factory=dict)


@dataclass
class Generated(Reply):
    module: str
    graph: Graph
    inputs: Arrays
    input_dtypes: list[str]
    recipe: dict[str, Any]


@dataclass
class Loaded(Reply):
    id: str
    module: str
    inputs: Arrays
    input_dtypes: list[str]
    provenance: dict[str, Any]


@dataclass
class ChangedPasses(Reply):
    changed: list[str]


@dataclass
class ModuleClass(Reply):
    discrete: bool  # holds an op whose exact ties flip legally (docs/architecture.md, "Oracle")


@dataclass
class Ran(Reply):
    outputs: Arrays
    compile_s: float = 0.0
    run_s: float = 0.0
    hlo: str | None = None  # the optimized HLO, when asked for
    again: Arrays | None = None  # a second, fresh compile and run, when asked for
    # Problems the buffer checks found around the run (xla/buffers.py), each a dict whose
    # `verdict` is a model.BUFFER_VERDICTS value; the rest is that verdict's evidence.
    buffers: list[dict[str, Any]] = field(default_factory=list)
    # The lines XLA logged during the compile that flag an anomaly (core/anomalies.py).
    anomalies: list[AnomalyLine] = field(default_factory=list)


@dataclass
class Outputs(Reply):
    outputs: Arrays | None
    skipped: str = ""  # why a reference does not apply (outputs is None then)
    fallbacks: dict[str, int] = field(default_factory=dict)  # ops numpy left to XLA, by op: f64_numpy (summary.json reference_fallbacks) and eager (eager_xla_ops)
    undetermined: Arrays | None = None  # f64_numpy: per output, elements a NaN's open sign decides (npref.Evaluation)


@dataclass
class NoiseSamples(Reply):
    outputs: Arrays
    samples: list[Arrays]
    overflow: list[bool]  # per output: may overflow legally


@dataclass
class Values(Reply):
    values: dict[str, np.ndarray]  # every value of @main in float64, by name
    own_precision: list[str]  # values of ops that were evaluated at their own precision


@dataclass
class ModuleInfo(Reply):
    info: dict[str, Any]  # bisect.module.Parsed.info(): args, ops, returns


@dataclass
class ModuleText(Reply):
    module: str


@dataclass
class PassNames(Reply):
    passes: list[str]


@dataclass
class VersionInfo(Reply):
    """What a worker runs (docs/versions.md): jax/jaxlib, and the StableHLO versions its
    deserializer reads (portable artifacts from `minimum` to `current`)."""

    jax: str
    jaxlib: str
    stablehlo_current: str
    stablehlo_minimum: str


@dataclass
class PortableArtifact(Reply):
    """A module as a VHLO portable artifact at StableHLO `version`."""

    data: bytes
    version: str


# --- requests ------------------------------------------------------------------------------

@dataclass
class Ping(Request[Pong]):
    cmd: ClassVar[str] = "ping"


@dataclass
class Validate(Request[Validated]):
    """Do the plugins import and run, and does this XLA know each target's options?"""

    plugins: list[str]
    targets: list[dict[str, Any]]
    cmd: ClassVar[str] = "validate"


@dataclass
class Generate(Request[Generated]):
    seed: int
    index: int
    generator: dict[str, Any]  # the spec's GeneratorSpec as a dict
    special: bool
    bias: dict[str, Any] | None = None
    cmd: ClassVar[str] = "generate"


@dataclass
class LoadTrace(Request[Loaded]):
    path: str
    seed: int = 0
    cmd: ClassVar[str] = "load"


@dataclass
class LoadCorpus(Request[Loaded]):
    path: str
    seed: int = 0
    cmd: ClassVar[str] = "load_corpus"


@dataclass
class PassEffects(Request[ChangedPasses]):
    """Which of `passes` change the module's optimized HLO when disabled."""

    module: str
    passes: list[str]
    cmd: ClassVar[str] = "pass_effects"


@dataclass
class ClassifyModule(Request[ModuleClass]):
    module: str
    cmd: ClassVar[str] = "classify"


@dataclass
class Run(Request[Ran]):
    """Compile `module` under XLA `options` and run it; `repeat`: compile and run it a
    second time (CPU results are deterministic, so a different answer is a finding)."""

    module: str | bytes  # StableHLO text, MLIR bytecode or a VHLO portable artifact
    inputs: Arrays
    options: dict[str, Any]
    want_hlo: bool = False
    repeat: bool = False
    platform: str = "cpu"  # the target's: the worker compiles for that backend
    cmd: ClassVar[str] = "run"


@dataclass
class RunHlo(Request[Outputs]):
    hlo: str  # HLO text, defused (hlo.defuse)
    inputs: Arrays
    options: dict[str, Any]
    cmd: ClassVar[str] = "run_hlo"


@dataclass
class GraphReference(Request[Outputs]):
    """A reference evaluated from a generated program's op graph."""

    kind: Literal["eager", "f64_eager", "f64_jit", "unsharded"]
    graph: Graph
    inputs: Arrays
    cmd: ClassVar[str] = "graph_reference"


@dataclass
class ModuleReference(Request[Outputs]):
    """A reference evaluated from module text (a replayed program has no graph)."""

    kind: Literal["interpreter", "f64_text", "eager_module"]
    module: str
    inputs: Arrays
    cmd: ClassVar[str] = "module_reference"


@dataclass
class NumpyReference(Request[Outputs]):
    """The float64 reference in numpy (npref): of the graph's float64 lowering when there
    is a graph, else of the module promoted to float64."""

    module: str
    inputs: Arrays
    graph: Graph | None = None
    cmd: ClassVar[str] = "numpy_reference"


@dataclass
class Noise(Request[NoiseSamples]):
    """Perturbed float64 evaluations of a graph: the oracle's noise model."""

    graph: Graph
    inputs: Arrays
    seed: int = 0
    cmd: ClassVar[str] = "noise"


@dataclass
class EveryValue(Request[Values]):
    """The float64 value of every value of @main, op by op (the bisector's reference)."""

    module: str
    inputs: Arrays
    cmd: ClassVar[str] = "every_value"


@dataclass
class Legal(Request[Outputs]):
    """A case's outputs under the bisector's legal settings, at its own precision, without
    plugins; unsharded where the module is partitioned (worker/bisect_handlers.legal)."""

    module: str
    inputs: Arrays
    cmd: ClassVar[str] = "legal"


@dataclass
class Lower(Request[ModuleText]):
    """A program graph's module as a campaign lowers it: partitioned over its plan's devices
    where the graph has one (runners/xla_sentinel/programs/spmd.py), which needs those devices in the worker."""

    graph: Graph
    cmd: ClassVar[str] = "lower"


@dataclass
class Info(Request[ModuleInfo]):
    module: str
    cmd: ClassVar[str] = "info"


@dataclass
class Cut(Request[ModuleText]):
    """A module whose @main runs the ops `keep` of `module` on `params`, returning `outputs`."""

    module: str
    keep: list[int]
    params: list[str]
    outputs: list[str]
    cmd: ClassVar[str] = "cut"


@dataclass
class Region(Request[ModuleInfo]):
    """The module with its calls inlined and the ops of the block at `path` ([op index,
    region index] per level from @main) listed; with `expose` (op indices in that block,
    -k-1 for its argument k), the module whose @main returns only their results
    (xla/cuts.expose). Reply info: {"module", "ops", "arguments", "returns"}."""

    module: str
    path: list[list[int]]
    expose: list[int]
    cmd: ClassVar[str] = "region"


@dataclass
class Strip(Request[ModuleText]):
    """The module without debug locations."""

    module: str
    cmd: ClassVar[str] = "strip"


@dataclass
class Donation(Request[ModuleInfo]):
    """A module's donation as the buffer checks read it (xla/buffers.py), for a buffer
    finding's repro.py: info {"donated": @main's donated parameters, "undonated": the
    module without its donation, "fault": the runtime fault injected in this worker's
    process, or None}."""

    module: str
    cmd: ClassVar[str] = "donation"


@dataclass
class ListPasses(Request[PassNames]):
    """The HLO passes XLA runs on the module under `options`."""

    module: str
    options: dict[str, Any]
    cmd: ClassVar[str] = "passes"


@dataclass
class WhichVersions(Request[VersionInfo]):
    """The worker's jax/jaxlib and StableHLO versions (served under every jaxlib)."""

    cmd: ClassVar[str] = "versions"


@dataclass
class ToPortable(Request[PortableArtifact]):
    """StableHLO text as a portable artifact an older StableHLO `version` reads (served by
    a worker of the current jaxlib; raises naming what that version cannot express)."""

    module: str
    version: str
    cmd: ClassVar[str] = "portable"


REQUESTS: tuple[type[Request[Any]], ...] = tuple(_BY_CMD.values())


class RequestFailed(RuntimeError):
    """The worker answered, but its handler raised (a compile error, a bad file, ...)."""

    def __init__(self, failed: Failed) -> None:
        super().__init__(failed.error)
        self.error = failed.error
        self.traceback = failed.traceback
        self.busy_s = failed.busy_s


@dataclass
class Answer:
    """What crosses the pipe back: the reply, and whether the worker exits after it
    (recycled: it grew past its memory bound, worker/server.py)."""

    reply: Reply
    recycle: bool
    # The worker's CPU seconds by stage since its previous answer (core/cpu_account.py),
    # so that the coordinator sums every process's stages where the bench reads them.
    cpu: dict[str, float] = field(default_factory=dict)


# --- the JSON form ------------------------------------------------------------------------
# Scripts outside the engine (the file-input fuzzer) speak `{"cmd": ..., fields}` and
# read `{"ok": ..., fields}`; these turn that form into the classes and back. A program
# graph is graph.json there (Graph.to_json), a `Graph` in the classes.

def from_wire(message: dict[str, Any]) -> Request[Any]:
    """The request a `{"cmd": name, field: value, ...}` dict stands for."""
    cls = _BY_CMD.get(message.get("cmd", ""))
    if cls is None:
        raise ValueError(f"unknown request {message.get('cmd')!r}")
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: Graph.from_json(v) if k == "graph" and isinstance(v, dict) else v
                  for k, v in message.items() if k in names})


def to_wire(reply: Reply) -> dict[str, Any]:
    """`{"ok": True, fields}` for a reply, `{"ok": False, "error": ...}` for a failure."""
    d = {f.name: getattr(reply, f.name) for f in fields(reply)}
    d = {k: v.to_json() if isinstance(v, Graph) else v for k, v in d.items()}
    return {"ok": not isinstance(reply, Failed), **d}

