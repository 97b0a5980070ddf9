"""Generator versions (issue 28): version 1 keeps the programs a seed gave before, version 2
(the default) draws the shape families, multi-device programs and large sizes.

The digests below were computed from the generator as it was before issue 28 changed it
(commit 91d7b02, `generate(seed, i, spec).to_json()` of the first 60 programs, JSON with
sorted keys, hashed in order); version 1 must still give exactly those programs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

import pytest
from xla_sentinel.programs import generator
from xla_sentinel.programs.generator import generate
from xla_sentinel.spec.campaign import (
    DEFAULT_FAMILY_WEIGHTS,
    GENERATOR_VERSION,
    SHAPE_FAMILIES,
    GeneratorSpec,
    SpecError,
    parse_spec,
    resolve_generator,
)

# (spec, seed) -> sha256 of the first 60 programs, drawn before issue 28.
BEFORE = [
    (GeneratorSpec(version=1), 7, "e6f76ba23778f0baca791f51656988785bf1fb62c70c94509a201f543d772d3a"),
    (GeneratorSpec(version=1), 3, "5c8f512df2b2437eee44fbc825f4b025f934915c2d7a9e4d4c036a1373c4af66"),
    (GeneratorSpec(version=1, minOps=3, maxOps=12, dtypes=["f32"]), 3,
     "cb948aaf5c1fc8d6ba4e13f92a6fc87b51461f0b21c60bef7d331985a23158d6"),
    (GeneratorSpec(version=1, shapes=list(SHAPE_FAMILIES), devices=4), 7,
     "6effee07e3eaa875b221ea1f77374e78fe3cf9ccf8798de62088c1650de577fb"),
]
N = 60


def _digest(spec: GeneratorSpec, seed: int, n: int = N) -> str:
    h = hashlib.sha256()
    for i in range(n):
        h.update(json.dumps(generate(seed, i, spec).to_json(), sort_keys=True).encode())
    return h.hexdigest()


@pytest.mark.parametrize(("spec", "seed", "digest"), BEFORE, ids=["default-s7", "default-s3", "f32-s3", "shapes-devices-s7"])
def test_version_1_gives_the_programs_it_gave_before(spec: GeneratorSpec, seed: int, digest: str) -> None:
    assert _digest(spec, seed) == digest


def test_version_2_is_the_default_and_differs() -> None:
    assert GeneratorSpec().version == GENERATOR_VERSION == 2
    assert parse_spec({}).generator.version == 2
    assert _digest(GeneratorSpec(), 7) != BEFORE[0][2]


def test_version_1_is_a_spec_field_and_other_versions_are_refused() -> None:
    assert parse_spec({"generator": {"version": 1}}).generator.version == 1
    with pytest.raises(SpecError, match=r"spec\.generator\.version: must be one of 1, 2"):
        parse_spec({"generator": {"version": 3}})


def test_version_defaults_of_the_unset_fields() -> None:
    old, new = GeneratorSpec(version=1), GeneratorSpec()
    assert old.families() == () and old.device_count() == 1 and old.sharded_share() == 0.5
    assert new.families() == tuple(DEFAULT_FAMILY_WEIGHTS) and set(new.families()) == set(SHAPE_FAMILIES)
    assert new.device_count() == 4 and new.sharded_share() == 0.15
    # Named families weigh 1 (version 1's draw); `[]` draws none in either version.
    assert GeneratorSpec(shapes=["loops"]).family_weight("loops") == 1.0
    assert new.family_weight("loops") == DEFAULT_FAMILY_WEIGHTS["loops"]
    assert GeneratorSpec(shapes=[]).families() == ()


def test_default_programs_draw_families_devices_and_large_sizes() -> None:
    spec = GeneratorSpec()
    graphs = [generate(11, i, spec) for i in range(160)]
    families = {n.family for g in graphs for n in g.nodes if n.family}
    assert {"loops", "indices", "mixed_precision", "templates", "buffers"} <= families
    sharded = [g for g in graphs if g.sharding is not None]
    assert sharded and all(g.sharding.devices == 4 for g in sharded)
    large = [g for i, g in enumerate(graphs) if generator.large_drawn(11, i, spec)]
    assert len(large) >= 3, "too few programs past the kernel thresholds in 160"
    for g in large:
        # Past 4,096 elements, cheap ops only, few of them, and never sharded.
        assert math.prod(g.values[0].shape) >= 4096
        assert len(g.nodes) <= generator.LARGE_MAX_OPS and g.sharding is None
        assert all(generator.OPS[n.op].category in generator.LARGE_CATEGORIES for n in g.nodes)
        assert not {n.op for n in g.nodes} & set(generator.LARGE_EXCLUDED)
    small = [g for i, g in enumerate(graphs) if not generator.large_drawn(11, i, spec)]
    assert all(math.prod(g.inputs[0].shape) <= generator.MAX_ELEMENTS // 4 for g in small if g.inputs)


def test_plain_generator_is_version_1_or_no_families_one_device() -> None:
    plain = GeneratorSpec(shapes=[], devices=1, version=1)
    for i in range(40):
        g = generate(5, i, plain)
        assert not any(n.family for n in g.nodes) and g.sharding is None


def test_devices_follow_the_accelerator_where_a_target_runs_on_one() -> None:
    cpu = parse_spec({})
    assert resolve_generator(cpu).device_count() == 4
    gpu = parse_spec({"targets": [{"name": "g", "platform": "gpu"}], "references": ["f64_numpy"]})
    assert resolve_generator(gpu).device_count() == 1
    two = dataclasses.replace(gpu, accelerator=dataclasses.replace(gpu.accelerator, type="gpu", count=2))
    assert resolve_generator(two).device_count() == 2
    pinned = parse_spec({"generator": {"devices": 3}, "targets": [{"name": "g", "platform": "gpu"}],
                         "references": ["f64_numpy"]})
    assert resolve_generator(pinned).device_count() == 3
