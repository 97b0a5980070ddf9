"""`xla-sentinel worker`: the entrypoint of a worker pod of a FuzzCampaign.

The operator puts the campaign spec (JSON) in the environment, Kubernetes gives the shard
index (JOB_COMPLETION_INDEX of the Indexed Job); the worker runs its shard with the engine
and reports findings and counters to its WorkerReport object (see k8s_report). jax is
imported only when the engine runs, so argument and spec errors cost no jax import.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xla_sentinel.core.versions import package_versions
from xla_sentinel.spec.campaign import BudgetSpec, CampaignSpec, SpecError, parse_spec
from xla_sentinel.worker.memory import engine_workers

_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="xla-sentinel worker",
                                description="Run one shard of a FuzzCampaign in a worker pod.")
    p.add_argument("--spec-file", default=env("XLA_SENTINEL_SPEC_FILE"),
                   help="campaign spec as YAML or JSON (default: $XLA_SENTINEL_SPEC, JSON)")
    p.add_argument("--campaign", default=env("XLA_SENTINEL_CAMPAIGN", "campaign"))
    p.add_argument("--campaign-uid", default=env("XLA_SENTINEL_CAMPAIGN_UID", ""))
    p.add_argument("--namespace", default=env("XLA_SENTINEL_NAMESPACE"))
    p.add_argument("--group", default=env("XLA_SENTINEL_WORKER_GROUP", "main"),
                   help="worker group (one per runner image)")
    p.add_argument("--targets", default=env("XLA_SENTINEL_TARGETS", ""),
                   help="comma-separated target names this group runs (default: all)")
    # On a multi-host slice (TPU or a CPU/GPU group) the Job's index is the host; the
    # operator names the shard.
    p.add_argument("--shard-index", type=int,
                   default=int(env("XLA_SENTINEL_SHARD_INDEX") or env("JOB_COMPLETION_INDEX", "0")))
    p.add_argument("--shard-count", type=int, default=None,
                   help="number of shards (default: spec.workers)")
    p.add_argument("--out", default=None,
                   help="output folder (default: /artifacts/CAMPAIGN/WORKER)")
    p.add_argument("--report", choices=("k8s", "none"), default=env("XLA_SENTINEL_REPORT", "k8s"))
    p.add_argument("--api-server", default=env("XLA_SENTINEL_API_SERVER"),
                   help="Kubernetes API URL (default: in-cluster configuration)")
    p.add_argument("--processes", type=int, default=int(env("XLA_SENTINEL_PROCESSES", "1")),
                   help="engine worker processes in this pod (spec.workers counts pods here)")
    p.add_argument("--revision", default=env("XLA_SENTINEL_REVISION", ""),
                   help="campaign revision (the operator's hash of the spec): reports are per revision")
    p.add_argument("--image", default=env("XLA_SENTINEL_IMAGE", ""),
                   help="runner image, recorded with the jax/jaxlib versions findings are seen on")
    p.add_argument("--progress-interval", type=float, default=5.0)
    p.add_argument("--bucket-uri", default=env("XLA_SENTINEL_BUCKET_URI"),
                   help="object storage root (default: spec.artifacts.bucketURI); the shard's "
                   "output is mirrored to BUCKET/CAMPAIGN/WORKER, the --out folder staging it")
    p.add_argument("--storage-wait", type=float, default=float(env("XLA_SENTINEL_STORAGE_WAIT", "600")),
                   help="seconds to wait at the end for a store that is down or denied")
    # One-off Jobs the operator starts; each writes its result back as a WorkerReport.
    p.add_argument("--bisect", metavar="FINDING_DIR",
                   help="bisect one finding (a bisector Job) and report the result")
    p.add_argument("--verify", metavar="BUNDLE",
                   help="run a repro bundle (a fix verification Job) and report the outcome")
    p.add_argument("--signature", default="", help="the BugSignature a --bisect/--verify is for")
    p.add_argument("--fixed-in", default="", help="the version a --verify checks a fix in")
    p.add_argument("--versions", default="", metavar="A..B",
                   help="with --bisect: also the first jaxlib release in A..B that shows the "
                   "finding, in the environments this image holds (spec.bisect.versions)")
    p.add_argument("--inject-pass", action="append", default=[])
    return p


def load_spec(args: argparse.Namespace) -> CampaignSpec:
    """The spec from --spec-file or $XLA_SENTINEL_SPEC, cut to --targets; SpecError if bad."""
    import yaml

    if args.spec_file:
        try:
            data = yaml.safe_load(Path(args.spec_file).read_text())
        except OSError as e:
            raise SpecError(f"{args.spec_file}: cannot read spec ({e.strerror or e})") from None
        except yaml.YAMLError:
            raise SpecError(f"{args.spec_file}: malformed YAML/JSON") from None
    else:
        text = os.environ.get("XLA_SENTINEL_SPEC")
        if not text:
            raise SpecError("XLA_SENTINEL_SPEC: not set and no --spec-file given")
        try:
            data = json.loads(text)
        except ValueError as e:
            raise SpecError(f"XLA_SENTINEL_SPEC: malformed JSON ({e})") from None
    spec = parse_spec(data)
    if args.targets:
        names = [n for n in args.targets.split(",") if n]
        unknown = [n for n in names if n not in {t.name for t in spec.targets}]
        if unknown:
            raise SpecError(f"--targets: {unknown[0]!r} is not a target of the spec")
        spec = dataclasses.replace(spec, targets=[t for t in spec.targets if t.name in names])
    return spec


def shard_budget(budget: BudgetSpec, index: int, count: int) -> BudgetSpec | None:
    """This shard's part of a program budget (the campaign's first N program indices, dealt
    round-robin); None when the shard has no program to run. Time budgets apply per shard."""
    if budget.continuous or budget.programs is None:
        return budget
    share = max(0, (budget.programs - index + count - 1) // count)
    return dataclasses.replace(budget, programs=share) if share else None


# Exit codes of a worker, as the worker Job's podFailurePolicy reads them (desired.py):
# 0 the shard is done (its index completes for good); 2 bad spec or arguments (the index
# fails at once: a retry cannot help); STOPPED the pod was told to stop (SIGTERM) before its
# shard was done, so the index must run again; anything else is a crash (1 an exception,
# 134 abort, 137 killed, 139 segfault) and counts against backoffLimitPerIndex.
EXIT_DONE, EXIT_BAD_INPUT, STOPPED = 0, 2, 143


def shard_done(budget: BudgetSpec | None, summary: dict[str, Any]) -> bool:
    """Whether the shard's budget is spent by `summary` (the engine's), rather than the run
    having been stopped early. A continuous shard is never done."""
    if budget is None:
        return True
    if budget.continuous:
        return False
    if budget.programs is not None and int(summary.get("programs") or 0) >= budget.programs:
        return True
    return budget.seconds is not None and float(summary.get("elapsed_s") or 0.0) >= budget.seconds


def resumed_report(db: Path, worker: str) -> Any:
    """The counts of a store this pod resumes (a persistent artifacts volume), as a
    WorkerReport, or None for a fresh store. The engine does not report a finding its store
    already holds, so a resumed attempt starts its counts here, not at zero."""
    if not db.exists():
        return None
    from xla_sentinel.cluster.report import SignatureEntry, WorkerReport
    from xla_sentinel.storage.store import Store

    store = Store(db)
    try:
        totals = store.totals()
        sigs = {s.id: SignatureEntry(verdict=str(s.verdict.value), count=s.count,
                                     first_seen=s.first_seen, last_seen=s.last_seen)
                for s in store.signatures()}
    finally:
        store.close()
    report = WorkerReport(worker=worker, programs=int(totals["programs"]),
                          executions=int(totals["executions"]))
    from xla_sentinel.cluster.report import LIMITS

    for sig, entry in sigs.items():  # first seen first, as the store orders them
        if len(report.signatures) < LIMITS.signatures:
            report.signatures[sig] = entry
        else:
            report.overflow[entry.verdict] = report.overflow.get(entry.verdict, 0) + entry.count
    return report


def _custom_api(args: argparse.Namespace) -> Any:
    import kubernetes

    if args.api_server:
        config = kubernetes.client.Configuration()
        config.host = args.api_server
        client = kubernetes.client.ApiClient(config)
    else:
        # kubernetes leaves this unannotated: its signature, so that the call is checked.
        load_incluster_config: Callable[[], None] = kubernetes.config.load_incluster_config
        load_incluster_config()
        client = kubernetes.client.ApiClient()
    return kubernetes.client.CustomObjectsApi(client)


def _namespace(args: argparse.Namespace) -> str:
    return args.namespace or (_SA_NAMESPACE.read_text().strip()
                              if _SA_NAMESPACE.exists() else "default")


def bisection_result(record: dict[str, Any], result: dict[str, Any], finding_dir: Path,
                     candidate: str) -> dict[str, Any]:
    """What a bisector Job reports: the culprit, the reduced size, the bundle's location and
    the signature the finding refines to (computed as local refinement computes it)."""
    from xla_sentinel.triage.signature import signature_id

    localized = result.get("status") == "localized"
    culprit = {k: result.get(k) for k in ("culprit_op", "fusion_kind", "culprit_pass")}
    evidence = record.get("evidence") or {}
    refined = (signature_id({**record, **culprit, "error": evidence.get("error")})
               if localized else candidate)
    reduce = (result.get("stages") or {}).get("reduce") or {}
    return {"finding": str(record.get("id") or finding_dir.name), "candidate": candidate,
            "signature": refined, "status": str(result.get("status")), **culprit,
            "reduced_ops": reduce.get("ops_after"), "original_ops": reduce.get("ops_before"),
            "repro": str(finding_dir / result["repro"]) if result.get("repro") else None,
            "error": result.get("error")}


def version_bisection(folder: Path, releases: str) -> dict[str, Any]:
    """What `bisect --versions A..B` finds for the finding (docs/versions.md), as the
    result's introducedIn, lastGood and versionStatus; a range this image holds no
    environments for is versionStatus "error" with the reason, the rest of the result kept."""
    from xla_sentinel.bisect.versions import VersionBisectError, bisect_versions, signature_fields

    out: dict[str, Any] = {"versionRange": releases}
    try:
        result = bisect_versions(folder, releases)
    except (VersionBisectError, OSError) as e:
        return {**out, "versionStatus": "error", "versionError": str(e)[:1000]}
    out["versionStatus"] = result["status"]
    if result.get("error"):
        out["versionError"] = str(result["error"])[:1000]
    # The same fields the local store's signature gets ("<=A" when A already shows it).
    fields = signature_fields(result)
    for key, field in (("introducedIn", "introduced_in"), ("lastGood", "last_good")):
        if fields.get(field):
            out[key] = fields[field]
    return out


def reporting_host() -> bool:
    """Whether this pod writes what its slice found: the hosts of a multi-host TPU slice run
    one bisection or one verification together and host 0 alone writes it, so a slice gives
    one result, not one per host (the others would be refused by the operator). A slice's
    shard is host 0's alone to run and report (host_role: the other hosts serve it)."""
    return os.environ.get("TPU_WORKER_ID", "0") == "0"


# jax.distributed's coordinator port on a slice's host 0: jax's own for TPU slices (jax
# 0.10.2 clusters/cloud_tpu_cluster.py), which JAX_COORDINATOR_PORT overrides there and here.
COORDINATOR_PORT = 8482


@dataclasses.dataclass(frozen=True)
class SliceHost:
    """This pod's place in a multi-host group (docs/spmd.md, "Programs that span hosts"):
    its index (0 is the coordinator and reports), the group's size, host 0's address."""

    host: int
    hosts: int
    coordinator: str

    @property
    def driver(self) -> str:
        """Where hosts 1..N-1 reach host 0's driver: its pod's name, the driver port."""
        from xla_sentinel.worker.host_link import DRIVER_PORT, split_address

        name, _ = split_address(self.coordinator)
        return f"[{name}]:{DRIVER_PORT}" if ":" in name else f"{name}:{DRIVER_PORT}"


# GKE's variables on each host of a TPU slice (libtpu and jax.distributed read them too).
TPU_WORKER_ID = "TPU_WORKER_ID"
TPU_WORKER_HOSTNAMES = "TPU_WORKER_HOSTNAMES"


def tpu_slice_host(environ: dict[str, str]) -> SliceHost | None:
    """A GKE TPU slice host's place: TPU_WORKER_ID its index, TPU_WORKER_HOSTNAMES every
    host's name, host h at position h (the coordinator is the first). None where neither is
    set (not a TPU pod of GKE's) or the slice has one host. SpecError naming the variable
    for an environment no slice has: hostnames without an index, an index that is
    not one or not among the hostnames, an empty hostname (the positions would shift)."""
    has_id, has_names = TPU_WORKER_ID in environ, TPU_WORKER_HOSTNAMES in environ
    if not has_id and not has_names:
        return None
    if not has_id:
        raise SpecError(f"{TPU_WORKER_ID}: not set, where {TPU_WORKER_HOSTNAMES} names the slice's "
                        "hosts: this host's index is unknown")
    raw = environ[TPU_WORKER_ID].strip()
    if not raw.isdigit():
        raise SpecError(f"{TPU_WORKER_ID}={raw!r}: not a host index")
    host = int(raw)
    # Without hostnames, GKE's single-host slice: this host alone.
    names = [h.strip() for h in environ[TPU_WORKER_HOSTNAMES].split(",")] if has_names else ["localhost"]
    if not any(names):
        raise SpecError(f"{TPU_WORKER_HOSTNAMES}: empty, where {TPU_WORKER_ID}={host} is set")
    if "" in names:
        raise SpecError(f"{TPU_WORKER_HOSTNAMES}={environ[TPU_WORKER_HOSTNAMES]!r}: hostname "
                        f"{names.index('')} is empty")
    if host >= len(names):
        raise SpecError(f"{TPU_WORKER_ID}={host}: not a host of a slice of {len(names)} "
                        f"({TPU_WORKER_HOSTNAMES} names {len(names)})")
    if len(names) == 1:
        return None
    port = environ.get("JAX_COORDINATOR_PORT") or str(COORDINATOR_PORT)
    return SliceHost(host, len(names), f"{names[0]}:{port}")


def slice_host(environ: dict[str, str] | None = None) -> SliceHost | None:
    """Read from what the platform puts in a pod's environment; None for a single host.

    - A GKE TPU slice: TPU_WORKER_ID, and TPU_WORKER_HOSTNAMES (host 0 first), which is
      also what `jax.distributed.initialize()` reads there by itself (tpu_slice_host).
    - A JobSet of CPU or GPU hosts: JOB_COMPLETION_INDEX (the Indexed Job's pod index) and
      XLA_SENTINEL_HOSTS (the group's size, set by the operator). Host 0 is
      XLA_SENTINEL_COORDINATOR where the operator names it, else the pod's own stable
      hostname (JobSet's `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>`) with pod index 0,
      in the headless Service's subdomain XLA_SENTINEL_SUBDOMAIN (the JobSet's name by
      default, resolved by the cluster DNS)."""
    env = dict(os.environ if environ is None else environ)
    if TPU_WORKER_ID in env or TPU_WORKER_HOSTNAMES in env:
        return tpu_slice_host(env)
    port = env.get("JAX_COORDINATOR_PORT") or str(COORDINATOR_PORT)
    hosts = int(env.get("XLA_SENTINEL_HOSTS") or "1")
    if hosts <= 1:
        return None
    host = int(env.get("JOB_COMPLETION_INDEX", "0"))
    if env.get("XLA_SENTINEL_COORDINATOR"):
        return SliceHost(host, hosts, env["XLA_SENTINEL_COORDINATOR"])
    own = env.get("HOSTNAME", "")
    stem, sep, index = own.rpartition("-")
    if not (sep and index.isdigit() and int(index) == host):
        raise SpecError(f"HOSTNAME {own!r} is not a JobSet pod's <jobset>-<job>-<jobIndex>-{host}: "
                        "set XLA_SENTINEL_COORDINATOR")
    subdomain = env.get("XLA_SENTINEL_SUBDOMAIN", "")
    zero = f"{stem}-0" + (f".{subdomain}" if subdomain else "")
    return SliceHost(host, hosts, f"{zero}:{port}")


# The slice's restart attempt (JobSet's pod label, from the downward API): the token a
# host's supervisor shows the driver, so a pod of an earlier restart is never taken in.
SLICE_TOKEN_ENV = "XLA_SENTINEL_SLICE_TOKEN"


def host_role(spec: CampaignSpec, environ: dict[str, str] | None = None) -> SliceHost | None:
    """This pod's place in a multi-host group: a JobSet of that many pods for a CPU or GPU
    campaign of `accelerator.hosts > 1`, or the hosts of a multi-host TPU slice (GKE's
    TPU_WORKER_ID and TPU_WORKER_HOSTNAMES, tpu_slice_host). Host 0 runs the campaign (the
    driver and its host 0 process) and reports; hosts 1..N-1 serve it (run_host). None
    where the pod runs the shard as every worker does: one host (a single-host slice
    included), or a hosts campaign run outside a JobSet (the engine starts every host
    process itself on loopback). SpecError where the pod's environment is no group's, or
    disagrees with the spec (or, on a slice, with the operator's XLA_SENTINEL_HOSTS) on
    the group's size."""
    env = dict(os.environ if environ is None else environ)
    if spec.accelerator.type == "tpu":
        place = tpu_slice_host(env)
        if place is None:
            return None
        if env.get("XLA_SENTINEL_HOSTS") and env["XLA_SENTINEL_HOSTS"] != str(place.hosts):
            raise SpecError(f"XLA_SENTINEL_HOSTS={env['XLA_SENTINEL_HOSTS']}: the slice's "
                            f"{TPU_WORKER_HOSTNAMES} names {place.hosts} hosts")
        devices = spec.generator.device_count()
        if devices % place.hosts:
            raise SpecError(f"generator.devices: {devices} is not a multiple of the slice's "
                            f"{place.hosts} hosts: each host gets as many devices")
        return place
    if spec.accelerator.hosts <= 1:
        return None
    if "XLA_SENTINEL_HOSTS" not in env:
        return None
    place = slice_host(env)
    if place is None or place.hosts != spec.accelerator.hosts:
        raise SpecError(f"XLA_SENTINEL_HOSTS={env.get('XLA_SENTINEL_HOSTS')}: the pod's group does not have "
                        f"spec.accelerator.hosts={spec.accelerator.hosts} hosts")
    if not 0 <= place.host < place.hosts:
        raise SpecError(f"JOB_COMPLETION_INDEX={place.host}: not a host of a group of {place.hosts}")
    return place


def group_spec(spec: CampaignSpec, place: SliceHost) -> CampaignSpec:
    """The spec host 0's engine runs: on a TPU slice, whose spec leaves `hosts` to the
    topology, the slice's hosts, so that the engine adds the layout's target and drives
    the other hosts (campaign/multihost.py); a CPU/GPU group's spec has them already.
    The layout's platform goes beside it, in the driver's environment (group_platform,
    driver_environment): `slice4x2` on a v6e 4x4 slice's chips."""
    if spec.accelerator.hosts == place.hosts:
        return spec
    return dataclasses.replace(spec, accelerator=dataclasses.replace(spec.accelerator, hosts=place.hosts))


def group_platform(spec: CampaignSpec, environ: dict[str, str] | None = None) -> str:
    """Where the layout's host processes run (worker/host_link.HOST_PLATFORMS): `tpu` on
    a TPU campaign's slice, one host process per VM on its chips, collectives over ICI;
    `cpu` for a CPU or GPU group (a GPU group's hosts run on the CPU: NCCL between pods is
    not built), and for a TPU pod whose JAX_PLATFORMS keeps jax off the TPU (`cpu`, as
    tests/spmd/test_slice_tpu_env.py gives GKE's variables on a CPU machine): its
    one-process targets run on the CPU then, and so does its layout. Unset JAX_PLATFORMS,
    or one naming tpu (the operator sets `tpu` on a TPU pod), is the TPU."""
    if spec.accelerator.type != "tpu":
        return "cpu"
    env = os.environ if environ is None else environ
    named = [p.strip() for p in env.get("JAX_PLATFORMS", "").split(",") if p.strip()]
    return "tpu" if not named or "tpu" in named else "cpu"


def driver_environment(place: SliceHost, environ: dict[str, str] | None = None,
                       platform: str = "cpu") -> dict[str, str]:
    """What host 0's pod puts in the engine's environment: its HostGroup then accepts the
    other hosts' supervisors on the driver port and binds jax.distributed's coordinator
    on every IPv4 interface (worker/host_link.RemoteHosts), and runs the layout's host
    processes on `platform` (group_platform; campaign/multihost.py LAYOUT_PLATFORM_ENV)."""
    from xla_sentinel.campaign.multihost import LAYOUT_PLATFORM_ENV
    from xla_sentinel.worker.host_link import DRIVER_PORT, RemoteHosts, split_address

    env = os.environ if environ is None else environ
    _, port = split_address(place.coordinator)
    remote = RemoteHosts(listen=f"0.0.0.0:{DRIVER_PORT}", coordinator=place.coordinator,
                         bind=f"0.0.0.0:{port}", token=env.get(SLICE_TOKEN_ENV, ""))
    return {**remote.environment(), LAYOUT_PLATFORM_ENV: platform}


def run_host(place: SliceHost) -> int:
    """Hosts 1..N-1 of a group: serve host 0's driver (worker/host_link.serve_remote)
    until it closes the group (exit 0, the pod completes) or cannot be reached (exit 1:
    the slice restarts). They report nothing: host 0 reports what the group found."""
    from xla_sentinel.worker.host_link import serve_remote

    return serve_remote(place.driver, place.host, os.environ.get(SLICE_TOKEN_ENV, ""))


def own_report_name() -> str | None:
    """The WorkerReport name this pod may write (cluster.report.writer_name of its pod name,
    XLA_SENTINEL_POD from the downward API); None outside a pod."""
    from xla_sentinel.cluster.report import writer_name

    pod = os.environ.get("XLA_SENTINEL_POD")
    return writer_name(pod) if pod else None


def run_bisect(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from xla_sentinel.cluster.report import result_object
    from xla_sentinel.cluster.reporter import write_result

    folder = Path(args.bisect)
    try:
        record = json.loads((folder / "finding.json").read_text())
    except (OSError, ValueError) as e:
        print(f"error: {folder / 'finding.json'}: cannot read finding ({e})", file=sys.stderr)
        return EXIT_BAD_INPUT
    from xla_sentinel.bisect.lab import LabError  # jax loads here
    from xla_sentinel.bisect.pipeline import BisectError, bisect_finding

    try:
        result = bisect_finding(folder)
        record = json.loads((folder / "finding.json").read_text())  # now with the culprit
    except (BisectError, LabError, OSError) as e:
        result = {"status": "error", "error": str(e)[:2000]}
    payload = bisection_result(record, result, folder, args.signature or str(record.get("signature")))
    if args.versions:
        payload.update(version_bisection(folder, args.versions))
    payload.update(versions=runner_versions(args.image), job=os.environ.get("HOSTNAME", ""),
                   time=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    if not reporting_host():
        return EXIT_DONE
    write_result(_custom_api(args), result_object(
        namespace=_namespace(args), campaign=args.campaign, campaign_uid=args.campaign_uid,
        kind="bisection", key=payload["finding"], result=payload, name=own_report_name()))
    print(json.dumps({k: payload[k] for k in ("status", "signature", "culprit_op", "culprit_pass")}))
    return EXIT_DONE


def verify_outcome(returncode: int) -> str:
    """A repro bundle's exit code (repro.py: 1 while the bug shows, 0 when fixed)."""
    return {0: "verified", 1: "still-failing"}.get(returncode, "error")


def fixing_release(fixed_in: str) -> str | None:
    """`fixed_in` when it is a release other than this runner's own that the image holds an
    environment for (docs/versions.md); None: the bundle runs on this runner's jaxlib."""
    from xla_sentinel.core import versions

    if not fixed_in or not versions.VERSION_PATTERN.match(fixed_in):
        return None
    try:
        env = versions.environment(fixed_in)
    except versions.VersionError:
        return None
    return None if env.current else fixed_in


def verify_on_release(bundle: Path, release: str) -> tuple[int, str]:
    """(exit code as repro.py gives it, output) of `bisect --versions RELEASE BUNDLE`."""
    from xla_sentinel.bisect.versions import VersionBisectError, bisect_versions

    try:
        result = bisect_versions(bundle, release)
    except (VersionBisectError, OSError) as e:
        return -1, str(e)
    (probe,) = result["probes"]
    code = {"verified": 0, "still_failing": 1}.get(result["status"], -1)
    return code, f"jaxlib {release}: {result['status']} ({probe['verdict']}) {probe['detail']}".strip()


def run_verify(args: argparse.Namespace) -> int:
    import hashlib
    import subprocess
    from datetime import UTC, datetime

    from xla_sentinel.cluster.report import result_object
    from xla_sentinel.cluster.reporter import write_result
    from xla_sentinel.core import versions

    bundle = Path(args.verify)
    # The signature's repro may name the finding folder; its bundle is the repro.py below it.
    script = bundle / "repro.py" if (bundle / "repro.py").exists() else next(bundle.glob("**/repro.py"), None)
    jaxlib = versions.current_jaxlib()
    release = fixing_release(args.fixed_in)
    if script is None:
        code, output = -1, f"{bundle}: no repro.py found"
    elif release is not None:
        # The image holds the fixing release's environment: the bundle runs there.
        jaxlib = release
        code, output = verify_on_release(script.parent, release)
    else:
        try:
            done = subprocess.run([sys.executable, script.name], cwd=script.parent, text=True,
                                  capture_output=True, timeout=600)
            code, output = done.returncode, (done.stdout + done.stderr)
        except subprocess.TimeoutExpired:
            code, output = -1, "repro.py ran past 600 s"
    payload = {"signature": args.signature, "result": verify_outcome(code), "exitCode": code,
               "evidence": output[-2000:], "image": args.image, "fixedIn": args.fixed_in,
               "versions": runner_versions(args.image), "jaxlib": jaxlib,
               "job": os.environ.get("HOSTNAME", ""),
               "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if not reporting_host():
        return EXIT_DONE
    key = f"{args.signature}-{hashlib.sha256(f'{args.image}|{args.fixed_in}'.encode()).hexdigest()[:6]}"
    write_result(_custom_api(args), result_object(
        namespace=_namespace(args), campaign=args.campaign, campaign_uid=args.campaign_uid,
        kind="verification", key=key, result=payload, name=own_report_name()))
    print(f"{args.signature}: {payload['result']} (exit {code})")
    return EXIT_DONE


def make_reporter(args: argparse.Namespace, spec: CampaignSpec, worker: str,
                  local: Any = None) -> Any:
    """A started K8sReporter for this worker, or None when reporting is off, or on a host of
    a multi-host TPU slice other than host 0 (one writer per slice; host_role sends those
    hosts to run_host before this).
    `local`: resumed_report() of the store this pod continues, if any."""
    if args.report == "none" or not reporting_host():
        return None
    from xla_sentinel.cluster.reporter import K8sReporter

    reporter = K8sReporter(_custom_api(args), namespace=_namespace(args),
                           campaign=args.campaign, campaign_uid=args.campaign_uid,
                           worker=worker, revision=args.revision,
                           samples=spec.bisect.perSignature,
                           progress_interval=args.progress_interval,
                           versions=runner_versions(args.image), local=local,
                           name=own_report_name())
    reporter.start()
    return reporter


def runner_versions(image: str) -> dict[str, str]:
    """What a finding is seen on: jax and jaxlib of this runner, and its image."""
    versions = package_versions()
    if image:
        versions["image"] = image
    return versions


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.bisect:
        return run_bisect(args)
    if args.verify:
        return run_verify(args)
    try:
        spec = load_spec(args)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        place = host_role(spec)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if place is not None and place.host > 0:
        return run_host(place)
    if place is not None:
        # The layout's platform: a TPU slice's hosts run on its chips (group_platform).
        os.environ.update(driver_environment(place, platform=group_platform(spec)))
        spec = group_spec(spec, place)
    shard_count = args.shard_count or spec.workers
    if not 0 <= args.shard_index < shard_count:
        print(f"error: --shard-index: {args.shard_index} is outside [0, {shard_count})",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.processes < 1:
        print("error: --processes: must be >= 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    worker = f"{args.group}-{args.shard_index}"
    out = Path(args.out or f"/artifacts/{args.campaign}/{worker}")
    # The engine's store this pod would resume (a local --out); a URI resumes nothing here.
    reporter = make_reporter(args, spec, worker,
                             resumed_report(Path(str(out)) / "campaign.sqlite", worker))
    budget = shard_budget(spec.budget, args.shard_index, shard_count)
    summary: dict[str, Any] = {}
    stored = True
    if budget is not None:
        # In a pod, spec.workers is the number of pods; the engine's own pool is --processes.
        local = dataclasses.replace(spec, workers=args.processes, budget=budget)

        from xla_sentinel.campaign.engine import run_campaign  # jax loads here, not at import
        from xla_sentinel.cluster.oom import stop_on_oom_kill
        from xla_sentinel.worker import memory

        # Over its memory limit the pod stops whole, on any node (cluster/oom.py); before
        # it, each engine worker recycles past its share of the limit (worker/memory.py).
        stop_on_oom_kill()
        os.environ.setdefault(memory.WORKERS_ENV, str(engine_workers(local)))
        share = memory.recycle_bytes()
        if share < memory.FRESH_WORKER_BYTES:
            print(f"warning: the memory limit leaves each engine worker process "
                  f"{share >> 20} MiB ({memory.WORKERS_ENV}={os.environ[memory.WORKERS_ENV]}), "
                  "less than a fresh one holds: each recycles after every request (raise the "
                  "limit, or lower the CPU request: one slot per CPU)", file=sys.stderr, flush=True)

        # SIGTERM (eviction, preemption, maintenance, suspend) makes the engine stop after
        # the programs in flight, with every finding already reported.
        def run(folder: Path, listener: Any = reporter) -> dict[str, Any]:
            return run_campaign(local, folder, name=args.campaign, shard_index=args.shard_index,
                                shard_count=shard_count, reporter=listener, progress=False,
                                inject_passes=tuple(args.inject_pass))

        bucket = args.bucket_uri or spec.artifacts.bucketURI
        if bucket:
            from xla_sentinel.storage import objects as storage

            # The layout the operator links to (desired.artifact_path): BUCKET/CAMPAIGN/WORKER.
            # A K8sReporter with a storage(status) method hears each change of condition.
            try:
                summary, stored = storage.run_mirrored(
                    storage.join(bucket, args.campaign, worker), out, run, reporter=reporter,
                    wait=args.storage_wait, on_change=getattr(reporter, "storage", None))
            except storage.StorageError as e:
                print(f"error: --bucket-uri: {e}", file=sys.stderr)
                return EXIT_BAD_INPUT
        else:
            summary = run(out)
    done = shard_done(budget, summary)
    if not stored:
        # The findings are only on this pod's disk: the index must run again (the engine
        # re-finds the same findings from the same seeds) rather than complete without them.
        print(f"error: storage: {summary['storage']['error']}; "
              f"{summary['storage']['pending_findings']} findings not stored", file=sys.stderr)
        done = False
    if reporter is not None:
        reporter.close(done=done)
    # Findings are results, not failures: a done shard exits 0 whatever it found. A shard
    # stopped early must not: exit 0 would complete its index for good.
    return EXIT_DONE if done else STOPPED
