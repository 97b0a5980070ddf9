"""The verification gate: nothing an agent claims counts until the engine has checked it.

- a test counts once it compiled and the oracle judged it under the campaign's targets
  (`verify_test`, on what `tools.Workbench.run_test` returned);
- a reproduction counts once the engine judges the submitted program as the reported
  failure (the same class of verdict under the same target, the culprit op where named)
  and right under its cure, applied as compile options the program cannot see
  (`verify_judged_reproduction`); no exit code of agent code is read;
- a fix counts once it cures the reproducer (a script the engine or the repository wrote:
  `verify_reproduction`, exit 1 on this build and 0 under the cure) and changes no verdict
  of the regression corpus of known bugs for the worse, a corpus the server chose, of at
  least MIN_REGRESSION reproducers. A fix of the compiler (`Cure`: XLA flags, passes
  to disable, an HLO pass plugin) is run on every reproducer of the corpus (`verify_fix`:
  a known bug's reproducer that passed must still pass, one that failed must still run;
  one it cures as well is reported under `also_cures`, not refused). A rewrite of the
  program (`verify_rewrite`) changes no compiler, so no known bug's verdict: it counts once
  the bundle's repro.py passes on the rewritten module, its float64 values equal the
  original module's on fresh and special inputs, and the campaign's targets judge it right.

Every claim is written to the claims table (OUT/agents.sqlite) with the gate's decision
and evidence: a verified claim is what the campaign keeps (a corpus entry, a reproducer,
a fix draft); a refused one stays a claim, never a finding. Reproducers are agent-written
code: they run in a child process (`run_script`), where a crash or hang is an outcome,
not the server's death.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from xla_sentinel.core.errors import UserError
from xla_sentinel.core.model import UNJUDGED, VERDICT_TABLE, ProgramStatus, StillFails, Verdict
from xla_sentinel.spec.plugins import split_ref

# What a reproducer's exit tells: 1 the bug shows, 0 it does not. An uncaught exception
# also exits 1, so a traceback on stderr makes it `error`, not `bug`.
OUTCOMES = ("bug", "clean", "error", "timeout")
SCRIPT_SECONDS = 300.0
# The fewest known bugs' reproducers a fix of the compiler must have been run on: a server
# given a smaller corpus (or none: an installed package without its regression data)
# refuses every such fix rather than verify it against nothing. `xla-sentinel mcp
# --min-regression`, and the operator's own check of fix drafts (XLA_SENTINEL_MIN_REGRESSION).
MIN_REGRESSION = 8
# Where an operator (or whoever starts the server) sets the corpus and the minimum for a
# server it does not start itself (an agent pod's): read by `xla-sentinel mcp`, never by a tool.
REGRESSION_CORPUS_ENV = "XLA_SENTINEL_REGRESSION_CORPUS"
MIN_REGRESSION_ENV = "XLA_SENTINEL_MIN_REGRESSION"
_FLAG = re.compile(r"^--xla_[a-z0-9_]+(=[^\s]*)?$")
_PASS = re.compile(r"^[A-Za-z0-9_.-]+$")


class GateError(UserError, ValueError):
    """A claim the gate cannot even check: a missing script, a malformed flag."""


def configured_corpus(env: Mapping[str, str] = os.environ) -> list[Path] | None:
    """The regression corpus whoever started the server chose ($XLA_SENTINEL_REGRESSION_CORPUS,
    a folder of reproducers), or None for the package's own."""
    folder = env.get(REGRESSION_CORPUS_ENV, "")
    if not folder:
        return None
    if not Path(folder).is_dir():
        raise GateError(f"{REGRESSION_CORPUS_ENV}={folder}: not a folder of reproducers")
    return sorted(Path(folder).glob("*.py"))


def configured_minimum(env: Mapping[str, str] = os.environ) -> int:
    """The fewest reproducers a fix of the compiler is verified against:
    $XLA_SENTINEL_MIN_REGRESSION, else MIN_REGRESSION."""
    value = env.get(MIN_REGRESSION_ENV, "")
    if not value:
        return MIN_REGRESSION
    if not value.isdigit():
        raise GateError(f"{MIN_REGRESSION_ENV}={value}: not a count")
    return int(value)


@dataclass(frozen=True)
class Cure:
    """A candidate cure of the compiler: XLA flags and HLO passes to disable, as XLA_FLAGS
    sets them, and an HLO pass plugin (`FILE.py[:FUNC]`, the `--inject-pass` format)
    registered after fusion in the reproducer's process."""

    xla_flags: tuple[str, ...] = ()
    disable_passes: tuple[str, ...] = ()
    plugin: str | None = None

    def __post_init__(self) -> None:
        for f in self.xla_flags:
            if not _FLAG.match(f):
                raise GateError(f"xla_flags: {f!r} is not an XLA flag (--xla_name or --xla_name=value)")
        for p in self.disable_passes:
            if not _PASS.match(p):
                raise GateError(f"disable_passes: {p!r} is not an HLO pass name")
        if self.plugin is not None:
            path, func = split_ref(self.plugin)
            if path.suffix != ".py" or not path.is_absolute() or not path.is_file() or not func.isidentifier():
                raise GateError(f"plugin: {self.plugin!r} is not FILE.py[:FUNC] (an absolute path to a file)")
        if not self.xla_flags and not self.disable_passes and self.plugin is None:
            raise GateError("a cure needs xla_flags, disable_passes or a pass plugin")

    def flags(self) -> list[str]:
        disabled = [f"--xla_disable_hlo_passes={','.join(self.disable_passes)}"] if self.disable_passes else []
        return [*disabled, *self.xla_flags]

    def describe(self) -> str:
        return " ".join([*self.flags(), *([f"--inject-pass {self.plugin}"] if self.plugin else [])])

    def options(self, base: dict[str, Any] | None = None) -> dict[str, Any]:
        """The cure as a target's per-compile XLA options, over `base` (a target's own): how
        the engine applies it to a submitted program, where the program cannot see it (not
        in an environment variable a script could read)."""
        out = dict(base or {})
        if self.disable_passes:
            had = [p for p in str(out.get("xla_disable_hlo_passes") or "").split(",") if p]
            out["xla_disable_hlo_passes"] = ",".join(dict.fromkeys([*had, *self.disable_passes]))
        for flag in self.xla_flags:
            name, eq, value = flag[2:].partition("=")
            out[name] = _option_value(value) if eq else True
        return out

    def key(self) -> str:
        """What a reproducer's remembered outcome depends on: the cure, with the plugin's bytes."""
        if self.plugin is None:
            return self.describe()
        digest = hashlib.sha256(split_ref(self.plugin)[0].read_bytes()).hexdigest()
        return f"{self.describe()} sha256:{digest}"


def _option_value(text: str) -> Any:
    """An XLA_FLAGS value as a typed option: true/false, an integer, else the text."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return int(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class Rewrite:
    """A candidate cure of the program: the StableHLO `module` that replaces a repro
    bundle's module.mlir (`source`: what the agent wrote, a JAX snippet or the module),
    run on the bundle's inputs against its float64 reference values."""

    module: str
    source: str
    kind: str

    def describe(self) -> str:
        return f"rewrite ({self.kind}) sha256:{hashlib.sha256(self.module.encode()).hexdigest()[:12]}"


@dataclass
class Decision:
    """The gate's answer on one claim."""

    verified: bool
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


def jaxlib_version() -> str:
    try:
        return metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return "none"


# Runs a reproducer with a cure's pass plugin registered first (xla/plugins.py: checked on
# every result, so a broken plugin fails the compile, an `error`, never a cure).
_WITH_PLUGIN = """\
import runpy, sys
from xla_sentinel.xla.plugins import register
register([sys.argv[1]])
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_script(script: Path, cure: Cure | None = None, timeout: float = SCRIPT_SECONDS,
               sandbox: Any = None) -> dict[str, Any]:
    """Run a reproducer in a child process, under `cure` if given: its outcome and output.

    The cure goes in XLA_FLAGS (read by every XLA compile in the child; the repros of
    bench/repros append to it) and, for a bundle's repro.py, which sets its options per
    compile, also as its `--xla-option`s; its plugin is registered in the child before the
    script runs. Under `sandbox` (agents/sandbox.Sandbox: `mcp --sandbox`) the child has no
    network and sees only its own folder (read-only), the plugin's and the interpreter's.
    """
    # The file, not a link to it: a sandboxed child sees only the script's folder, where a
    # link's target (a corpus of links into bench/repros) is not, and every reproducer
    # "errored" there (tests/node/test_agent_sandbox_node.py's pod, test_swarm in container mode).
    script = Path(script).resolve()
    if not script.is_file():
        raise GateError(f"{script}: no such reproducer")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    argv = [sys.executable, script.name]
    if cure is not None and cure.plugin:
        argv = [sys.executable, "-c", _WITH_PLUGIN, cure.plugin, script.name]
    if cure is not None:
        env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", ""), *cure.flags()]).strip()
        if "--xla-option" in script.read_text(errors="replace"):
            for flag in cure.flags():
                argv += ["--xla-option", flag.removeprefix("--") if "=" in flag else f"{flag[2:]}=true"]
    if sandbox is not None:
        plugin = [split_ref(cure.plugin)[0].parent] if cure is not None and cure.plugin else []
        argv = sandbox.argv(argv, script.parent, writable=False, readonly=plugin,
                            env={"XLA_FLAGS": env["XLA_FLAGS"]} if "XLA_FLAGS" in env else None,
                            seconds=timeout)
    try:
        proc = subprocess.run(argv, cwd=script.parent, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout", "exit": None, "output": f"no answer in {timeout:.0f} s"}
    if proc.returncode == 0:
        outcome = "clean"
    elif proc.returncode == 1 and "Traceback (most recent call last)" not in proc.stderr:
        outcome = "bug"
    else:
        outcome = "error"
    return {"outcome": outcome, "exit": proc.returncode,
            "output": (proc.stdout + proc.stderr).strip()[-1500:]}


def outcomes_path() -> Path:
    """Where reproducer outcomes are remembered: $XLA_SENTINEL_OUTCOMES, else a per-user
    cache. Not per campaign: a known bug's reproducer answers the same for every campaign
    on one interpreter and jaxlib release."""
    env = os.environ.get("XLA_SENTINEL_OUTCOMES")
    return Path(env) if env else Path.home() / ".cache" / "xla-sentinel" / "repro-outcomes.sqlite"


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=30, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    return db


class Ledger:
    """The claims table of a campaign (OUT/agents.sqlite), and the remembered outcomes of
    reproducers (`outcomes_path`: a known bug's reproducer is run once per cure, jaxlib
    release and interpreter, not once per candidate fix)."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS claims (
      id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, agent TEXT NOT NULL,
      model TEXT NOT NULL, kind TEXT NOT NULL, claim TEXT NOT NULL, verified INTEGER NOT NULL,
      reason TEXT NOT NULL, evidence TEXT NOT NULL);
    """
    OUTCOMES = "CREATE TABLE IF NOT EXISTS outcomes (key TEXT PRIMARY KEY, outcome TEXT NOT NULL);"

    def __init__(self, path: Path, outcomes: Path | None = None, sandbox: Any = None) -> None:
        self.sandbox = sandbox  # agents/sandbox.Sandbox: reproducers run confined
        self.db = _connect(path)
        self.db.executescript(self.SCHEMA)
        self.outcomes = _connect(outcomes or outcomes_path())
        self.outcomes.executescript(self.OUTCOMES)

    def close(self) -> None:
        self.db.close()
        self.outcomes.close()

    def record(self, kind: str, agent: str, model: str, claim: dict[str, Any], decision: Decision) -> int:
        with self.db:
            cur = self.db.execute(
                "INSERT INTO claims (time, agent, model, kind, claim, verified, reason, evidence) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (time.time(), agent, model, kind, json.dumps(claim, default=str), int(decision.verified),
                 decision.reason, json.dumps(decision.evidence, default=str)))
        return int(cur.lastrowid or 0)

    def claims(self, kind: str | None = None) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT id, time, agent, model, kind, claim, verified, reason, evidence "
                               "FROM claims" + (" WHERE kind = ?" if kind else "") + " ORDER BY id",
                               (kind,) if kind else ()).fetchall()
        return [{"id": r[0], "time": r[1], "agent": r[2], "model": r[3], "kind": r[4],
                 "claim": json.loads(r[5]), "verified": bool(r[6]), "reason": r[7],
                 "evidence": json.loads(r[8])} for r in rows]

    def outcome(self, script: Path, cure: Cure | None, timeout: float = SCRIPT_SECONDS) -> dict[str, Any]:
        """`run_script`, remembered by the script's bytes, the cure and the jaxlib release."""
        # A bundle's repro.py (and an agent's, in a folder of its own) reads the files
        # beside it: the module, the inputs, a plugin. They are part of what it is.
        script = Path(script)
        digest = hashlib.sha256(script.read_bytes())
        if script.name == "repro.py":
            for extra in sorted(script.parent.glob("*")):
                if extra != script and extra.is_file() and extra.suffix in (".mlir", ".npz", ".py"):
                    digest.update(extra.name.encode() + extra.read_bytes())
        key = "|".join([digest.hexdigest(), cure.key() if cure else "", jaxlib_version(), sys.executable])
        row = self.outcomes.execute("SELECT outcome FROM outcomes WHERE key = ?", (key,)).fetchone()
        if row:
            return {**json.loads(row[0]), "cached": True}
        result = run_script(script, cure, timeout, self.sandbox)
        if result["outcome"] != "timeout":  # a slow machine may answer next time
            with self.outcomes:
                self.outcomes.execute("INSERT OR REPLACE INTO outcomes VALUES (?, ?)", (key, json.dumps(result)))
        return result


def verify_test(result: dict[str, Any]) -> Decision:
    """A test counts once it compiled and the oracle judged every target."""
    if result.get("status") != ProgramStatus.JUDGED:
        return Decision(False, f"not judged: status {result.get('status')!r}"
                        + (f" ({result['error']})" if result.get("error") else ""), result)
    unjudged = [v["target"] for v in result.get("verdicts", []) if v["verdict"] == UNJUDGED]
    if unjudged or not result.get("verdicts"):
        return Decision(False, f"targets not judged: {unjudged or 'none ran'}", result)
    return Decision(True, "compiled and judged by the oracle", result)


@dataclass(frozen=True)
class Trial:
    """A reproducer run before and after a cure: `before` on this build and the original
    program, `after` under the cure (a compiler's cure, or the rewritten program). What
    every check that a cure cures, or breaks nothing, compares."""

    before: dict[str, Any]
    after: dict[str, Any]

    @property
    def cured(self) -> bool:
        """The bug shows before and is gone after."""
        return bool(self.before["outcome"] == "bug" and self.after["outcome"] == "clean")

    @property
    def worse(self) -> bool:
        """A known bug's reproducer the cure breaks: clean before and not after, or a bug
        shown before that no longer runs (error, timeout) after."""
        b, a = self.before["outcome"], self.after["outcome"]
        return (b == "clean" and a != "clean") or (b == "bug" and a in ("error", "timeout"))

    def refusal(self, shown: str, after: str) -> str | None:
        """Why this is no cure, or None when it is: `shown` names what must show the bug
        before ("the reproducer"), `after` what must be clean after ("under CURE the
        reproducer")."""
        b, a = self.before, self.after
        if b["outcome"] != "bug":
            return f"{shown} does not show a bug on jaxlib {jaxlib_version()}: {b['outcome']} (exit {b['exit']})"
        if a["outcome"] != "clean":
            return f"{after} is {a['outcome']} (exit {a['exit']}), not clean"
        return None

    def evidence(self) -> dict[str, Any]:
        return {"affected": self.before, "under_cure": self.after}


def trial(ledger: Ledger, script: Path, cure: Cure | None, after: Path | None = None,
          timeout: float = SCRIPT_SECONDS) -> Trial:
    """Run `script` on this build, then `after` (the same script by default) under `cure`."""
    return Trial(ledger.outcome(script, None, timeout), ledger.outcome(after or script, cure, timeout))


def verify_reproduction(ledger: Ledger, script: Path, cure: Cure,
                        timeout: float = SCRIPT_SECONDS) -> Decision:
    """A reproducer counts once it exits 1 on this build and 0 under its cure."""
    t = trial(ledger, script, cure, timeout=timeout)
    evidence = {"script": str(script), "jaxlib": jaxlib_version(), "cure": cure.describe(), **t.evidence()}
    why = t.refusal("the reproducer", f"under {cure.describe()} the reproducer")
    if why:
        return Decision(False, why, evidence)
    return Decision(True, f"exit 1 on jaxlib {jaxlib_version()}, 0 under {cure.describe()}", evidence)


def verify_fix(ledger: Ledger, reproducer: Path, cure: Cure, regression: Sequence[Path],
               timeout: float = SCRIPT_SECONDS, min_regression: int = MIN_REGRESSION) -> Decision:
    """A fix counts once it cures the reproducer and no known bug's reproducer gets worse,
    on a regression corpus (the server's, never the agent's) of at least `min_regression`
    reproducers besides the one cured."""
    repro = verify_reproduction(ledger, reproducer, cure, timeout)
    rows, regressions, also = [], [], []
    for script in regression:
        if Path(script).resolve() == Path(reproducer).resolve():
            continue
        t = trial(ledger, script, cure, timeout=timeout)
        row = {"script": str(script), "before": t.before["outcome"], "after": t.after["outcome"]}
        if t.worse:
            regressions.append({**row, "output": t.after["output"][-600:]})
        elif t.cured:
            also.append(row)
        rows.append(row)
    evidence = {**repro.evidence, "regression_corpus": rows, "regressions": regressions,
                "also_cures": also, "cured": repro.verified}
    if not repro.verified:
        return Decision(False, f"not cured: {repro.reason}", evidence)
    # A reproducer that could not run before the cure (an error, a timeout) says nothing
    # about the cure: only those that ran count toward the minimum.
    ran = [r for r in rows if r["before"] in ("bug", "clean")]
    if len(ran) < min_regression:
        return Decision(False, f"cures the reproducer, but {len(ran)} of the regression corpus's "
                        f"{len(rows)} known bugs' reproducers ran, fewer than the server's minimum of "
                        f"{min_regression}: a fix is not verified against nothing", evidence)
    if regressions:
        return Decision(False, f"cures the reproducer but changes {len(regressions)} verdicts of the "
                        f"regression corpus: {', '.join(Path(r['script']).name for r in regressions)}",
                        evidence)
    return Decision(True, f"{cure.describe()} cures the reproducer; {len(ran)} known bugs' reproducers: "
                    f"no regression" + (f", {len(also)} cured too" if also else ""), evidence)


def decision_json(d: Decision) -> dict[str, Any]:
    return asdict(d)


@dataclass(frozen=True)
class Failure:
    """The reported failure a reproducer must show: under which target (configuration),
    which verdict, and the culprit op where the report names one."""

    target: str
    verdict: str
    culprit_op: str | None = None

    def __post_init__(self) -> None:
        if self.verdict not in {v.value for v in VERDICT_TABLE} or self.verdict == Verdict.PASS:
            raise GateError(f"verdict: {self.verdict!r} is no failing verdict; one of "
                            f"{', '.join(v.value for v in VERDICT_TABLE if v != Verdict.PASS)}")


def verdict_class(verdict: str) -> str:
    """What makes two verdicts the same failure: wrong numbers (mismatch, nan_mismatch, a
    version regression) are one class, every other verdict its own."""
    try:
        info = VERDICT_TABLE[Verdict(verdict)]
    except ValueError:
        return str(verdict)
    return "wrong numbers" if info.still_fails is StillFails.NUMBERS else str(verdict)


def _module_has_op(module: str, op: str) -> bool:
    name = op.replace("-", "_")
    return re.search(rf"\b(stablehlo|mhlo|chlo)\.{re.escape(name)}\b", module) is not None


def verify_judged_reproduction(failure: Failure, module: str, before: Sequence[dict[str, Any]],
                               after: Sequence[dict[str, Any]], cure: Cure) -> Decision:
    """A reproduction counts once the engine judged the submitted program's module as the
    reported failure (`before`: check_program's verdicts under the campaign's targets: the
    same verdict class under the same target, the module holding the culprit op where the
    report names one) and right under its cure (`after`: the same targets, the cure in
    their compile options, where the program cannot see it). No exit code is read."""
    by_target = {v["target"]: v for v in before}
    cured = {v["target"]: v for v in after}
    evidence = {"failure": asdict(failure), "cure": cure.describe(), "jaxlib": jaxlib_version(),
                "affected": [_short(v) for v in before], "under_cure": [_short(v) for v in after]}
    if failure.target not in by_target:
        return Decision(False, f"target: {failure.target!r} is not a target of the campaign "
                        f"({', '.join(by_target) or 'none ran'})", evidence)
    got = by_target[failure.target]
    if verdict_class(str(got["verdict"])) != verdict_class(failure.verdict):
        return Decision(False, f"the engine judged the program {got['verdict']} under {failure.target} "
                        f"(status {got.get('status')}), not the reported {failure.verdict}", evidence)
    if failure.culprit_op and not _module_has_op(module, failure.culprit_op):
        return Decision(False, f"the report names the culprit op {failure.culprit_op}; the program's "
                        "module holds none", evidence)
    fixed = cured.get(failure.target)
    if fixed is None or fixed["verdict"] != Verdict.PASS or fixed.get("status") != ProgramStatus.JUDGED:
        return Decision(False, f"under {cure.describe()} the engine judged the program "
                        f"{fixed['verdict'] if fixed else 'not at all'} under {failure.target}, not pass",
                        evidence)
    return Decision(True, f"the engine judged the program {got['verdict']} under {failure.target} on jaxlib "
                    f"{jaxlib_version()}, and pass under {cure.describe()}", evidence)


def _short(v: dict[str, Any]) -> dict[str, Any]:
    return {k: v.get(k) for k in ("target", "verdict", "status")}


def verify_rewrite(ledger: Ledger, original: Path, rewritten: Path, rewrite: Rewrite,
                   judged: Sequence[dict[str, Any]], equivalence: Sequence[dict[str, Any]],
                   timeout: float = SCRIPT_SECONDS) -> Decision:
    """A rewrite counts once (1) the bundle's repro.py exits 1 on the original module and
    0 on the rewrite (`rewritten`: the bundle with module.mlir replaced), (2) its float64
    values equal the original module's float64 reference on inputs drawn afresh and on
    special values (`equivalence`: one row per input set, `same`), never only the bundle's
    stored inputs, which a rewrite could answer with constants, and (3) every target of the
    campaign judges the rewrite right on those inputs (`judged`: check_program's verdicts,
    each with its `inputs`). It changes no compiler, so no known bug's verdict."""
    t = trial(ledger, original, None, after=rewritten, timeout=timeout)
    regressions = [{"target": v["target"], "verdict": v["verdict"], "status": v.get("status"),
                    "inputs": v.get("inputs")}
                   for v in judged if v["verdict"] != Verdict.PASS or v.get("status") != ProgramStatus.JUDGED]
    differs = [e for e in equivalence if not e.get("same")]
    evidence = {"script": str(original), "rewritten": str(rewritten), "jaxlib": jaxlib_version(),
                "cure": rewrite.describe(), **t.evidence(), "cured": t.cured,
                "rewrite_verdicts": list(judged), "equivalence": list(equivalence),
                "regressions": regressions, "also_cures": [], "regression_corpus": []}
    why = t.refusal("the bundle", "on the rewrite the bundle's repro.py")
    if why:
        return Decision(False, f"not cured: {why}", evidence)
    if differs or not equivalence:
        return Decision(False, "the rewrite does not compute the original module's float64 values on "
                        f"fresh inputs: {differs or 'no input set ran'}", evidence)
    if regressions or not judged:
        return Decision(False, "cures the reproducer but the campaign's targets do not all judge the rewrite "
                        f"right: {regressions or 'no target ran'}", evidence)
    return Decision(True, f"the rewrite passes the bundle's repro.py, equals the original's float64 values on "
                    f"{len(equivalence)} fresh input sets, and {len(judged)} verdicts judge it right; a "
                    "rewrite changes no known bug's verdict", evidence)
