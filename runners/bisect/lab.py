"""The bisector's bench: a worker with the failing target's plugins, a reference worker
without them, and the one question every stage asks: does this case still fail?

"Fails" is the oracle's rule (oracle.judge): the target's error against the float64
reference is far beyond the error of a legal configuration at the same precision (the
float64 jit settings, no plugins) on the same case. A failing result is compiled and run a
second time when asked; a different answer means the failure is nondeterministic.
Coordinator side: no jax here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import oracle
from ..worker import Worker, WorkerDied, WorkerHung
from .elements import NUMPY
from .options import LEGAL


class BisectWorker(Worker):
    """A campaign Worker (restart, timeout, crash detection) that serves bisection requests."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, handler_module="xla_sentinel.bisect.serve", **kwargs)


class LabError(RuntimeError):
    """A request the bisector relies on failed where it must not (e.g. cutting a module)."""


@dataclass
class Case:
    """A module to check, with its inputs and the float64 values its outputs should have."""

    module: str
    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    infos: list[oracle.OutputInfo]
    discrete: bool
    ops: list[int] = field(default_factory=list)  # indices of the original @main ops it keeps


@dataclass
class Check:
    """The target's answer on a case."""

    fails: bool
    verdict: str  # the oracle's verdict, or crash / hang / compile_error
    evidence: dict[str, Any] = field(default_factory=dict)
    outputs: list[np.ndarray] | None = None
    deterministic: bool | None = None  # set when the case was run twice
    hlo: str | None = None


class Lab:
    def __init__(self, options: dict[str, Any], plugins: Sequence[str], timeout: float,
                 log_dir: Path | None = None) -> None:
        self.options = dict(options)
        self.plugins = list(plugins)
        self.timeout = timeout
        self.target = BisectWorker("bisect-target", tuple(plugins),
                                   log_dir / "bisect-target.log" if log_dir else None)
        self.reference = BisectWorker("bisect-reference", (),
                                      log_dir / "bisect-reference.log" if log_dir else None)
        self.compiles: Counter[str] = Counter()  # target compiles per stage
        self.stage = "setup"

    def close(self) -> None:
        self.target.close()
        self.reference.close()

    def ask_reference(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            reply = self.reference.call(request, self.timeout)
        except (WorkerDied, WorkerHung) as e:
            raise LabError(f"reference worker failed on {request['cmd']}: {e}") from None
        if not reply["ok"]:
            raise LabError(f"{request['cmd']}: {reply['error']}")
        return reply

    def cut(self, module: str, keep: list[int], params: list[str], outputs: list[str]) -> str:
        return self.ask_reference({"cmd": "cut", "module": module, "keep": keep, "params": params,
                                   "outputs": outputs})["module"]

    def run_target(self, module: str, inputs: list[np.ndarray], options: dict[str, Any] | None = None,
                   *, want_hlo: bool = False, repeat: bool = False) -> dict[str, Any]:
        """The target's reply, or {"ok": False, "verdict": crash|hang|compile_error, ...}."""
        self.compiles[self.stage] += 2 if repeat else 1
        request = {"cmd": "run", "module": module, "inputs": inputs, "want_hlo": want_hlo,
                   "repeat": repeat, "options": self.options if options is None else options}
        try:
            reply = self.target.call(request, self.timeout)
        except WorkerHung as e:
            return {"ok": False, "verdict": "hang", "error": str(e)}
        except WorkerDied as e:
            return {"ok": False, "verdict": "crash", "error": f"{e}\n{e.log_tail[-1500:]}"}
        if not reply["ok"]:
            return {**reply, "verdict": "compile_error"}
        return reply

    def check_compile(self, case: Case, verdict: str, options: dict[str, Any] | None = None, *,
                      repeat: bool = False, want_hlo: bool = False) -> Check:
        """Does the target still fail to compile (or run) this case the way `verdict` says?
        A crash cannot be run twice in one request, so a repeat is a second request."""
        reply = self.run_target(case.module, case.inputs, options, want_hlo=want_hlo)
        got = reply["verdict"] if not reply["ok"] else "pass"
        deterministic = None
        if repeat:
            again = self.run_target(case.module, case.inputs, options)
            deterministic = got == (again["verdict"] if not again["ok"] else "pass")
        return Check(got == verdict, got, {"error": reply.get("error", "")[:2000]},
                     reply.get("outputs"), deterministic, reply.get("hlo"))

    def legal(self, module: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The case at its own precision under the float64 jit's legal settings, no plugins."""
        return self.ask_reference({"cmd": "run", "module": module, "inputs": inputs,
                                   "options": LEGAL})["outputs"]

    def check(self, case: Case, options: dict[str, Any] | None = None, *, repeat: bool = False,
              want_hlo: bool = False) -> Check:
        """Does the target compute wrong numbers on this case?"""
        reply = self.run_target(case.module, case.inputs, options, want_hlo=want_hlo, repeat=repeat)
        if not reply["ok"]:
            return Check(False, reply["verdict"], {"error": reply["error"][:2000]})
        outputs = reply["outputs"]
        results = {"target": outputs, "legal": self.legal(case.module, case.inputs)}
        # The legal compile is the literal result for outputs judged bitwise.
        j = oracle.judge("target", results, case.expected, case.infos, lambda: None, case.discrete,
                         exact="legal")
        return Check(j.verdict != "pass", j.verdict, {**j.evidence, "output": j.output}, outputs,
                     reply.get("same"), reply.get("hlo"))


def own_dtype(value: np.ndarray, dtype: str) -> np.ndarray:
    """A reference value rounded to the type a module parameter declares."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(value).astype(NUMPY[dtype])
