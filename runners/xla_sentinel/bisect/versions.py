"""Which released jaxlib first shows a finding, and does a newer one fix it (docs/versions.md).

`xla-sentinel bisect --versions A..B PATH` binary-searches the jaxlib releases in A..B
that have an environment here (`make version-envs`; `--install` creates the missing ones
from PyPI) for the first that shows the finding or repro bundle at PATH, and records
`introducedIn` and `lastGood`; `--versions V` runs it on one release and records
`verified` (the bug does not show there) or `still_failing`. Each probe is a worker under
that release's interpreter: the module crosses as a VHLO portable artifact at the
StableHLO version that release reads, made by a worker of the current jaxlib; the target's
options and the legal settings run there, and the oracle judges the target against the
float64 expected values, as the bisector's lab does. The finding's injected plugins are not
registered: the question is which release shows the bug. Coordinator side: no jax here.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from xla_sentinel.bisect.pipeline import F64_REFERENCES, BisectError, in_float64
from xla_sentinel.core import versions
from xla_sentinel.core.errors import UserError
from xla_sentinel.core.model import COMPILER_FAILURES, Verdict
from xla_sentinel.core.names import FLOATS
from xla_sentinel.core.program import Program, ProgramError, load_arrays, result_dtypes
from xla_sentinel.judge import invariants, oracle
from xla_sentinel.judge.invariants import Invariant
from xla_sentinel.spec.options import LEGAL
from xla_sentinel.storage.store import Store, StoreError
from xla_sentinel.worker.client import NoInterpreter, Worker, WorkerDied, WorkerHung
from xla_sentinel.worker.protocol import RequestFailed, Run, ToPortable, WhichVersions

# Where a bundle's result goes (a finding's goes into its finding.json, key "versions").
RESULT_FILE = "versions.json"
# An older XLA may not know an option of LEGAL (xla_cpu_use_fusion_emitters is newer than
# 0.4.x): then the legal run is O0 alone.
LEGAL_FALLBACK: dict[str, Any] = {"xla_backend_optimization_level": 0}


class VersionBisectError(UserError, ValueError):
    """The path, range or environments cannot be bisected as given; the message names which."""


@dataclass(frozen=True)
class OutputCheck:
    """How one output is judged on every release: `classes` (its NaN/Inf pattern against
    float64's), `threshold` (that, and a normwise error against float64 beyond `threshold`,
    the legal bound the finding was judged by), `exact` (integers, equal) or `bitwise`
    (equal as numbers to the legal settings' result on the same release, where the
    expected value is not stored)."""

    index: int
    dtype: str
    kind: str  # classes, threshold, exact, bitwise, invariant
    threshold: float = 0.0
    # kind `invariant`: the declaration the finding broke (invariants.Invariant.to_json),
    # judged as the lab judges it (lab.judge_invariant), whatever the numbers.
    invariant: dict[str, Any] | None = None


@dataclass
class Subject:
    """What every probe runs: one module, its inputs, the float64 expectations, and how the
    finding failed (a compiler failure, or wrong numbers on the outputs `checks` names).
    A probe asks whether a release gives the finding's wrong answer, judged as the campaign
    judged it, not the oracle's question of whether it is the odd one out: a release's
    legal settings may share the bug (XLA:CPU 0.10.2 drops the NaN of a long max reduction
    at O0 too)."""

    path: Path
    module: str
    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    checks: list[OutputCheck]
    options: dict[str, Any]
    verdict: Verdict  # the finding's verdict; MISMATCH for a bundle of wrong results
    bundle: bool
    legal: list[np.ndarray] | None = None  # an invariant bundle's legal.npz


class ProbeAnswer(StrEnum):
    """A probe's answer where no Verdict fits: a release that cannot be asked, or wrong
    numbers judged as the finding's were (not by the oracle)."""

    WRONG = "wrong"  # the release gives the finding's wrong numbers
    NO_WORKER = "no_worker"
    NOT_PORTABLE = "not_portable"
    LEGAL_FAILED = "legal_failed"  # no legal result on the release to judge bitwise against


@dataclass
class Probe:
    """One release's answer: `shows` True (the bug shows), False (it does not) or None (it
    cannot tell: the module does not cross to it, or its worker does not start)."""

    jaxlib: str
    shows: bool | None
    verdict: Verdict | ProbeAnswer
    detail: str = ""
    seconds: float = 0.0


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise VersionBisectError(f"{path}: unreadable JSON ({e})") from None


def _verdict(path: Path, value: Any) -> Verdict:
    try:
        return Verdict(value)
    except ValueError:
        raise VersionBisectError(f"{path}: verdict {value!r} is none of {', '.join(Verdict)}") from None


def _expected(path: Path, dtypes: list[str]) -> list[np.ndarray]:
    if not path.is_file():
        raise VersionBisectError(f"{path}: missing (the float64 values the probes are judged by)")
    try:
        return load_arrays(path, ["f64" if d in FLOATS else d for d in dtypes])
    except ProgramError as e:
        raise VersionBisectError(str(e)) from None


def finding_check(verdict: Verdict, evidence: dict[str, Any], dtype: str) -> OutputCheck:
    """The check of a finding's failing output (evidence `output`), from its evidence."""
    index = int(evidence.get("output") or 0)
    if verdict is Verdict.INVARIANT_VIOLATED and evidence.get("reason") == "invariant":
        declaration = evidence.get("declaration")
        if not isinstance(declaration, dict):
            raise ValueError("its evidence has no invariant declaration")
        return OutputCheck(index, dtype, "invariant",
                           invariant={**declaration, "source": str(evidence.get("declared_by", ""))})
    if verdict is Verdict.NAN_MISMATCH:
        return OutputCheck(index, dtype, "classes")
    reason = evidence.get("reason")
    if reason == "bitwise":
        return OutputCheck(index, dtype, "bitwise")
    if dtype not in FLOATS or reason in ("integer", "shape"):
        return OutputCheck(index, dtype, "exact")
    if not isinstance(evidence.get("threshold"), int | float):
        raise ValueError("its evidence has no threshold")
    return OutputCheck(index, dtype, "threshold", float(evidence["threshold"]))


def wrong_outputs(outputs: list[np.ndarray], expected: list[np.ndarray], checks: list[OutputCheck],
                  legal: list[np.ndarray] | None, inputs: list[np.ndarray] | None = None) -> list[str]:
    """What is wrong in a release's outputs, as repro.py (bundle.py) words it; [] if nothing."""
    wrong = []
    for c in checks:
        out = np.asarray(outputs[c.index])
        if c.kind == "invariant" and c.invariant is not None:
            inv = Invariant.from_json(dict(c.invariant))
            v = invariants.check_beside_legal(inv, list(outputs), expected, c.dtype, legal, inputs=inputs)
            if v is not None:
                wrong.append(f"output {c.index} ({c.dtype}): invariant {inv.kind} broken in {v.count} "
                             "rows or elements")
            continue
        if c.kind == "bitwise":
            ref = legal[c.index] if legal is not None else expected[c.index]
            if not oracle.same_values(out, np.asarray(ref), c.dtype):
                wrong.append(f"output {c.index} ({c.dtype}): differs from the result IEEE 754 fixes")
            continue
        ref = np.asarray(expected[c.index])
        if out.shape != ref.shape:
            wrong.append(f"output {c.index}: shape {list(out.shape)}, float64 {list(ref.shape)}")
            continue
        if c.kind == "exact":
            bad = int(np.count_nonzero(out != ref))
            if bad:
                wrong.append(f"output {c.index}: {bad} of {out.size} elements differ")
            continue
        with np.errstate(over="ignore", invalid="ignore"):
            flips = int(np.count_nonzero(_classes(out) != _classes(ref.astype(out.dtype))))
        if flips:
            wrong.append(f"output {c.index}: {flips} elements NaN/Inf where float64 says otherwise")
        if c.kind == "threshold":
            err = oracle.normwise_error(out, ref, c.dtype)
            if err > c.threshold:
                wrong.append(f"output {c.index} ({c.dtype}): normwise error {err:.3g} against "
                             f"float64, legal at most {c.threshold:.3g}")
    return wrong


def _classes(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64)
    return np.select([np.isnan(a), np.isposinf(a), np.isneginf(a)], [1, 2, 3], 0)


def _bundle_constants(script: Path) -> dict[str, Any]:
    """FAILURE, OPTIONS, INPUT_DTYPES, OUTPUTS of a bundle's repro.py (literals that
    bundle.py wrote with repro_template.render)."""
    wanted = {"FAILURE", "OPTIONS", "INPUT_DTYPES", "OUTPUTS"}
    optional = {"INVARIANT"}  # bundles of invariant findings
    found: dict[str, Any] = {}
    try:
        tree = ast.parse(script.read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id in wanted | optional:
                found[node.targets[0].id] = ast.literal_eval(node.value)
    except (OSError, SyntaxError, ValueError) as e:
        raise VersionBisectError(f"{script}: not a repro.py xla-sentinel wrote ({e})") from None
    missing = wanted - set(found)
    if missing:
        raise VersionBisectError(f"{script}: not a repro.py xla-sentinel wrote (no {', '.join(sorted(missing))})")
    return found


def load_subject(path: Path) -> Subject:
    """A finding folder (finding.json, program/, expected.npz) or a repro bundle (repro.py,
    module.mlir, inputs.npz, expected.npz); VersionBisectError naming the file otherwise.
    A finding against the float64 reference (f64_jit) is probed as that reference computes:
    its module promoted to float64 (pipeline.in_float64) under the reference's options."""
    path = Path(path)
    try:
        if (path / "finding.json").is_file():
            record = _json(path / "finding.json")
            evidence = record.get("evidence") if isinstance(record, dict) else None
            if not isinstance(evidence, dict):
                raise VersionBisectError(f"{path / 'finding.json'}: no evidence object")
            program = Program.load(path / "program")
            options = dict(evidence.get("target_options") or {})
            if record.get("target") in F64_REFERENCES:
                # A finding against the float64 reference shows only in the module it
                # compiles (bisect itself probes the same, pipeline.open_context).
                try:
                    program, _ = in_float64(program, path)
                except BisectError as e:
                    raise VersionBisectError(str(e)) from None
                options = options or dict(F64_REFERENCES[record["target"]])
                dtypes = result_dtypes(program.module)
            elif program.graph is not None:
                dtypes = [program.graph.values[i].dtype for i in program.graph.outputs]
            else:
                dtypes = result_dtypes(program.module)
            verdict = _verdict(path / "finding.json", record.get("verdict"))
            if verdict is Verdict.VERSION_REGRESSION:
                verdict = _verdict(path / "finding.json", evidence.get("judged_as", Verdict.MISMATCH))
            expected, checks = [], []
            if verdict not in COMPILER_FAILURES:
                expected = _expected(path / "expected.npz", dtypes)
                output = int(evidence.get("output") or 0)
                if not 0 <= output < len(dtypes):
                    raise VersionBisectError(f"{path / 'finding.json'}: evidence.output {output} "
                                             f"is not an output of the module ({len(dtypes)})")
                try:
                    checks = [finding_check(verdict, evidence, dtypes[output])]
                except ValueError as e:
                    raise VersionBisectError(f"{path / 'finding.json'}: {e}") from None
            return Subject(path, program.module, program.inputs, expected, checks,
                           options, verdict, bundle=False)
        if (path / "repro.py").is_file():
            c = _bundle_constants(path / "repro.py")
            module = (path / "module.mlir").read_text()
            inputs = load_arrays(path / "inputs.npz", list(c["INPUT_DTYPES"]))
            outs = c["OUTPUTS"]
            checks = [OutputCheck(i, o["dtype"], "bitwise" if o.get("bitwise") else
                                  "threshold" if o.get("float") else "exact", float(o.get("threshold", 0.0)))
                      for i, o in enumerate(outs)]
            verdict = Verdict.MISMATCH if c["FAILURE"] == "wrong_result" else \
                _verdict(path / "repro.py", c["FAILURE"])
            expected = [] if verdict in COMPILER_FAILURES else \
                _expected(path / "expected.npz", [o["dtype"] for o in outs])
            legal = None
            if c.get("INVARIANT") is not None:
                # Judged by the invariant alone, as its repro.py judges it.
                inv = dict(c["INVARIANT"])
                checks = [OutputCheck(int(inv["output"]), outs[int(inv["output"])]["dtype"], "invariant",
                                      invariant=inv)]
                verdict = Verdict.INVARIANT_VIOLATED
                legal = _expected(path / "legal.npz", [o["dtype"] for o in outs])
            return Subject(path, module, inputs, expected, checks, dict(c["OPTIONS"]), verdict,
                           bundle=True, legal=legal)
    except ProgramError as e:
        raise VersionBisectError(str(e)) from None
    except OSError as e:
        raise VersionBisectError(f"{e.filename}: unreadable ({e.strerror})") from None
    raise VersionBisectError(f"{path}: neither a finding folder (finding.json) nor a repro "
                             "bundle (repro.py)")


class Prober:
    """Runs the subject on one release at a time; one worker of the current jaxlib makes
    the portable artifacts and classifies the module (discrete ops widen the oracle's k)."""

    def __init__(self, subject: Subject, timeout: float, install: bool = False,
                 log_dir: Path | None = None) -> None:
        self.subject = subject
        self.timeout = timeout
        self.install = install
        self.log_dir = log_dir
        self.current = Worker("versions-current", (), self._log("current"))

    def _log(self, name: str) -> Path | None:
        return self.log_dir / f"versions-{name}.log" if self.log_dir else None

    def close(self) -> None:
        self.current.close()

    def environment(self, version: str) -> versions.Environment:
        try:
            return versions.environment(version)
        except versions.VersionError:
            if not self.install:
                raise
            return versions.create_environment(version)

    def probe(self, version: str) -> Probe:
        started = time.monotonic()
        env = self.environment(version)  # VersionError: no environment (bad input)
        worker = Worker(f"versions-{version}", (), self._log(version),
                        None if env.current else env.python)
        try:
            p = self._probe(version, env, worker)
        finally:
            worker.close()
        p.seconds = round(time.monotonic() - started, 2)
        return p

    def _probe(self, version: str, env: versions.Environment, worker: Worker) -> Probe:
        s = self.subject
        try:
            info = worker.call(WhichVersions(), max(self.timeout, 120.0))
        except NoInterpreter as e:
            raise VersionBisectError(f"jaxlib {version}: {e}") from None
        except (WorkerDied, WorkerHung) as e:
            return Probe(version, None, ProbeAnswer.NO_WORKER, f"{env.python}: the worker did not start: {e}")
        module: str | bytes = s.module
        if not env.current:
            try:
                module = self.current.call(ToPortable(s.module, info.stablehlo_current), self.timeout).data
            except RequestFailed as e:
                return Probe(version, None, ProbeAnswer.NOT_PORTABLE, e.error)
        ran = self._run(worker, module, s.options)
        if ran[0] is ProbeAnswer.NOT_PORTABLE:
            return Probe(version, None, ran[0], ran[1])
        if s.verdict in COMPILER_FAILURES:
            return Probe(version, ran[0] == s.verdict, ran[0], ran[1][:800])
        if ran[2] is None:
            # A release that cannot compile the module at all neither shows nor clears a
            # wrong-numbers bug.
            return Probe(version, None, ran[0], ran[1][:800])
        legal: list[np.ndarray] | None = s.legal
        if any(c.kind in ("bitwise", "invariant") for c in s.checks) and not s.bundle:
            # A bitwise output is judged against the legal settings' result on this release.
            got = self._run(worker, module, LEGAL)
            if got[2] is None:
                got = self._run(worker, module, LEGAL_FALLBACK)
            if got[2] is None:
                return Probe(version, None, ProbeAnswer.LEGAL_FAILED, got[1][:800])
            legal = got[2]
        wrong = wrong_outputs(ran[2], s.expected, s.checks, legal, s.inputs)
        return Probe(version, bool(wrong), ProbeAnswer.WRONG if wrong else Verdict.PASS,
                     "; ".join(wrong)[:800])

    def _run(self, worker: Worker, module: str | bytes,
             options: dict[str, Any]) -> tuple[Verdict | ProbeAnswer, str, list[np.ndarray] | None]:
        """(verdict, error, outputs) of one compile and run on the probe's worker."""
        try:
            r = worker.call(Run(module, self.subject.inputs, options), self.timeout)
            return Verdict.PASS, "", r.outputs
        except WorkerHung as e:
            return Verdict.HANG, str(e), None
        except WorkerDied as e:
            return Verdict.CRASH, f"{e}\n{e.log_tail[-1500:]}", None
        except RequestFailed as e:
            if e.error.startswith("NotPortable:"):
                return ProbeAnswer.NOT_PORTABLE, e.error, None
            return Verdict.COMPILE_ERROR, e.error, None


def available_versions() -> list[str]:
    """The jaxlib releases PyPI serves to this interpreter (`pip index versions jaxlib`)."""
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "jaxlib",
                           "--disable-pip-version-check"], capture_output=True, text=True, timeout=120)
    for line in done.stdout.splitlines():
        if line.startswith("Available versions:"):
            return sorted((v.strip() for v in line.split(":", 1)[1].split(",")
                           if versions.VERSION_PATTERN.match(v.strip())), key=versions.parse_version)
    raise VersionBisectError(f"pip index versions jaxlib: no answer from the package index "
                             f"({(done.stderr or done.stdout).strip()[-200:]})")


def in_range(candidates: list[str], first: str, last: str) -> list[str]:
    lo, hi = versions.parse_version(first), versions.parse_version(last)
    return sorted({v for v in candidates if lo <= versions.parse_version(v) <= hi},
                  key=versions.parse_version)


def search(releases: list[str], probe: Callable[[str], Probe]) -> dict[str, Any]:
    """Binary search for the first release that shows the bug, the oldest assumed good and
    the newest bad once both ends are probed. A release that cannot tell is skipped (as
    `git bisect skip`); an end that cannot tell ends the search with its reason."""
    probes: list[Probe] = []

    def ask(v: str) -> Probe:
        p = probe(v)
        probes.append(p)
        return p

    vs = list(releases)
    first, last = ask(vs[0]), ask(vs[-1])
    out: dict[str, Any] = {"range": f"{vs[0]}..{vs[-1]}", "introducedIn": None, "lastGood": None}
    for end in (first, last):
        if end.shows is None:
            return {**out, "status": "undecided", "probes": probes,
                    "error": f"jaxlib {end.jaxlib} cannot tell ({end.verdict}): {end.detail[:300]}"}
    if first.shows:
        return {**out, "status": "already_in_first", "probes": probes}
    if not last.shows:
        return {**out, "status": "not_in_last", "probes": probes}
    lo, hi = 0, len(vs) - 1  # vs[lo] is good, vs[hi] shows the bug
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = ask(vs[mid])
        if p.shows is None:
            del vs[mid]
            hi -= 1
        elif p.shows:
            hi = mid
        else:
            lo = mid
    return {**out, "status": "found", "introducedIn": vs[hi], "lastGood": vs[lo], "probes": probes}


def bisect_versions(path: Path, spec: str, timeout: float = 120.0, install: bool = False,
                    log_dir: Path | None = None, store: Store | None = None) -> dict[str, Any]:
    """Bisect (`A..B`) or verify (`V`) the finding or bundle at `path` over jaxlib releases,
    and record the result (finding.json key "versions", or the bundle's versions.json, and
    the signature's fields in its campaign's store: `store` when the caller holds it open)."""
    subject = load_subject(path)
    if subject.verdict is Verdict.HANG:
        raise VersionBisectError(f"{path}: a hang is not bisected (each probe waits out the timeout)")
    try:
        if ".." in spec:
            first, last = versions.parse_range(spec)
            candidates = available_versions() if install else versions.installed_versions()
            releases = in_range([*candidates, first, last], first, last)
            for end in (first, last):  # the ends must exist (or be made): said before any probe
                if not install:
                    versions.environment(end)
        else:
            versions.parse_version(spec)
            releases = [spec]
    except versions.VersionError as e:
        raise VersionBisectError(str(e)) from None
    prober = Prober(subject, timeout, install, log_dir)
    try:
        if len(releases) == 1:
            p = prober.probe(releases[0])
            status = {True: "still_failing", False: "verified", None: "undecided"}[p.shows]
            result: dict[str, Any] = {"verify": spec, "status": status, "probes": [p]}
        else:
            result = search(releases, prober.probe)
    except versions.VersionError as e:
        raise VersionBisectError(str(e)) from None
    finally:
        prober.close()
    result["probes"] = [asdict(p) for p in result["probes"]]
    result["current"] = versions.current_jaxlib()
    _record(subject, result)
    stored = record_in_store(subject.path, result, store)
    if stored is not None:
        result["store"] = stored
    return result


def signature_fields(result: dict[str, Any]) -> dict[str, str | None]:
    """The signature's version fields (model.VERSION_FIELDS) a result sets; {} for a
    result that tells nothing about the bug's releases (undecided, not_in_last)."""
    status = result.get("status")
    if status == "found":
        return {"introduced_in": result["introducedIn"], "last_good": result["lastGood"]}
    if status == "already_in_first":
        # The oldest release searched shows it: introduced there or before, none known good.
        first = str(result["range"]).split("..", 1)[0]
        return {"introduced_in": f"<={first}", "last_good": None}
    if status in ("verified", "still_failing"):
        return {"verification": status, "verification_jaxlib": str(result["verify"])}
    return {}


def campaign_of(path: Path) -> tuple[Path, str] | None:
    """(the campaign store, the signature id) of a finding folder OUT/findings/ID, or of a
    bundle inside one; None for a finding or bundle outside a campaign folder."""
    for folder in (path, *path.parents):
        if (folder / "finding.json").is_file():
            db = folder.parent.parent / "campaign.sqlite"
            if folder.parent.name != "findings" or not db.is_file():
                return None
            record = _json(folder / "finding.json")
            signature = record.get("signature") if isinstance(record, dict) else None
            return (db, str(signature)) if signature else None
    return None


def record_in_store(path: Path, result: dict[str, Any], store: Store | None = None) -> dict[str, Any] | None:
    """Set the version fields of the finding's signature in its campaign's store (what
    `triage` lists; `store` if open already, as during a campaign); where it went, or None
    when there is no store or nothing to set."""
    fields = signature_fields(result)
    where = campaign_of(Path(path))
    if not fields or where is None:
        return None
    db, signature = where
    if store is not None:
        return {"path": str(db), "signature": signature,
                "recorded": store.record_versions(signature, fields), **fields}
    try:
        opened = Store(db)
    except StoreError as e:
        raise VersionBisectError(str(e)) from None
    try:
        found = opened.record_versions(signature, fields)
    finally:
        opened.close()
    return {"path": str(db), "signature": signature, "recorded": found, **fields}


def _record(subject: Subject, result: dict[str, Any]) -> None:
    """A finding keeps the result in finding.json (`versions`: the bisection under
    "bisection", a verification under "verification"); a bundle in versions.json."""
    key = "verification" if "verify" in result else "bisection"
    if subject.bundle:
        target = subject.path / RESULT_FILE
        data = _json(target) if target.is_file() else {}
        data[key] = result
        target.write_text(json.dumps(data, indent=1) + "\n")
        return
    path = subject.path / "finding.json"
    record = _json(path)
    record.setdefault("versions", {})[key] = result
    path.write_text(json.dumps(record, indent=1) + "\n")
