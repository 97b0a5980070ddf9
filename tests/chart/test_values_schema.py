"""values.schema.json stops bad values at `helm template`, naming the offending key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from .render import CHART, helm, template_args

BAD_VALUES = {
    "replicas-zero": ({"operator": {"replicas": 0}},
                      "at '/operator/replicas': minimum: got 0, want 1"),
    "unknown-key": ({"operator": {"replica": 2}},
                    "at '/operator': additional properties 'replica' not allowed"),
    "pull-policy": ({"images": {"pullPolicy": "Sometimes"}},
                    "at '/images/pullPolicy'"),
    "route-without-secret": ({"alerts": {"routes": [{"team": "xla-cpu"}]}},
                             "at '/alerts/routes/0': missing property 'webhookSecretRef'"),
    "tpu-quantity": ({"workerPresets": {"tpu": {"resources": {"limits": {"google.com/tpu": "four"}}}}},
                     "at '/workerPresets/tpu/resources/limits/google.com~1tpu'"),
    "namespace-name": ({"operator": {"watchNamespaces": ["XLA_Fuzz"]}},
                       "at '/operator/watchNamespaces/0': 'XLA_Fuzz' does not match pattern"),
    "digest": ({"images": {"operator": {"repository": "op", "digest": "sha256:abc"}}},
               "at '/images/operator/digest'"),
    "bucket-and-pvc": ({"artifacts": {"bucketURI": "gs://xla-findings", "pvc": {"create": True}}},
                       "at '/artifacts/pvc/create': value must be false"),
    "campaign-without-spec": ({"campaigns": [{"name": "nightly"}]},
                              "at '/campaigns/0': missing property 'spec'"),
    "port-range": ({"operator": {"port": 70000}},
                   "at '/operator/port': maximum: got 70,000, want 65,535"),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_bad_values_fail_with_the_key_named(case: str, tmp_path: Path) -> None:
    values, message = BAD_VALUES[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(yaml.safe_dump(values))
    out = helm(*template_args(path))
    assert out.returncode != 0, f"{case}: helm accepted bad values"
    assert "values don't meet the specifications of the schema" in out.stderr
    assert message in out.stderr, out.stderr


def test_schema_is_strict_at_every_level_that_has_properties() -> None:
    # A section without additionalProperties: false silently accepts typos. Conditional
    # sub-schemas (allOf) only add constraints to sections declared strict elsewhere.
    def walk(node: object, path: str) -> list[str]:
        loose = []
        if isinstance(node, dict):
            if "properties" in node and node.get("additionalProperties") is not False:
                loose.append(path or "/")
            for k, v in node.items():
                if k != "allOf":
                    loose += walk(v, f"{path}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                loose += walk(v, f"{path}/{i}")
        return loose

    schema = json.loads((CHART / "values.schema.json").read_text())
    assert walk(schema, "") == []
