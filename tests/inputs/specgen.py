"""Hypothesis strategies for campaign specs, valid and invalid, derived from the schema.

`valid_specs()` draws spec mappings that `parse_spec` must accept (and, with crd=True, in
the form the FuzzCampaign resource takes: targets as objects, tolerances as {k: N}).
`invalid_specs()` draws (spec, field, why) where spec is a valid spec with exactly one
field made wrong, field is the dotted path the error must name, and why a word the error
must contain. The field list comes from the dataclasses in xla_sentinel.spec.campaign: a field
added there without an entry in VALUES here fails test_every_field_has_a_strategy.

Used in-process by tests/inputs/test_spec_properties.py and by the API-server tests.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from hypothesis import strategies as st
from xla_sentinel.spec import campaign as c

NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./", min_size=1, max_size=16)
SCALARS = st.one_of(st.integers(-5, 5), st.booleans(), NAMES)


def _unique(items: st.SearchStrategy, max_size: int = 4, min_size: int = 0) -> st.SearchStrategy:
    return st.lists(items, min_size=min_size, max_size=max_size, unique=True)


def _options(min_size: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    # min_size, not .filter(bool): hypothesis 6.170 trips an internal assertion on the latter.
    return st.dictionaries(st.from_regex(r"xla_[a-z_]{1,12}", fullmatch=True),
                           st.one_of(st.integers(-3, 3), st.booleans(), NAMES), min_size=min_size, max_size=2)


# Legal values per (dataclass, field), independent of each other; cross-field rules are
# applied when a whole spec is assembled (_consistent).
VALUES: dict[tuple[type, str], st.SearchStrategy] = {
    (c.GeneratorSpec, "minOps"): st.integers(1, 10),
    (c.GeneratorSpec, "maxOps"): st.integers(10, 2000),
    (c.GeneratorSpec, "dtypes"): _unique(st.sampled_from(c.DTYPES), min_size=1),
    (c.GeneratorSpec, "maxRank"): st.integers(0, 8),
    (c.GeneratorSpec, "maxDimSize"): st.integers(1, 4096),
    (c.GeneratorSpec, "specialValues"): st.floats(0, 1),
    (c.GeneratorSpec, "ops"): _unique(st.sampled_from(c.OP_NAMES)),
    (c.GeneratorSpec, "excludeOps"): _unique(st.sampled_from(c.OP_NAMES)),
    (c.GeneratorSpec, "guided"): st.booleans(),
    (c.GeneratorSpec, "shapes"): _unique(st.sampled_from(c.SHAPE_FAMILIES)),
    (c.GeneratorSpec, "devices"): st.integers(1, c.MAX_DEVICES),
    (c.GeneratorSpec, "sharded"): st.floats(0, 1),
    (c.GeneratorSpec, "partitioners"): _unique(st.sampled_from(c.PARTITIONERS), min_size=1),
    (c.GeneratorSpec, "version"): st.sampled_from(c.GENERATOR_VERSIONS),
    (c.MutationSpec, "perTrace"): st.integers(0, 10_000),
    (c.MutationSpec, "kinds"): _unique(st.sampled_from(c.MUTATION_KINDS), min_size=1),
    (c.TargetSpec, "name"): st.sampled_from(list(c.PRESETS)),
    (c.TargetSpec, "options"): _options(),
    (c.TargetSpec, "platform"): st.just("cpu"),
    (c.TargetSpec, "image"): WORDS,
    (c.TargetSpec, "jaxlib"): st.from_regex(r"0\.[0-9]{1,2}\.[0-9]{1,2}", fullmatch=True),
    (c.TargetSpec, "python"): WORDS,
    (c.ToleranceSpec, "k"): st.floats(1, 1e6),
    (c.BudgetSpec, "programs"): st.integers(1, 10**9),
    (c.BudgetSpec, "seconds"): st.floats(1e-3, 1e7),
    (c.BudgetSpec, "continuous"): st.booleans(),
    (c.TimeoutSpec, "programSeconds"): st.floats(1e-3, 1e5),
    (c.BisectSpec, "enabled"): st.booleans(),
    (c.BisectSpec, "perSignature"): st.integers(0, 100),
    (c.BisectSpec, "reduce"): st.booleans(),
    (c.BisectSpec, "versions"): st.sampled_from(["0.9.0..0.10.2", "0.4.30..0.10.1", "0.9.0..0.9.0.1",
                                                 "0.10.2..1.0"]),
    (c.SecretKeyRef, "name"): NAMES,
    (c.SecretKeyRef, "key"): NAMES,
    (c.AlertSpec, "teams"): st.lists(NAMES, max_size=3),
    (c.AlertSpec, "webhookSecretRef"): st.fixed_dictionaries({"name": NAMES}, optional={"key": NAMES}),
    (c.ArtifactSpec, "pvc"): NAMES,
    (c.ArtifactSpec, "bucketURI"): st.builds(lambda s, p: f"{s}://{p}", st.sampled_from(["gs", "s3"]), WORDS),
    (c.AcceleratorSpec, "type"): st.just("cpu"),
    (c.AcceleratorSpec, "tpuAccelerator"): NAMES,
    (c.AcceleratorSpec, "tpuTopology"): st.from_regex(r"[1-8]x[1-8](x[1-8])?", fullmatch=True),
    (c.AcceleratorSpec, "tpuMachineType"): st.sampled_from(["ct6e-standard-4t", "ct6e-standard-8t"]),
    (c.AcceleratorSpec, "count"): st.integers(1, 16),
    (c.AcceleratorSpec, "gpuType"): NAMES,
    # 1 only: more must divide generator.devices, a rule of the whole spec (CampaignSpec.check).
    (c.AcceleratorSpec, "hosts"): st.just(1),
    (c.CampaignSpec, "seed"): st.integers(0, c.INT64_MAX),
    (c.CampaignSpec, "references"): _unique(st.sampled_from(c.REFERENCES)),
    (c.CampaignSpec, "workers"): st.integers(1, 4096),
    (c.CampaignSpec, "crossCheckEvery"): st.integers(0, 1000),
    (c.CampaignSpec, "injectPasses"): st.lists(st.builds(lambda n, f: f"{n}.py{f}", NAMES,
                                                         st.sampled_from(["", ":transform", ":f"])), max_size=2),
    (c.CampaignSpec, "traces"): st.lists(WORDS, max_size=2),
    (c.CampaignSpec, "corpus"): st.lists(WORDS, max_size=2),
    (c.CampaignSpec, "image"): WORDS,
    (c.CampaignSpec, "resources"): st.fixed_dictionaries(
        {}, optional={"requests": st.dictionaries(st.sampled_from(["cpu", "memory"]), st.sampled_from(["1", "2Gi"])),
                      "limits": st.dictionaries(st.sampled_from(["cpu", "memory"]), st.sampled_from(["4", "8Gi"]))}),
    (c.CampaignSpec, "nodeSelector"): st.dictionaries(NAMES, NAMES, max_size=2),
    (c.CampaignSpec, "tolerations"): st.lists(st.fixed_dictionaries(
        {"key": NAMES, "operator": st.sampled_from(["Exists", "Equal"])}), max_size=2),
    (c.CampaignSpec, "suspend"): st.booleans(),
    (c.CampaignSpec, "queueName"): st.from_regex(c.K8S_LABEL_PATTERN, fullmatch=True),
    # Drawn from 1 to 4096, then bounded by the spec's workers and given a queue (valid_specs).
    (c.CampaignSpec, "minWorkers"): st.integers(1, 4096),
}
# Fields whose values are themselves specs, drawn by their own strategies below.
NESTED = {(c.CampaignSpec, "generator"), (c.CampaignSpec, "targets"), (c.CampaignSpec, "tolerances"),
          (c.CampaignSpec, "budget"), (c.CampaignSpec, "timeouts"), (c.CampaignSpec, "bisect"),
          (c.CampaignSpec, "accelerator"), (c.CampaignSpec, "artifacts"), (c.CampaignSpec, "alerts"),
          (c.CampaignSpec, "mutations"), (c.CampaignSpec, "agents"), (c.CampaignSpec, "provisioning")}
# spec.agents, drawn whole (its invalid forms: tests/k8s/test_swarm_pure.py).
AGENT_BUDGET = st.fixed_dictionaries({}, optional={"tokens": st.integers(1, 10**7), "toolCalls": st.integers(1, 500),
                                                   "seconds": st.floats(1e-3, 1e5)})
AGENTS = st.fixed_dictionaries(
    {"roles": st.lists(st.fixed_dictionaries({"role": st.sampled_from(c.AGENT_ROLES)},
                                             optional={"replicas": st.integers(1, c.AGENT_REPLICAS_MAX),
                                                       "budget": AGENT_BUDGET}),
                       min_size=1, max_size=3, unique_by=lambda r: r["role"]),
     "credentialSecretRef": st.fixed_dictionaries({"name": NAMES}, optional={"key": NAMES})},
    optional={"model": st.sampled_from(["openai:gpt-5", "openai-chat:local"]), "budget": AGENT_BUDGET,
              "endpoint": st.sampled_from(["http://127.0.0.1:8000/v1", "https://models.example"]),
              "leaseSeconds": st.integers(60, 604800), "tasks": st.integers(1, 1000)})
SPEC_CLASSES = (c.CampaignSpec, c.GeneratorSpec, c.TargetSpec, c.ToleranceSpec, c.BudgetSpec, c.TimeoutSpec,
                c.BisectSpec, c.SecretKeyRef, c.AlertSpec, c.ArtifactSpec, c.AcceleratorSpec,
                c.MutationSpec)


def schema_fields() -> list[tuple[type, str]]:
    """Every (dataclass, field) of the campaign schema."""
    return [(cls, f.name) for cls in SPEC_CLASSES for f in dataclasses.fields(cls)]


def _record(cls: type) -> st.SearchStrategy[dict[str, Any]]:
    """A mapping for `cls` with any subset of its scalar fields set."""
    keys = [f.name for f in dataclasses.fields(cls) if (cls, f.name) not in NESTED]
    return st.fixed_dictionaries({}, optional={k: VALUES[(cls, k)] for k in keys})


def _target(crd: bool) -> st.SearchStrategy[Any]:
    custom = st.fixed_dictionaries({"name": NAMES.map(lambda n: f"my_{n}"),
                                    "options": _options(min_size=1)})
    preset = _record(c.TargetSpec).map(lambda t: {**t, "name": t.get("name", "default")})
    forms = [custom, preset] if crd else [custom, preset, st.sampled_from(list(c.PRESETS))]
    return st.one_of(*forms)


@st.composite
def valid_specs(draw: st.DrawFn, crd: bool = False) -> dict[str, Any]:
    """A spec mapping that parse_spec accepts; crd=True: in the resource's own form."""
    spec: dict[str, Any] = draw(_record(c.CampaignSpec))
    if "minWorkers" in spec:  # a rule of the whole spec: a queue, and at most every worker
        spec["minWorkers"] = min(spec["minWorkers"], spec.get("workers", c.CampaignSpec().workers))
        spec.setdefault("queueName", "q")
    if draw(st.booleans()):
        gen = draw(_record(c.GeneratorSpec))
        gen["minOps"] = min(gen.get("minOps", 1), gen.get("maxOps", 24))
        if set(gen.get("ops", ())) and set(gen["ops"]) <= set(gen.get("excludeOps", ())):
            del gen["excludeOps"]
        spec["generator"] = gen
    if draw(st.booleans()):
        targets = draw(st.lists(_target(crd), min_size=1, max_size=4,
                                unique_by=lambda t: t if isinstance(t, str) else t["name"]))
        spec["targets"] = targets
        if len(targets) + len(spec.get("references", c.CampaignSpec().references)) < 2:
            spec["references"] = ["f64_eager"]
    if draw(st.booleans()):
        k = VALUES[(c.ToleranceSpec, "k")]
        spec["tolerances"] = draw(st.dictionaries(st.sampled_from(c.FLOATS),
                                                  st.builds(lambda v: {"k": v}, k) if crd else k, max_size=2))
    if draw(st.booleans()):
        budget = draw(_record(c.BudgetSpec))
        if not (budget.get("programs") or budget.get("seconds") or budget.get("continuous")):
            budget["programs"] = 1
        spec["budget"] = budget
    for name, cls in (("timeouts", c.TimeoutSpec), ("bisect", c.BisectSpec)):
        if draw(st.booleans()):
            spec[name] = draw(_record(cls))
    if draw(st.booleans()):
        acc = draw(_record(c.AcceleratorSpec))
        acc.pop("gpuType", None)
        if "tpuAccelerator" in acc or "tpuTopology" in acc or "tpuMachineType" in acc:
            acc.update(type="tpu", tpuAccelerator=acc.get("tpuAccelerator", "tpu-v6e-slice"),
                       tpuTopology=acc.get("tpuTopology", "2x4"))
        spec["accelerator"] = acc
    if draw(st.booleans()):
        spec["artifacts"] = draw(st.one_of(st.just({}), st.fixed_dictionaries({"pvc": VALUES[(c.ArtifactSpec, "pvc")]}),
                                           st.fixed_dictionaries({"bucketURI": VALUES[(c.ArtifactSpec, "bucketURI")]})))
    if draw(st.booleans()):
        spec["alerts"] = draw(_record(c.AlertSpec))
    if draw(st.booleans()):
        spec["mutations"] = draw(_record(c.MutationSpec))
    if draw(st.booleans()):
        spec["agents"] = draw(AGENTS)
    if draw(st.booleans()):  # a rule of the whole spec: a queue (its invalid forms: test_kueue_pure.py)
        spec["provisioning"] = {"maxRunDurationSeconds": draw(st.integers(1, c.MAX_RUN_DURATION_S))}
        spec.setdefault("queueName", "q")
    return spec


# A value of each other type, for "wrong type" mutations.
WRONG_TYPE: dict[Any, list[Any]] = {
    int: ["seven", 1.5, True, [1], {"a": 1}],
    float: ["fast", True, [0.5], {"a": 1}],
    bool: ["yes", 1, 0.0, [True]],
    str: [7, 1.5, True, ["a"], {"a": "b"}],
    list: ["a", 3, {"a": 1}],
    dict: ["a", 3, ["a"]],
}
# Values outside each field's legal range or known set: (value, a word the error must hold).
OUT_OF_RANGE: dict[tuple[type, str], list[tuple[Any, str]]] = {
    (c.CampaignSpec, "seed"): [(-7, ">= 0"), (-1, ">= 0"), (2**63, "64 bits")],
    (c.CampaignSpec, "workers"): [(0, "between 1 and 4096"), (-3, "between"), (4097, "between")],
    (c.CampaignSpec, "references"): [(["f64eager"], "did you mean 'f64_eager'"), (["oracle"], "unknown reference"),
                                     (["eager", "eager"], "duplicate")],
    (c.CampaignSpec, "injectPasses"): [(["plugin.txt"], "FILE.py"), (["p.py:1x"], "FILE.py")],
    (c.CampaignSpec, "traces"): [([""], "must not be empty"), (["a\nb"], "one line")],
    (c.CampaignSpec, "corpus"): [(["  "], "must not be empty")],
    (c.CampaignSpec, "image"): [("", "must not be empty")],
    (c.CampaignSpec, "queueName"): [("", "must not be empty"), ("_", "DNS label"),
                                    ("Queue", "DNS label"), ("q" * 64, "DNS label")],
    (c.CampaignSpec, "minWorkers"): [(0, "takes a queueName"), (3, "takes a queueName")],
    (c.CampaignSpec, "resources"): [({"limits": {"cpu": float("inf")}}, "finite"),
                                    ({"limits": {"cpu": float("nan")}}, "finite")],
    (c.CampaignSpec, "tolerations"): [([{"key": float("inf")}], "finite")],
    (c.CampaignSpec, "targets"): [([], "at least one"), (["defualt"], "did you mean 'default'"),
                                  ([{"name": "mine"}], "custom target needs options"),
                                  (["O0", "O0"], "duplicate"), ([{"name": "a b", "options": {"xla_x": 1}}], "letters")],
    (c.CampaignSpec, "tolerances"): [({"s32": 4}, "per float dtype"), ({"f3": 4}, "did you mean 'f32'"),
                                     ({"f32": 0.5}, ">= 1"), ({"f32": float("inf")}, "finite")],
    (c.GeneratorSpec, "minOps"): [(0, ">= 1"), (3000, "<= maxOps")],
    (c.GeneratorSpec, "maxOps"): [(2001, "<= 2000"), (0, ">= 1")],
    (c.GeneratorSpec, "dtypes"): [([], "at least one"), (["f8"], "unknown dtype"), (["F32"], "did you mean 'f32'")],
    (c.GeneratorSpec, "maxRank"): [(-1, "between 0 and 8"), (9, "between 0 and 8")],
    (c.GeneratorSpec, "maxDimSize"): [(0, "between 1 and 4096"), (4097, "between 1 and 4096")],
    (c.GeneratorSpec, "specialValues"): [(-0.1, "[0, 1]"), (1.5, "[0, 1]"), (float("nan"), "[0, 1]")],
    (c.GeneratorSpec, "ops"): [(["tanhh"], "did you mean 'tanh'"), (["no_such_op"], "unknown op")],
    (c.GeneratorSpec, "excludeOps"): [(["Sort"], "did you mean 'sort'")],
    (c.GeneratorSpec, "shapes"): [(["loop"], "did you mean 'loops'")],
    (c.GeneratorSpec, "devices"): [(0, "between 1 and"), (c.MAX_DEVICES + 1, "between 1 and")],
    (c.GeneratorSpec, "sharded"): [(-0.5, "[0, 1]"), (2.0, "[0, 1]")],
    (c.GeneratorSpec, "partitioners"): [(["shardyy"], "did you mean 'shardy'")],
    (c.GeneratorSpec, "version"): [(3, "must be one of 1, 2"), (0, "must be one of 1, 2")],
    (c.CampaignSpec, "crossCheckEvery"): [(-1, ">= 0")],
    (c.MutationSpec, "perTrace"): [(-1, "between 0 and 10000"), (10_001, "between 0 and 10000")],
    (c.MutationSpec, "kinds"): [(["dtypes"], "did you mean 'dtype'")],
    (c.TargetSpec, "platform"): [("cpuu", "did you mean 'cpu'"), ("npu", "unknown platform")],
    (c.TargetSpec, "options"): [({"fast": True}, "xla_"), ({"xla_x": [1]}, "string, number or boolean"),
                                ({"xla_x": float("inf")}, "finite")],
    (c.TargetSpec, "image"): [("", "must not be empty")],
    (c.TargetSpec, "jaxlib"): [("latest", "released jaxlib version"), ("0.10.1rc1", "released"),
                               ("", "released")],
    (c.TargetSpec, "python"): [("", "must not be empty"), ("  ", "must not be empty")],
    (c.BudgetSpec, "programs"): [(0, ">= 1"), (-3, ">= 1")],
    (c.BudgetSpec, "seconds"): [(0, "> 0"), (-1.0, "> 0"), (float("inf"), "finite"), (float("nan"), "finite")],
    (c.TimeoutSpec, "programSeconds"): [(0, "> 0"), (float("inf"), "finite"), (-5, "> 0")],
    (c.BisectSpec, "perSignature"): [(-1, ">= 0")],
    (c.BisectSpec, "versions"): [("0.10.2", "OLDEST..NEWEST"), ("latest..0.10.2", "released"),
                                 ("0.10.2..0.9.0", "not older"), ("0.9.0.1..0.9.0", "not older"),
                                 ("0.9.0..0.9.0", "not older"), ("0." + "1" * 62 + "..1.0", "at most 64")],
    (c.AcceleratorSpec, "type"): [("GPU", "did you mean 'gpu'"), ("fpga", "unknown accelerator")],
    (c.AcceleratorSpec, "count"): [(0, ">= 1")],
    (c.AcceleratorSpec, "tpuTopology"): [("2by4", "2x4")],
    (c.AcceleratorSpec, "gpuType"): [("nvidia-l4", "gpu only")],
    (c.ArtifactSpec, "bucketURI"): [("http://bucket", "gs://"), ("", "gs://")],
    (c.ArtifactSpec, "pvc"): [("", "must not be empty")],
    (c.AlertSpec, "teams"): [([""], "must not be empty")],
    (c.SecretKeyRef, "name"): [("", "must not be empty")],
    (c.SecretKeyRef, "key"): [("", "must not be empty")],
}
# Where each spec class sits in a CampaignSpec mapping, and the fields it needs there.
PLACES: dict[type, str] = {
    c.CampaignSpec: "", c.GeneratorSpec: "generator", c.TargetSpec: "targets[0]",
    c.ToleranceSpec: "tolerances.f32", c.BudgetSpec: "budget", c.TimeoutSpec: "timeouts",
    c.BisectSpec: "bisect", c.SecretKeyRef: "alerts.webhookSecretRef", c.AlertSpec: "alerts",
    c.ArtifactSpec: "artifacts", c.AcceleratorSpec: "accelerator", c.MutationSpec: "mutations",
}
CONTEXT: dict[type, dict[str, Any]] = {
    c.TargetSpec: {"name": "custom", "options": {"xla_backend_optimization_level": 1}},
    c.SecretKeyRef: {"name": "hook"},
    c.ToleranceSpec: {"k": 2.0},
    c.BudgetSpec: {"programs": 1},
}


def place(cls: type, record: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A spec holding `record` (over the class's needed fields) where `cls` sits, and its path."""
    record = {**CONTEXT.get(cls, {}), **record}
    where = PLACES[cls]
    if not where:
        return record, "spec"
    spec: dict[str, Any] = {}
    node = spec
    steps = where.split(".")
    for step in steps[:-1]:
        node = node.setdefault(step, {})
    last = steps[-1]
    if last.endswith("[0]"):
        node[last[:-3]] = [record]
    else:
        node[last] = record
    return spec, f"spec.{where}"


def _leaf_type(cls: type, name: str) -> Any:
    tp = typing.get_type_hints(cls)[name]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    return typing.get_origin(tp) or tp


def invalid_cases() -> list[tuple[dict[str, Any], str, str]]:
    """Every (spec, path, why): each field of the schema given each wrong type and each
    value outside its range or known set, and each record given an unknown field."""
    cases = []
    for cls, name in schema_fields():
        leaf = _leaf_type(cls, name)
        wrong = WRONG_TYPE[dict if dataclasses.is_dataclass(leaf) else leaf]
        for value in wrong:
            spec, path = place(cls, {name: value})
            cases.append((spec, f"{path}.{name}", "expected"))
        for value, why in OUT_OF_RANGE.get((cls, name), []):
            record: dict[str, Any] = {name: value}
            if cls is c.GeneratorSpec and name == "minOps":
                record["maxOps"] = 2000
            if cls is c.AcceleratorSpec and name == "tpuTopology":
                record.update(type="tpu", tpuAccelerator="tpu-v6e-slice")
            spec, path = place(cls, record)
            cases.append((spec, f"{path}.{name}", why))
    for cls in SPEC_CLASSES:
        if cls is c.ToleranceSpec:
            continue  # `tolerances.f32` takes a number too; its record has one field
        typo = dataclasses.fields(cls)[0].name + "x"
        spec, path = place(cls, {typo: 1})
        cases.append((spec, f"{path}.{typo}", "unknown field"))
    return cases


def invalid_specs() -> st.SearchStrategy[tuple[dict[str, Any], str, str]]:
    """One of `invalid_cases`, for property tests that want a draw."""
    return st.sampled_from(invalid_cases())
