"""Every name and label the operator and the workers derive from a campaign is legal for the
API server, even for a 253-character campaign name, and selectors use the same values."""

from __future__ import annotations

import re
from typing import Any

from xla_sentinel.cluster.report import CAMPAIGN_LABEL, label_value, report_name
from xla_sentinel.cluster.reporter import K8sReporter
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel_operator import desired, signatures

LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# The longest legal FuzzCampaign name: a 253-character subdomain, dots included.
LONG = ".".join(["a" * 63, "b" * 62, "c" * 62, "d" * 63])


def legal_labels(labels: dict[str, str]) -> None:
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        assert len(name) <= 63 and LABEL_VALUE.fullmatch(name) and name, key
        assert len(prefix) <= 253, key
        assert len(value) <= 63 and LABEL_VALUE.fullmatch(value), (key, value)


def camp(name: str, **spec: Any) -> desired.Campaign:
    return desired.Campaign(name=name, namespace="fuzz", uid="u-1", spec=parse_spec(spec))


def test_the_longest_campaign_name_gives_legal_job_names_and_labels():
    assert len(LONG) == 253
    c = camp(LONG, workers=4096, queueName="team-a", alerts={"teams": ["x" * 80]},
             targets=[{"name": "default"}, {"name": "old", "image": "runner:old"}])
    jobs = desired.worker_jobs(c, default_image="img")
    jobs.append(desired.bisector_job(c, {"id": "f" * 40, "signature": "0" * 16, "dir": "d"},
                                     "main-4095", default_image="img"))
    for job in jobs:
        name = job["metadata"]["name"]
        # The pods of index 4095 are host-named `<job>-4095`, a DNS label.
        assert DNS_LABEL.fullmatch(f"{name}-4095") and len(f"{name}-4095") <= 63, name
        legal_labels(job["metadata"]["labels"])
        legal_labels(job["spec"]["template"]["metadata"]["labels"])
    assert len({j["metadata"]["name"] for j in jobs}) == len(jobs)


def test_children_carry_the_label_their_campaign_selects_by():
    c = camp(LONG)
    (job,) = desired.worker_jobs(c, default_image="img")
    selector = desired.campaign_selector(LONG)
    assert selector.items() <= job["metadata"]["labels"].items()
    reporter = K8sReporter(None, namespace="fuzz", campaign=LONG, campaign_uid="u-1", worker="main-0")
    assert selector.items() <= reporter._object()["metadata"]["labels"].items()


def test_long_names_that_share_a_prefix_get_different_labels_and_names():
    other = LONG[:-1] + "e"
    assert label_value(LONG) != label_value(other)
    assert desired.job_name(LONG, "main", "r1") != desired.job_name(other, "main", "r1")
    assert report_name(LONG, "main-0") != report_name(other, "main-0")


def test_short_legal_names_are_kept_as_they_are():
    assert label_value("nightly") == "nightly"
    assert desired.job_name("nightly", "main", "abc") == "nightly-main-abc"
    assert report_name("nightly", "main-3") == "nightly-report-main-3"
    assert label_value("-bad-") != "-bad-" and LABEL_VALUE.fullmatch(label_value("-bad-"))


def test_report_names_are_subdomains_within_253_characters():
    name = report_name(LONG, "img-abcdef-4095")
    assert len(name) <= 253 and SUBDOMAIN.fullmatch(name), name


def test_team_labels_are_legal_keys():
    c = camp("nightly", alerts={"teams": ["xla", "t" * 90, "a b"]})
    body = signatures.new_signature(c, "main-0", "0" * 16, signatures.SignatureEntry(verdict="crash"))
    legal_labels(body["metadata"]["labels"])
    assert body["metadata"]["labels"]["xlasentinel.dev/team-xla"] == "true"
    assert CAMPAIGN_LABEL not in body["metadata"]["labels"]  # signatures outlive campaigns


def test_the_crd_admits_only_queue_names_that_are_legal_label_values():
    import yaml
    from tools import REPO_ROOT

    crd = yaml.safe_load((REPO_ROOT / "crds" / "fuzzcampaign.yaml").read_text())
    queue = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["queueName"]
    assert queue["maxLength"] <= 63 and queue["minLength"] == 1
    pattern = re.compile(queue["pattern"])
    for name in ("tpu-queue", "q", "a" * 63):
        assert pattern.search(name) and LABEL_VALUE.fullmatch(name)
    for bad in ("-q", "Team A", "q_1", ""):
        assert not pattern.search(bad)
