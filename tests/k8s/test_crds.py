"""The CRDs are the one source of truth for the resource schema: they must match the campaign
dataclasses field for field, default to the same spec, and reject what parse_spec rejects
with a clear message. Validation, defaulting and CEL (compiled with its real cost limits)
are kube-apiserver's own: every case goes through the real API server."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import pytest
import yaml
from xla_sentinel.spec.campaign import (
    DTYPES,
    OP_NAMES,
    PLATFORMS,
    REFERENCES,
    VERDICTS,
    CampaignSpec,
    SpecError,
    parse_spec,
)

from .conftest import API, CRDS, campaign

SCALARS = {int: "integer", float: "number", str: "string", bool: "boolean"}


def spec_schema(kind: str) -> dict[str, Any]:
    for crd in (d for f in CRDS.glob("*.yaml") for d in yaml.safe_load_all(f.read_text()) if d):
        if crd["spec"]["names"]["kind"] == kind:
            (version,) = [v for v in crd["spec"]["versions"] if v["name"] == API.split("/")[1]]
            return version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    raise AssertionError(f"no CRD for {kind}")


def server_create(api, obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    plural = {"FuzzCampaign": "fuzzcampaigns", "BugSignature": "bugsignatures"}[obj["kind"]]
    # Strict field validation, as kubectl asks for by default: an unknown field is an error.
    return api.request("POST", f"/apis/{API}/namespaces/{obj['metadata']['namespace']}/{plural}"
                       "?fieldValidation=Strict", obj)


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
            # Either an open object, or a map whose values are open (CEL can range over it).
            open_values = (schema.get("additionalProperties") or {}).get(
                "x-kubernetes-preserve-unknown-fields")
            assert schema.get("x-kubernetes-preserve-unknown-fields") or open_values, where
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
    assert spec["generator"]["properties"]["ops"]["items"]["enum"] == list(OP_NAMES)
    assert spec["generator"]["properties"]["excludeOps"]["items"]["enum"] == list(OP_NAMES)
    assert spec["accelerator"]["properties"]["type"]["enum"] == list(PLATFORMS)
    assert spec["targets"]["items"]["properties"]["platform"]["enum"] == list(PLATFORMS)
    assert spec_schema("BugSignature")["properties"]["verdict"]["enum"] == list(VERDICTS)


def test_crd_defaults_give_the_dataclass_defaults(api, ns):
    code, stored = server_create(api, campaign(ns, "defaults"))
    assert code == 201, stored
    assert stored["spec"] == CampaignSpec().to_dict()
    assert parse_spec(stored["spec"]) == CampaignSpec()


def test_crd_default_is_filled_inside_a_partial_object(api, ns):
    code, stored = server_create(api, campaign(ns, "partial", generator={"maxOps": 8}))
    assert code == 201, stored
    # Unset optional fields (shapes, devices, sharded: the generator version's defaults)
    # stay unset, as CampaignSpec.to_dict leaves them out.
    spec = CampaignSpec(generator=dataclasses.replace(CampaignSpec().generator, maxOps=8))
    assert stored["spec"]["generator"] == spec.to_dict()["generator"]


# (spec, what the CRD says, what parse_spec says): both layers refuse, each with a message.
INVALID = [
    ({"generator": {"minOps": 30}}, 'spec.generator: Invalid value: "object": generator.minOps must be <= generator.maxOps',
     "spec.generator.minOps"),
    ({"budget": {}}, 'spec.budget: Invalid value: "object": budget needs programs, seconds or continuous true', "spec.budget"),
    ({"accelerator": {"type": "tpu"}}, "accelerator type tpu needs tpuAccelerator and tpuTopology",
     "spec.accelerator"),
    ({"artifacts": {"pvc": "a", "bucketURI": "gs://b"}}, "artifacts takes pvc or bucketURI, not both",
     "spec.artifacts"),
    ({"targets": [{"name": "a"}, {"name": "a"}]}, 'spec.targets[1]: Duplicate value: {"name":"a"}',
     "duplicate target name"),
    ({"targets": [{"name": "a"}], "references": []},
     "the oracle needs at least two configurations", "the oracle needs at least two"),
    ({"tolerances": {"s32": {"k": 4}}}, "tolerances are per float dtype", "spec.tolerances.s32"),
    ({"workers": 0}, "spec.workers in body should be greater than or equal to 1", "spec.workers"),
    ({"generator": {"dtypes": ["f8"]}}, 'spec.generator.dtypes[0]: Unsupported value: "f8"',
     "spec.generator.dtypes[0]"),
    ({"wokers": 3}, 'unknown field "spec.wokers"', "spec.wokers: unknown field"),
    ({"accelerator": {"tpuAccelerator": "tpu-v6e-slice"}},
     "tpuAccelerator and tpuTopology apply to accelerator type tpu only",
     "spec.accelerator: tpuAccelerator and tpuTopology apply to type tpu only"),
    ({"accelerator": {"gpuType": "nvidia-l4"}}, "gpuType applies to accelerator type gpu only",
     "spec.accelerator.gpuType: applies to type gpu only"),
    ({"accelerator": {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "2x4", "hosts": 2}},
     "a TPU slice's hosts come from tpuTopology", "spec.accelerator.hosts: a TPU slice's hosts come from tpuTopology"),
    ({"accelerator": {"hosts": 9}}, "spec.accelerator.hosts in body should be less than or equal to 8",
     "spec.accelerator.hosts: must be between 1 and 8"),
]


@pytest.mark.parametrize(("spec", "crd_message", "python_message"), INVALID)
def test_invalid_spec_is_refused_by_the_api_server_and_by_parse_spec(
        api, ns, spec, crd_message, python_message):
    code, answer = server_create(api, campaign(ns, "bad", **spec))
    assert code in (400, 422), answer
    assert crd_message in answer["message"], answer["message"]
    with pytest.raises(SpecError, match=python_message.replace("[", r"\[").replace("]", r"\]")):
        parse_spec(spec)


def test_option_names_are_the_schema_s_check_since_cel_cannot_type_them(api, ns):
    """Options hold bools, numbers and strings, which no CEL type covers: the API server
    stores a bad option name, and parse_spec (which the operator runs) refuses it."""
    spec = {"targets": [{"name": "a", "options": {"fast": True}}]}
    code, answer = server_create(api, campaign(ns, "options", **spec))
    assert code == 201, answer
    with pytest.raises(SpecError, match=r"spec\.targets\[0\]\.options\.fast"):
        parse_spec(spec)


def test_valid_tpu_campaign_is_stored(api, ns):
    spec = {"workers": 8, "accelerator": {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice",
                                          "tpuTopology": "2x4", "count": 4}}
    code, answer = server_create(api, campaign(ns, "tpu", **spec))
    assert code == 201, answer


def test_bugsignature_rules(api, ns):
    sig = {"apiVersion": API, "kind": "BugSignature",
           "metadata": {"name": "sig-x", "namespace": ns},
           "spec": {"signature": "0123456789abcdef", "verdict": "crash"}}
    code, answer = server_create(api, sig)
    assert code == 201, answer
    sig["metadata"]["name"] = "sig-y"
    sig["spec"].update(signature="XYZ", verdict="pass", state="gone")
    code, answer = server_create(api, sig)
    assert code == 422
    assert 'spec.signature: Invalid value: "XYZ": spec.signature in body should match' in answer["message"]
    assert 'spec.state: Unsupported value: "gone"' in answer["message"]


def test_a_pass_is_no_bug_signature(api, ns):
    sig = {"apiVersion": API, "kind": "BugSignature", "metadata": {"name": "sig-p", "namespace": ns},
           "spec": {"signature": "0123456789abcdef", "verdict": "pass"}}
    code, answer = server_create(api, sig)
    assert code == 422 and "a pass is not a bug" in answer["message"], answer


def test_a_bad_name_is_refused_by_name(api, ns):
    code, answer = server_create(api, campaign(ns, "Bad_Name"))
    assert code == 422
    assert "metadata.name: Invalid value: \"Bad_Name\"" in answer["message"]


def test_printer_columns_and_status_subresource():
    docs = {d["spec"]["names"]["kind"]: d["spec"]["versions"][0]
            for f in ("fuzzcampaign.yaml", "bugsignature.yaml")
            for d in yaml.safe_load_all((CRDS / f).read_text()) if d}
    assert [c["name"] for c in docs["FuzzCampaign"]["additionalPrinterColumns"]] == [
        "Phase", "Workers", "Programs", "Findings", "Signatures", "Ready", "Age"]
    assert [c["name"] for c in docs["BugSignature"]["additionalPrinterColumns"]][:4] == [
        "Verdict", "Op", "Count", "State"]
    assert all(v["subresources"] == {"status": {}} for v in docs.values())
