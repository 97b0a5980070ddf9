"""Stage 5, bundle: the repro folder a compiler engineer gets (docs/architecture.md, "Repro bundle").

module.mlir (the reduced case), optimized.hlo (the failing target's optimized HLO of it,
and program_optimized.hlo of the whole program), inputs.npz, expected.npz (float64),
actual.npz, the injected plugins when there were any, repro.py and report.md. repro.py
is run once here and must exit 1: a bundle that does not show the bug is reported so.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .. import oracle
from ..dtypes import DISCRETE_FACTOR, FLOATS, TOLERANCE_K, UNIT_ROUNDOFF
from ..plugins import split_ref
from ..program import save_arrays
from ..protocol import Strip
from ..versions import package_versions
from . import repro_template
from .context import Context
from .elements import name_of
from .lab import Case

NAME = "bundle"
FOLDER = "repro"


def _output_specs(case: Case, legal: list[np.ndarray]) -> list[dict[str, Any]]:
    """The oracle's threshold per output, measured against the legal configuration."""
    specs = []
    for info, ref, leg in zip(case.infos, case.expected, legal, strict=True):
        if info.bitwise:
            # Compared value for value with the legal result (saved as the expected one).
            specs.append({"dtype": info.dtype, "float": info.dtype in FLOATS, "bitwise": True,
                          "threshold": 0.0})
            continue
        if info.dtype not in FLOATS:
            specs.append({"dtype": info.dtype, "float": False, "threshold": 0.0})
            continue
        k = TOLERANCE_K[info.dtype] * (DISCRETE_FACTOR if case.discrete else 1.0)
        best = oracle.normwise_error(leg, ref, info.dtype)
        specs.append({"dtype": info.dtype, "float": True,
                      "threshold": float(k * max(best, UNIT_ROUNDOFF[info.dtype]))})
    return specs


def run(ctx: Context) -> dict[str, Any]:
    case = ctx.reduced
    assert case is not None and ctx.culprit is not None
    folder = ctx.finding_dir / FOLDER
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir()
    module = ctx.lab.ask_reference(Strip(case.module)).module
    (folder / "module.mlir").write_text(module)
    fusion = ctx.evidence.get("fusion", {})
    for key, name in (("reduced_hlo", "optimized.hlo"), ("program_hlo", "program_optimized.hlo")):
        if fusion.get(key):
            (folder / name).write_text(fusion[key])
    in_dtypes = [name_of(x.dtype) for x in case.inputs]
    save_arrays(folder / "inputs.npz", case.inputs, in_dtypes)
    legal = ctx.lab.legal(case.module, case.inputs)
    # A bitwise output's expected value is the legal (literal) one, exact in float64 too.
    expected = [np.asarray(leg) if i.bitwise else ref
                for i, ref, leg in zip(case.infos, case.expected, legal, strict=True)]
    save_arrays(folder / "expected.npz",
                [e.astype(np.float64) if i.dtype in FLOATS else e for i, e in zip(case.infos, expected, strict=True)],
                ["f64" if i.dtype in FLOATS else i.dtype for i in case.infos])
    check = ctx.check(case)
    if check.outputs is not None:
        save_arrays(folder / "actual.npz", check.outputs, [i.dtype for i in case.infos])
    plugins = []
    for i, ref in enumerate(ctx.lab.plugins):
        path, func = split_ref(ref)
        copy = f"plugin_{i}_{path.name}"
        shutil.copyfile(path, folder / copy)
        plugins.append(f"{copy}:{func}")
    specs = _output_specs(case, legal)
    failure = ctx.record["verdict"] if ctx.compiler_failure else "wrong_result"
    (folder / "repro.py").write_text(repro_template.render(
        ctx.record.get("id", ctx.finding_dir.name), failure, ctx.lab.options, plugins, in_dtypes,
        specs))
    (folder / "report.md").write_text(_report(ctx, case, check.evidence, specs))
    proc = subprocess.run([sys.executable, "repro.py"], cwd=folder, capture_output=True, text=True,
                          timeout=ctx.lab.timeout)
    ctx.repro = str(folder.relative_to(ctx.finding_dir))
    return {"folder": ctx.repro, "repro_exit": proc.returncode,
            "repro_output": (proc.stdout + proc.stderr).strip()[-800:]}


def _fmt_shapes(arrays: list[np.ndarray]) -> str:
    return ", ".join(f"{name_of(a.dtype)}{list(a.shape)}" for a in arrays) or "none"


def _what(ctx: Context, opts: str, evidence: dict[str, Any]) -> str:
    assert ctx.culprit is not None
    op = f"`{ctx.ops[ctx.culprit]['text']}`"
    if ctx.compiler_failure:
        error = (evidence.get("error") or "").strip().splitlines()
        return (f"XLA with `{opts}` fails ({ctx.record['verdict']}) on a module whose only "
                f"essential op is {op}: {error[0] if error else 'no message'}")
    if ctx.bitwise_finding:
        return (f"XLA compiled with `{opts}` computes {op} wrongly: on inputs fed with exact "
                "values its result differs from the one IEEE 754 fixes exactly (conversions, "
                "selections, one correctly rounded operation), which a legal configuration "
                "gives.")
    return (f"XLA compiled with `{opts}` computes {op} wrongly: on inputs fed with exact "
            "values its result is far outside the error any legal configuration makes "
            "against a float64 reference.")


def _report(ctx: Context, case: Case, evidence: dict[str, Any], specs: list[dict[str, Any]]) -> str:
    assert ctx.culprit is not None
    graph = ctx.evidence.get("graph", {})
    reduce = ctx.evidence.get("reduce", {})
    shrink = ctx.evidence.get("shrink", {})
    fusion = ctx.evidence.get("fusion", {})
    passes = ctx.evidence.get("passes", {})
    hits = fusion.get("reduced", {}).get("hits") or []
    hit = hits[0] if hits else {}
    extracted = fusion.get("extracted", {})
    stats = {k: evidence.get(k) for k in ("error", "threshold", "max_abs", "max_rel", "max_ulp",
                                          "where", "actual", "expected", "wrong_elements",
                                          "elements") if k in evidence}
    opts = " ".join(f"--{k}={v}" for k, v in sorted(ctx.lab.options.items())) or "(default options)"
    lines = [
        f"# XLA:CPU {'compiler ' + ctx.record['verdict'] if ctx.compiler_failure else 'miscompile'}: "
        f"{ctx.canonical_op(ctx.culprit)}"
        + ("" if ctx.compiler_failure else " gives wrong results"),
        "",
        f"Found by xla-sentinel as finding `{ctx.record.get('id')}` (verdict "
        f"`{ctx.record.get('verdict')}`, target `{ctx.record.get('target')}`, program "
        f"`{ctx.record.get('program')}`).",
        "",
        "## What is wrong",
        "",
        _what(ctx, opts, evidence),
        "",
        "## Smallest case",
        "",
        f"- ops: {reduce.get('ops_before', len(ctx.ops))} in the program, {len(case.ops)} in the "
        f"reproducer ({', '.join(ctx.ops[i]['name'] for i in case.ops)})",
        f"- inputs: {_fmt_shapes(case.inputs)}" + (f" (shrunk from {shrink['shape_before']})"
                                                  if shrink.get("shape_before") else ""),
        "- module: `module.mlir`; optimized HLO of the failing target: `optimized.hlo`",
        "",
        "## Error figures",
        "",
        *[f"- {k}: {v}" for k, v in stats.items()],
        *[f"- output {i} legal bound: " + ("none, fixed bitwise" if s.get("bitwise")
                                            else f"{s['threshold']:.3g} (normwise)")
          for i, s in enumerate(specs)
          if s["float"]],
        "",
        "## Culprit",
        "",
        f"- op (stage graph, {len(graph.get('probes', []))} suffix probes): "
        f"`{ctx.canonical_op(ctx.culprit)}`",
        f"- fusion: {hit.get('kind', 'not found in optimized HLO')}"
        + (f" `{hit['fusion']}` with {', '.join(hit.get('fusion_ops', [])) or 'no other ops'}"
           if hit.get("fusion") else ""),
        f"- fusion alone: {'fails' if extracted.get('fails_alone') else 'passes'}"
        if "fails_alone" in extracted else f"- fusion alone: {extracted.get('skipped', 'not checked')}",
        f"- curing passes (xla_disable_hlo_passes): {', '.join(passes.get('curing_passes') or []) or 'none found'}",
        f"- curing flags: {', '.join(passes.get('curing_flags') or []) or 'none'}",
        "",
        "## Versions",
        "",
        *[f"- {k} {v}" for k, v in package_versions().items()],
        f"- python {sys.version.split()[0]}",
        "",
        "## Commands",
        "",
        "```",
        "python repro.py                 # exits 1 while the bug shows",
        *(["python repro.py --without-plugins   # without the injected pass: exits 0"]
          if ctx.lab.plugins else []),
        *([f"python repro.py --xla-option xla_disable_hlo_passes={','.join(passes['curing_passes'])}"]
          if passes.get("curing_passes") else []),
        f"xla-sentinel bisect {ctx.finding_dir}",
        "```",
        "",
    ]
    if ctx.lab.plugins:
        lines[3:3] = ["", "**Made under an injected HLO pass plugin** (self-validation): "
                      + ", ".join(Path(split_ref(p)[0]).name for p in ctx.lab.plugins)
                      + ". repro.py registers it."]
    return "\n".join(lines)
