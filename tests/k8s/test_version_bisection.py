"""A campaign's bisections also search jaxlib releases (spec.bisect.versions, issue 14), and
what they find reaches the BugSignature's status.bisection, on the real control plane.

The loop: a worker reports a finding (simulated, as in test_bug_lifecycle: workers.Worker is
the real reporter) -> the operator's bisector Job, with `--versions A..B` -> its pod, run by
the fake node (tests/controlplane/kubelet.py) in its own identity: the real `xla-sentinel
worker --bisect` (the localization pipeline, then `bisect --versions` over the releases) ->
its WorkerReport result -> the operator -> status.bisection introducedIn / lastGood.

What stands for what: the runner image "runner:versions" is this checkout's xla-sentinel
with release environments it holds (XLA_SENTINEL_VERSION_ENVS, as the Dockerfile's
VERSION_ENVS build sets it); the releases are the simulated ones of tests/versions
(0.94.0 and later register the odd_tail_multiply fault); and the shared artifacts volume
the worker wrote the finding to is the image's entrypoint copying the finding folder to
the path the Job names. Worker pods of that image only sleep: the reporter above is the
worker. Every compile, worker and search in the bisector pod is real.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from versions.conftest import fake_release
from xla_sentinel.core.program import save_arrays
from xla_sentinel_operator.kube import path

from .conftest import API, RUNNER, campaign, create, eventually
from .test_bug_lifecycle import sig_of
from .workers import Worker, finding

SIG = "0123456789abcdef"
RANGE = "0.90.0..0.96.0"
IMAGE = "runner:versions"


def finding_folder(folder: Path, record: dict) -> None:
    """A finding as the engine writes one: x * y + 1 over f32[4, 7] (the fault leaves the
    last element of each odd row unmultiplied), its inputs and float64 expected values."""
    rng = np.random.default_rng(0)
    x, y = (rng.uniform(1, 2, (4, 7)).astype(np.float32) for _ in range(2))
    (folder / "program").mkdir(parents=True)
    (folder / "program" / "module.mlir").write_text(
        jax.jit(lambda a, b: a * b + jnp.float32(1)).lower(x, y).as_text())
    save_arrays(folder / "program" / "inputs.npz", [x, y], ["f32", "f32"])
    save_arrays(folder / "expected.npz", [x.astype(np.float64) * y.astype(np.float64) + 1], ["f64"])
    evidence = {"output": 0, "threshold": 32 * 2.0**-24, "target_options": {}}
    (folder / "finding.json").write_text(json.dumps({**record, "format": 1, "evidence": evidence}))


def bundle_folder(folder: Path) -> None:
    """A repro bundle of the same bug, as bundle.py writes one (repro_template.render)."""
    from xla_sentinel.bisect import repro_template

    finding_folder(folder / "f", {})
    for name in ("module.mlir", "inputs.npz"):
        (folder / name).write_bytes((folder / "f" / "program" / name).read_bytes())
    (folder / "expected.npz").write_bytes((folder / "f" / "expected.npz").read_bytes())
    (folder / "repro.py").write_text(repro_template.render(
        "bundle", "wrong_result", {}, [], ["f32", "f32"],
        [{"dtype": "f32", "float": True, "threshold": 32 * 2.0**-24}]))


def versions_image(root: Path, record: dict) -> list[str]:
    """The entrypoint of the runner image with release environments (see the module doc)."""
    envs = root / "envs"
    for v in ("0.90.0", "0.92.0", "0.94.0", "0.96.0"):
        fake_release(envs, v, fault="odd_tail_multiply.py" if v >= "0.94.0" else None)
    finding_folder(root / "finding", record)
    bundle_folder(root / "bundle")
    # `worker --bisect PATH` and `worker --verify PATH`: what the worker left at PATH first.
    script = (f'case "$2" in --bisect) src=finding ;; --verify) src=bundle ;; *) exec sleep 600 ;; esac; '
              f'mkdir -p "$(dirname "$3")" && cp -r {shlex.quote(str(root))}/$src "$3" && '
              f'XLA_SENTINEL_VERSION_ENVS={shlex.quote(str(envs))} exec {shlex.quote(RUNNER[0])} "$@"')
    return ["sh", "-c", script, "entrypoint"]


async def test_a_version_bisection_reaches_the_signature_status(
        api, ns, client, start_operator, node, worker_kubeconfig):
    fake = node()
    record = finding(SIG, 1, op=None)
    # The node's own folder stays visible inside its containers: the image's files live there.
    fake.images[IMAGE] = versions_image(fake.root / "image", record)
    await start_operator()
    fc = await create(client, campaign(ns, workers=1, image=IMAGE, bisect={"versions": RANGE}))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(record)

    (job,) = await eventually(lambda: api.all("batch/v1/jobs", ns, {"xlasentinel.dev/role": "bisector"}))
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == IMAGE and container["args"][-2:] == ["--versions", RANGE]

    bisection = await eventually(lambda: sig_of(api, ns).get("status", {}).get("bisection"),
                                 timeout=300, interval=1)
    assert (bisection["versionStatus"], bisection["versionRange"]) == ("found", RANGE)
    # 0.94.0 is the first simulated release with the fault; 0.92.0 the newest without it.
    assert (bisection["introducedIn"], bisection["lastGood"]) == ("0.94.0", "0.92.0")
    # The localization ran on the image's own (current) jaxlib, which has no fault.
    assert bisection["status"] == "not_reproduced" and bisection["finding"] == record["id"]
    # The pod writes its result just before it exits 0.
    await eventually(lambda: [p["status"].get("phase") for p in api.all(
        "v1/pods", ns, {"xlasentinel.dev/role": "bisector"})] == ["Succeeded"], timeout=60)


async def test_a_fix_is_verified_on_the_fixing_release_the_image_holds(
        api, ns, client, start_operator, node, worker_kubeconfig):
    """Marking the bug fixed in 0.92.0 runs its bundle on 0.92.0 (the image holds it), not on
    the image's own jaxlib; status.verification says which release it ran on."""
    fake = node()
    record = finding(SIG, 1, op=None)
    fake.images[IMAGE] = versions_image(fake.root / "image", record)
    await start_operator()
    fc = await create(client, campaign(ns, workers=1, image=IMAGE, bisect={"enabled": False}))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(record)
    await eventually(lambda: sig_of(api, ns).get("status", {}).get("count") == 1)
    repro = f"/artifacts/nightly/main-0/{record['dir']}/repro"
    await client.patch(path(API, "bugsignatures", ns, f"sig-{SIG}"),
                       {"spec": {"state": "fixed", "fixedIn": "0.92.0", "repro": repro}})
    verification = await eventually(lambda: sig_of(api, ns).get("status", {}).get("verification"),
                                    timeout=300, interval=1)
    assert (verification["result"], verification["jaxlib"]) == ("verified", "0.92.0")
    assert verification["exitCode"] == 0 and verification["fixedIn"] == "0.92.0"
    assert "jaxlib 0.92.0: verified" in verification["evidence"]
