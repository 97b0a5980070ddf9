"""The runner image of a campaign's pods by its platform: a campaign without spec.image gets
the configured image of its spec.accelerator.type, an explicit image of another platform is
refused with a message naming the field and the image to use, and GPU and TPU targets are
not mixed in one campaign. Pure functions, no API (the control-plane half:
test_runner_image.py)."""

from __future__ import annotations

from typing import Any

import kopf
import pytest
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import desired
from xla_sentinel_operator.config import JobsConfig
from xla_sentinel_operator.main import config_from_args
from xla_sentinel_operator.runtime import campaign_of

IMAGES = {"cpu": "reg.example/xs/runner:1.2", "gpu": "reg.example/xs/runner-cuda:1.2",
          "tpu": "reg.example/xs/runner-tpu@sha256:" + "a" * 64}
TPU = {"type": "tpu", "tpuAccelerator": "tpu-v6e-slice", "tpuTopology": "2x2", "count": 4}


def spec(**fields: Any):
    return parse_spec({"targets": [{"name": "default"}, {"name": "O0"}], **fields})


@pytest.mark.parametrize(("accelerator", "targets", "image"), [
    ({}, [{"name": "default"}, {"name": "O0"}], IMAGES["cpu"]),
    ({"type": "gpu"}, [{"name": "default", "platform": "gpu"}, {"name": "cpu_default",
                                                               "platform": "cpu"}], IMAGES["gpu"]),
    (TPU, [{"name": "default", "platform": "tpu"}, {"name": "O0", "platform": "tpu"}], IMAGES["tpu"]),
])
def test_a_campaign_without_an_image_gets_its_platforms(accelerator, targets, image):
    assert desired.runner_image(spec(accelerator=accelerator, targets=targets), IMAGES) == image


def test_an_explicit_image_of_the_campaigns_platform_or_unknown_is_kept():
    tpu = spec(accelerator=TPU, targets=[{"name": "default", "platform": "tpu"}],
               image="reg.example/xs/runner-tpu:nightly")  # another tag of the TPU repository
    assert desired.runner_image(tpu, IMAGES) == "reg.example/xs/runner-tpu:nightly"
    own = spec(accelerator=TPU, targets=[{"name": "default", "platform": "tpu"}],
               image="my.registry:5000/team/jax-tpu:7")  # cannot be told: trusted
    assert desired.runner_image(own, IMAGES) == "my.registry:5000/team/jax-tpu:7"
    assert desired.runner_image(own, IMAGES, declared="tpu") == "my.registry:5000/team/jax-tpu:7"


@pytest.mark.parametrize(("fields", "declared", "message"), [
    # The CPU runner on a TPU campaign: jax without libtpu would hold chips it cannot open.
    ({"accelerator": TPU, "targets": [{"name": "default", "platform": "tpu"}],
      "image": "reg.example/xs/runner:1.1"},
     None, r"spec.image: reg.example/xs/runner:1.1 is a cpu runner image, but the campaign runs "
           r"on tpu .* use the tpu image reg.example/xs/runner-tpu@sha256"),
    ({"accelerator": {"type": "gpu"}, "targets": [{"name": "default", "platform": "gpu"}],
      "image": "my.registry/jax:7"},
     "tpu", r"spec.image: my.registry/jax:7 is a tpu runner image, but the campaign runs on gpu"),
    ({"accelerator": TPU, "targets": [{"name": "default", "platform": "tpu"},
                                      {"name": "old", "platform": "tpu",
                                       "image": "reg.example/xs/runner-cuda:0.9"}]},
     None, r"spec.targets\[1\].image: .* is a gpu runner image"),
    ({"accelerator": TPU, "targets": [{"name": "default", "platform": "tpu"}]},
     "tpuv6", r"annotation xlasentinel.dev/image-platform: 'tpuv6' is no platform"),
    # One pod sits on one node: a TPU target cannot run on a CPU campaign's pods...
    ({"targets": [{"name": "default", "platform": "tpu"}, {"name": "O0"}]},
     None, r"spec.targets\[0\].platform: tpu target 'default' cannot run on a cpu campaign's "
           r"pods; set spec.accelerator.type: tpu"),
    # ... and a campaign mixing GPU and TPU targets is split, not half run.
    ({"accelerator": {"type": "gpu"}, "targets": [{"name": "default", "platform": "gpu"},
                                                  {"name": "O0", "platform": "tpu"}]},
     None, r"spec.targets\[1\].platform: .* split it into one campaign per platform"),
])
def test_a_mismatched_image_or_mixed_platforms_are_refused(fields, declared, message):
    with pytest.raises(desired.ImageError, match=message):
        desired.runner_image(spec(**fields), IMAGES, declared)


def test_the_refusal_is_a_stalled_reason_before_any_job():
    body = {"metadata": {"name": "tpu", "namespace": "ns", "uid": "u",
                         "annotations": {desired.IMAGE_PLATFORM_ANNOTATION: "cpu"}},
            "spec": {"targets": [{"name": "default", "platform": "tpu"}], "accelerator": TPU,
                     "image": "my.registry/jax:7"}}
    with pytest.raises(kopf.PermanentError) as refused:
        campaign_of(body, IMAGES)
    assert refused.value.reason == "ImagePlatformMismatch"  # type: ignore[attr-defined]
    assert "is a cpu runner image" in str(refused.value)
    del body["metadata"]["annotations"]
    assert campaign_of(body, IMAGES).spec.image == "my.registry/jax:7"


def test_repository_drops_tag_and_digest_but_not_a_registry_port():
    assert desired.repository("reg:5000/a/b:1@sha256:ff") == "reg:5000/a/b"
    assert desired.repository("reg:5000/a/b") == "reg:5000/a/b"
    assert desired.repository("b:latest") == "b"


def test_operator_flags_set_each_platforms_image():
    config = config_from_args(["--runner-image=c:1", "--gpu-runner-image=g:1",
                               "--tpu-runner-image=t:1"])
    assert config.jobs.images() == {"cpu": "c:1", "gpu": "g:1", "tpu": "t:1"}
    assert set(JobsConfig().images()) == {"cpu", "gpu", "tpu"}
