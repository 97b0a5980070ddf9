"""The CRDs are the one source of truth for the resource schema: they must match the campaign
dataclasses field for field, default to the same spec, and reject what parse_spec rejects
with a clear message (jsonschema + CEL through crd_validation, and over HTTP)."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import pytest
import yaml
from xla_sentinel.campaign import (
    DTYPES,
    PLATFORMS,
    REFERENCES,
    VERDICTS,
    CampaignSpec,
    SpecError,
    parse_spec,
)
from xla_sentinel_operator import crd_validation
from xla_sentinel_operator.kube import ApiError, path

from .conftest import API, CRDS, NS, campaign

SCALARS = {int: "integer", float: "number", str: "string", bool: "boolean"}


def spec_schema(kind: str) -> dict[str, Any]:
    schema = crd_validation.schema_for(API, kind, CRDS)
    assert schema is not None, kind
    return schema["properties"]["spec"]


def check_type(tp: Any, schema: dict[str, Any], where: str) -> None:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        (tp,) = [a for a in typing.get_args(tp) if a is not type(None)]
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        assert schema.get("type") == "object", where
        check_fields(tp, schema, where)
    elif origin is list:
        assert schema.get("type") == "array", where
        check_type(typing.get_args(tp)[0], schema["items"], f"{where}[]")
    elif origin is dict:
        assert schema.get("type") == "object", where
        value = typing.get_args(tp)[1]
        if value is Any:
            assert schema.get("x-kubernetes-preserve-unknown-fields") is True, where
        else:
            check_type(value, schema["additionalProperties"], f"{where}.*")
    elif tp is Any:
        assert schema.get("x-kubernetes-preserve-unknown-fields") is True, where
    else:
        assert schema.get("type") == SCALARS[tp], f"{where}: {schema.get('type')} is not {tp}"


def check_fields(cls: type, schema: dict[str, Any], where: str) -> None:
    fields = dataclasses.fields(cls)
    hints = typing.get_type_hints(cls)
    assert set(schema["properties"]) == {f.name for f in fields}, where
    required = {f.name for f in fields if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}
    assert set(schema.get("required", [])) == required, where
    for f in fields:
        check_type(hints[f.name], schema["properties"][f.name], f"{where}.{f.name}")


def test_fuzzcampaign_spec_matches_campaignspec_field_for_field():
    check_fields(CampaignSpec, spec_schema("FuzzCampaign"), "spec")


def test_crd_enums_are_the_schema_constants():
    spec = spec_schema("FuzzCampaign")["properties"]
    assert spec["references"]["items"]["enum"] == list(REFERENCES)
    assert spec["generator"]["properties"]["dtypes"]["items"]["enum"] == list(DTYPES)
    assert spec["accelerator"]["properties"]["type"]["enum"] == list(PLATFORMS)
    assert spec["targets"]["items"]["properties"]["platform"]["enum"] == list(PLATFORMS)
    assert spec_schema("BugSignature")["properties"]["verdict"]["enum"] == list(VERDICTS)


def test_crd_defaults_give_the_dataclass_defaults():
    defaulted = crd_validation.apply_defaults(spec_schema("FuzzCampaign"), {})
    assert defaulted == CampaignSpec().to_dict()
    assert parse_spec(defaulted) == CampaignSpec()


def test_crd_default_is_filled_inside_a_partial_object():
    spec = crd_validation.apply_defaults(spec_schema("FuzzCampaign"), {"generator": {"maxOps": 8}})
    assert spec["generator"] == dataclasses.asdict(dataclasses.replace(CampaignSpec().generator, maxOps=8))


# (spec, what the CRD says, what parse_spec says): both layers refuse, each with a message.
INVALID = [
    ({"generator": {"minOps": 30}}, "spec.generator: generator.minOps must be <= generator.maxOps",
     "spec.generator.minOps"),
    ({"budget": {}}, "spec.budget: budget needs programs, seconds or continuous true", "spec.budget"),
    ({"accelerator": {"type": "tpu"}}, "accelerator type tpu needs tpuAccelerator and tpuTopology",
     "spec.accelerator"),
    ({"artifacts": {"pvc": "a", "bucketURI": "gs://b"}}, "artifacts takes pvc or bucketURI, not both",
     "spec.artifacts"),
    ({"targets": [{"name": "a"}, {"name": "a"}]}, "spec: target names must be unique",
     "duplicate target name"),
    ({"targets": [{"name": "a"}], "references": []},
     "the oracle needs at least two configurations", "the oracle needs at least two"),
    ({"tolerances": {"s32": {"k": 4}}}, "tolerances are per float dtype", "spec.tolerances.s32"),
    ({"targets": [{"name": "a", "options": {"fast": True}}]}, "XLA option names start with 'xla_'",
     "spec.targets[0].options.fast"),
    ({"workers": 0}, "spec.workers: 0 is less than the minimum of 1", "spec.workers"),
    ({"generator": {"dtypes": ["f8"]}}, "spec.generator.dtypes[0]: 'f8' is not one of",
     "spec.generator.dtypes[0]"),
    ({"wokers": 3}, "spec.wokers: unknown field", "spec.wokers: unknown field"),
]


@pytest.mark.parametrize(("spec", "crd_message", "python_message"), INVALID)
def test_invalid_spec_is_refused_by_the_crd_and_by_parse_spec(spec, crd_message, python_message):
    errors = crd_validation.validate(campaign(**spec), CRDS)
    assert any(crd_message in e for e in errors), errors
    with pytest.raises(SpecError, match=python_message.replace("[", r"\[").replace("]", r"\]")):
        parse_spec(spec)


def test_valid_tpu_campaign_passes():
    spec = {"workers": 8, "accelerator": {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice",
                                          "tpuTopology": "2x4", "count": 4}}
    assert crd_validation.validate(campaign(**spec), CRDS) == []


def test_bugsignature_rules():
    sig = {"apiVersion": API, "kind": "BugSignature", "metadata": {"name": "sig-x"},
           "spec": {"signature": "0123456789abcdef", "verdict": "crash"}}
    assert crd_validation.validate(sig, CRDS) == []
    sig["spec"].update(signature="XYZ", verdict="pass", state="gone")
    errors = crd_validation.validate(sig, CRDS)
    assert any(e.startswith("spec.signature: 'XYZ' does not match") for e in errors), errors
    assert any(e.startswith("spec.state: 'gone' is not one of") for e in errors), errors


def test_unknown_kind_and_bad_name_are_named():
    assert crd_validation.validate({"apiVersion": "v9", "kind": "Nope", "metadata": {"name": "a"}},
                                   CRDS)[0].startswith("kind: no CRD")
    assert crd_validation.validate(campaign("Bad_Name"), CRDS) == [
        "metadata.name: 'Bad_Name' must be a lowercase RFC 1123 subdomain"]


def test_printer_columns_and_status_subresource():
    docs = {d["spec"]["names"]["kind"]: d["spec"]["versions"][0]
            for f in ("fuzzcampaign.yaml", "bugsignature.yaml")
            for d in [yaml.safe_load((CRDS / f).read_text())]}
    assert [c["name"] for c in docs["FuzzCampaign"]["additionalPrinterColumns"]] == [
        "Phase", "Workers", "Programs", "Findings", "Signatures", "Ready", "Age"]
    assert [c["name"] for c in docs["BugSignature"]["additionalPrinterColumns"]][:4] == [
        "Verdict", "Op", "Count", "State"]
    assert all(v["subresources"] == {"status": {}} for v in docs.values())


async def test_api_server_refuses_an_invalid_campaign_with_the_cel_message(client):
    with pytest.raises(ApiError) as err:
        await client.create(path(API, "fuzzcampaigns", NS), campaign(generator={"minOps": 9, "maxOps": 2}))
    assert err.value.status == 422
    assert "generator.minOps must be <= generator.maxOps" in err.value.message


async def test_api_server_stores_a_valid_campaign_with_defaults(client, api):
    created, _ = await client.create(path(API, "fuzzcampaigns", NS), campaign(workers=3))
    assert created["spec"]["generator"]["maxOps"] == 24
    assert created["metadata"]["generation"] == 1 and created["metadata"]["uid"]
