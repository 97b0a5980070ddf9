"""Stage 5, bundle: the repro folder a compiler engineer gets (docs/architecture.md, "Repro bundle").

module.mlir (the reduced case), optimized.hlo (the failing target's optimized HLO of it,
and program_optimized.hlo of the whole program), inputs.npz, expected.npz (float64),
actual.npz, the injected plugins when there were any, repro.py, report.md (what the
bisector found) and issue.md (the text of an upstream XLA issue: what is wrong, a
self-contained reproducer, versions, the flags that cure it). repro.py is run here before
the bundle stands: it must exit 1 under the finding's own options and, where the passes
stage named a cure, 0 under that cure; a bundle that does not is removed, and the stage's
evidence says why (`written: false`, `why`). For an invariant finding
whose reduced case returns the invariant's output, repro.py judges that invariant (the
declaration and judge/invariants.py's checkers copied in, legal.npz the legal result).
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from xla_sentinel.bisect import repro_template
from xla_sentinel.bisect.context import Context
from xla_sentinel.bisect.lab import Case
from xla_sentinel.core.dtypes import DISCRETE_FACTOR, TOLERANCE_K, UNIT_ROUNDOFF
from xla_sentinel.core.elements import name_of
from xla_sentinel.core.model import VERDICT_TABLE
from xla_sentinel.core.names import FLOATS
from xla_sentinel.core.program import save_arrays
from xla_sentinel.core.stablehlo import partitions
from xla_sentinel.core.versions import package_versions
from xla_sentinel.judge import oracle
from xla_sentinel.spec.plugins import split_ref
from xla_sentinel.worker.protocol import Donation, Strip

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
    # A compiler failure has no numbers to judge, and a real compiler crash takes the
    # legal configuration down too: its expectations stay the float64 values.
    legal = list(case.expected) if ctx.compiler_failure else ctx.lab.legal(case.module, case.inputs)
    # A bitwise output's expected value is the legal (literal) one, exact in float64 too;
    # an integer computed without floats keeps its float64 value, which is exact, since
    # the legal compile may share the bug (shift_set_then_reshape: every configuration).
    expected = [np.asarray(leg) if i.bitwise and (i.dtype in FLOATS or i.tainted) else ref
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
    failure = ctx.verdict.value if ctx.compiler_failure or _by_buffers(ctx) else "wrong_result"
    # A buffer finding: what the module donates, and the runtime fault the workers inject.
    donation = ctx.lab.ask_reference(Donation(module)).info if _by_buffers(ctx) else {}
    donated = donation.get("donated", [])
    if donated and ctx.verdict.value == "donation_mismatch":
        (folder / "module_undonated.mlir").write_text(donation["undonated"])
    invariant, lost = ctx.invariant_on(case) if ctx.invariant is not None else (None, "")
    if invariant is not None:
        # repro.py judges the invariant; the legal result widens its bound as in the lab.
        save_arrays(folder / "legal.npz",
                    [np.asarray(x).astype(np.float64) if i.dtype in FLOATS else np.asarray(x)
                     for i, x in zip(case.infos, legal, strict=True)],
                    ["f64" if i.dtype in FLOATS else i.dtype for i in case.infos])
    (folder / "repro.py").write_text(repro_template.render(
        ctx.record.get("id", ctx.finding_dir.name), failure, ctx.lab.options, plugins, in_dtypes,
        specs, partitions(module), invariant.to_json() if invariant is not None else None,
        donated, donation.get("fault")))
    (folder / "report.md").write_text(_report(ctx, case, check.evidence, specs))
    (folder / "issue.md").write_text(issue_text(ctx, case, module, expected, check.evidence, specs))
    proc = _run_repro(ctx, folder, {})
    cure = ctx.evidence.get("passes", {}).get("cure_options")
    cured = _run_repro(ctx, folder, cure) if cure and proc.returncode == 1 else None
    judged = ({"judged_by": "invariant", "invariant": invariant.kind} if invariant is not None
              else {"judged_by": "numbers", "invariant_lost": lost} if lost else {})
    evidence = {"repro_exit": proc.returncode, "repro_output": (proc.stdout + proc.stderr).strip()[-800:],
                **({"cured_exit": cured.returncode, "cured_with": cure} if cured is not None else {}),
                **({"repro": judged} if judged else {})}
    why = (f"repro.py exits {proc.returncode} under the finding's own options, not 1" if proc.returncode != 1
           else f"repro.py exits {cured.returncode} under the named cure {cure}, not 0"
           if cured is not None and cured.returncode != 0 else None)
    if why:
        # A bundle that does not show the finding's failure (or that its cure does not
        # cure) would send a compiler engineer after another bug: not written.
        shutil.rmtree(folder)
        return {"folder": None, "written": False, "why": why, **evidence}
    ctx.repro = str(folder.relative_to(ctx.finding_dir))
    return {"folder": ctx.repro, "written": True, **evidence}


def _by_buffers(ctx: Context) -> bool:
    """Whether repro.py judges this finding by the buffers (repro_template.BUFFER_FAILURES):
    its numbers are right, so a repro.py that checks numbers exits 0 and the gate refused
    every buffer finding's bundle (CI rehearsal 1)."""
    return ctx.verdict.value in repro_template.BUFFER_FAILURES


def _run_repro(ctx: Context, folder: Path, options: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """repro.py run in the bundle, with `options` on top of the finding's (--xla-option)."""
    extra = [f"--xla-option={k}={v}" for k, v in options.items()]
    # A hang's repro.py waits HANG_SECONDS for its child before it reports the hang.
    return subprocess.run([sys.executable, "repro.py", *extra], cwd=folder, capture_output=True, text=True,
                          timeout=max(ctx.lab.timeout, repro_template.HANG_SECONDS + 60))


def _fmt_shapes(arrays: list[np.ndarray]) -> str:
    return ", ".join(f"{name_of(a.dtype)}{list(a.shape)}" for a in arrays) or "none"


def _what(ctx: Context, opts: str, evidence: dict[str, Any]) -> str:
    assert ctx.culprit is not None
    op = f"`{ctx.ops[ctx.culprit]['text']}`"
    if ctx.culprit_path:  # the op inside the culprit's regions (bisect/regions.py)
        op = f"`{ctx.inner_text}` (at `{ctx.culprit_path}`, inside {op})"
    if _by_buffers(ctx):
        return (f"XLA compiled with `{opts}` runs {op} so that a buffer the caller owns is "
                f"touched ({ctx.verdict}: {VERDICT_TABLE[ctx.verdict].doc}); the outputs "
                "themselves may be right.")
    if ctx.compiler_failure:
        error = (evidence.get("error") or "").strip().splitlines()
        return (f"XLA with `{opts}` fails ({ctx.verdict}) on a module whose only "
                f"essential op is {op}: {error[0] if error else 'no message'}")
    inv = ctx.invariant
    if inv is not None and ctx.reduced is not None and ctx.invariant_on(ctx.reduced)[0] is not None:
        return (f"XLA compiled with `{opts}` computes {op} wrongly: on inputs fed with exact "
                f"values its result breaks the invariant `{inv.kind}` of output {inv.output} "
                f"(declared by {inv.source or 'the finding'}: {inv.to_json()}) by more than any "
                "legal rounding can, which a legal configuration keeps.")
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
        f"# XLA:CPU {'compiler ' + ctx.verdict if ctx.compiler_failure else 'miscompile'}: "
        f"{ctx.culprit_name()}"
        + ("" if ctx.compiler_failure else " gives wrong results"),
        "",
        f"Found by xla-sentinel as finding `{ctx.record.get('id')}` (verdict "
        f"`{ctx.verdict}`, target `{ctx.record.get('target')}`, program "
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
        *([f"- inside regions (stage regions, {ctx.evidence.get('regions', {}).get('probes')} probes): "
           f"`{ctx.culprit_path}`: `{ctx.inner_text}` (`{ctx.inner_op}`)"] if ctx.culprit_path else []),
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


# Arrays up to this many elements go into the issue's reproducer as literals; larger ones
# are read from the bundle's .npz files, which then have to be attached.
INLINE_ELEMENTS = 256

ISSUE_SNIPPET = """\
{devices}import numpy as np
import jax
import jax.numpy as jnp
from jax._src import compiler, xla_bridge
from jax._src.lib import xla_client

jax.config.update("jax_enable_x64", True)  # the float64 reference values below
MODULE = r\"\"\"
{module}\"\"\"
OPTIONS = {options}  # the failing configuration's XLA options
{plugins}inputs = [{inputs}]
backend = xla_bridge.get_backend("cpu")
{run}{check}"""

RUN_ONE_DEVICE = """\
device = backend.local_devices()[0]
exe = backend.compile_and_load(
    MODULE, xla_client.DeviceList((device,)),
    compiler.get_compile_options(num_replicas=1, num_partitions=1, env_options_overrides=OPTIONS))
result = exe.execute_sharded([jax.device_put(x, device) for x in inputs])
outputs = [np.asarray(o[0]) for o in result.disassemble_into_single_device_arrays()]
"""

# An SPMD module: XLA_FLAGS gives the CPU that many virtual devices (read when jax
# initializes, so before the import); inputs are placed and outputs put together as the
# compiled module's shardings say.
SPMD_DEVICES = """\
import os
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count={n}"
"""

RUN_PARTITIONED = """\
from jax._src.op_shardings import get_num_ways_dim_sharded
from jax._src.sharding_impls import GSPMDSharding
devices = tuple(backend.local_devices()[:{n}])
exe = backend.compile_and_load(
    MODULE, xla_client.DeviceList(devices),
    compiler.get_compile_options(num_replicas=1, num_partitions={n}, env_options_overrides=OPTIONS))

def tiling(s, shape):  # XLA gives each device ceil(n / w) of a dimension cut in w tiles
    sharding = GSPMDSharding(devices, s)
    ways = list(get_num_ways_dim_sharded(sharding._to_xla_hlo_sharding(len(shape)))[0]) or [1] * len(shape)
    return sharding, ways, tuple(-(-n // w) * w for n, w in zip(shape, ways))

bufs = []
for x, s in zip(inputs, exe.get_parameter_shardings()):
    sharding, _, padded = tiling(s, x.shape)
    bufs.append(jax.device_put(np.pad(x, [(0, p - n) for n, p in zip(x.shape, padded)]), sharding))
result = exe.execute_sharded(bufs)
outputs = []
for shards, s, shape in zip(result.disassemble_into_single_device_arrays(),
                            exe.get_output_shardings(), {shapes}):
    if not shape:
        outputs.append(np.asarray(shards[0]))
        continue
    sharding, ways, padded = tiling(s, shape)
    where = sharding.devices_indices_map(padded)
    tiles = {{}}  # each tile as a device holds it: a short one gives another shape
    for shard in shards:
        at = tuple((sl.start or 0) // (p // w) for sl, p, w in zip(where[shard.device], padded, ways))
        tiles.setdefault(at, np.asarray(shard))
    block = lambda prefix: tiles[prefix] if len(prefix) == len(shape) else [
        block(prefix + (k,)) for k in range(ways[len(prefix)])]
    outputs.append(np.block(block(()))[tuple(slice(0, n) for n in shape)])
"""

CHECK_RESULTS = """\
expected = [{expected}]  # float64 reference (or the exact result IEEE 754 fixes)
LEGAL = {legal}  # per output: largest legal normwise error against float64; 0: exact
bad = 0
for i, (out, ref, legal) in enumerate(zip(outputs, expected, LEGAL)):
    if out.shape != np.shape(ref):
        print(f"output {{i}}: shape {{list(out.shape)}}, expected {{list(np.shape(ref))}}")
        bad += 1
        continue
    a, r = out.astype(np.float64), np.asarray(ref, np.float64)
    if legal:
        # NaN, +inf, -inf where float64 (rounded to the output's type) says otherwise: the
        # norm below sees finite elements only.
        kind = lambda v: np.select([np.isnan(v), np.isposinf(v), np.isneginf(v)], [1, 2, 3], 0)
        with np.errstate(over="ignore"):
            flips = int(np.count_nonzero(kind(a) != kind(r.astype(out.dtype).astype(np.float64))))
        ok = np.isfinite(a) & np.isfinite(r)
        err = np.linalg.norm(a[ok] - r[ok]) / max(np.linalg.norm(r[ok]), 1e-300)
        print(f"output {{i}}: normwise error {{err:.3g}} against float64, legal at most {{legal:.3g}}; "
              f"{{flips}} elements NaN/inf where float64 is not")
        bad += err > legal or flips > 0
    else:
        wrong = int(np.count_nonzero((a != r) & ~(np.isnan(a) & np.isnan(r))))
        print(f"output {{i}}: {{wrong}} of {{a.size}} elements differ from the exact result")
        bad += wrong > 0
raise SystemExit(1 if bad else 0)
"""

PLUGIN_LINES = """\
# Self-validation only: the injected HLO pass plugin(s) copied into the bundle.
import importlib.util
for i, ref in enumerate({plugins}):
    path, _, func = ref.partition(":")
    spec = importlib.util.spec_from_file_location(f"plugin_{{i}}", path)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    jax.extend.xla.register_hlo_module_transformation(
        getattr(plugin, func or "transform"), name=f"plugin_{{i}}", platforms="cpu",
        stage=jax.extend.xla.PipelineStage.PRE_SCHEDULER)
jax.clear_caches()
"""


def _literal(value: float | int | bool) -> str:
    if isinstance(value, float) and not np.isfinite(value):
        return f'float("{value}")'
    return repr(value)


def _array(a: np.ndarray, npz: str, i: int) -> str:
    """An array as Python source: a literal that gives back exactly its values (every
    float type here is exact in float64), or a read from the bundle when it is large."""
    a = np.asarray(a)
    name = "bool_" if a.dtype == np.bool_ else a.dtype.name
    # bf16 and the other ml_dtypes types (numpy kind "V") are stored as unsigned integers
    # of the same width (program.save_arrays), and are floats for the literal.
    extended = a.dtype.kind == "V"
    if a.size > INLINE_ELEMENTS:
        load = f'np.load("{npz}")["arg{i}"]'
        return f"{load}.view(jnp.{name})" if extended else load
    if extended or a.dtype.kind == "f":
        values = ", ".join(_literal(v) for v in a.astype(np.float64).ravel().tolist())
        return f"np.array([{values}], np.float64).astype(jnp.{name}).reshape({tuple(a.shape)})"
    values = ", ".join(_literal(v) for v in a.ravel().tolist())
    return f"np.array([{values}], jnp.{name}).reshape({tuple(a.shape)})"


def curing_xla_flags(passes: dict[str, Any]) -> list[str]:
    """The curing passes and flags as XLA_FLAGS values a person can set."""
    flags = []
    if passes.get("curing_passes"):
        flags.append(f"--xla_disable_hlo_passes={','.join(passes['curing_passes'])}")
    for flag in passes.get("curing_flags") or []:
        name, _, value = str(flag).partition("=")
        flags.append(f"--{name}={value.lower() if value in ('True', 'False') else value}")
    return flags


def issue_text(ctx: Context, case: Case, module: str, expected: list[np.ndarray],
               evidence: dict[str, Any], specs: list[dict[str, Any]]) -> str:
    """An upstream XLA issue: title, what is wrong, a reproducer that needs nothing but jax
    (the bundle's plugin files only for a self-validation finding), versions, the flags
    that cure it. Markdown, as GitHub renders it."""
    assert ctx.culprit is not None
    passes = ctx.evidence.get("passes", {})
    opts = " ".join(f"--{k}={v}" for k, v in sorted(ctx.lab.options.items())) or "(default options)"
    op = ctx.culprit_name()
    kind = f"compiler {ctx.verdict}" if ctx.compiler_failure else "wrong results"
    # The names run() copied the plugins under, beside the reproducer.
    plugins = [f"plugin_{i}_{split_ref(r)[0].name}:{split_ref(r)[1]}"
               for i, r in enumerate(ctx.lab.plugins)]
    check = ("print([o.shape for o in outputs])  # reaching this line: the bug is gone\n"
             if ctx.compiler_failure else CHECK_RESULTS.format(
                 expected=", ".join(_array(e, "expected.npz", i) for i, e in enumerate(expected)),
                 legal=[s["threshold"] if s["float"] and not s.get("bitwise") else 0.0 for s in specs]))
    n = partitions(module)
    snippet = ISSUE_SNIPPET.format(
        devices=SPMD_DEVICES.format(n=n) if n > 1 else "",
        run=RUN_PARTITIONED.format(n=n, shapes=[tuple(e.shape) for e in case.expected]) if n > 1
        else RUN_ONE_DEVICE,
        module=module.rstrip() + "\n", options=repr(dict(ctx.lab.options)),
        plugins=("import jax.extend\n" + PLUGIN_LINES.format(plugins=plugins)) if plugins else "",
        inputs=", ".join(_array(x, "inputs.npz", i) for i, x in enumerate(case.inputs)), check=check)
    cures = curing_xla_flags(passes)
    figures = [f"- {k}: {evidence[k]}" for k in ("error", "threshold", "max_abs", "max_rel",
                                                   "max_ulp", "wrong_elements", "elements")
               if k in evidence]
    lines = [
        f"# [XLA:CPU] {kind} for `{op}` under `{opts}`", "",
        *([f"> **Do not file upstream**: made under an injected HLO pass plugin "
           f"({', '.join(p.split(':')[0] for p in plugins)}) to validate xla-sentinel itself.", ""]
          if plugins else []),
        "## What is wrong", "", _what(ctx, opts, evidence), "",
        *(["Error figures of the reduced case:", "", *figures, ""] if figures else []),
        "## Reproducer", "",
        "Runs with `pip install jax==" + package_versions().get("jax", "?") + "` alone"
        + (" (and the plugin file beside it)" if plugins else "")
        + ("; exits 1 while the bug shows." if not ctx.compiler_failure
           else "; the compile or the run fails while the bug shows."), "",
        "```python", snippet.rstrip(), "```", "",
        "## Versions", "",
        *[f"- {k} {v}" for k, v in package_versions().items()],
        f"- python {sys.version.split()[0]}, {platform.system()} {platform.machine()}, backend cpu", "",
        "## Flags that cure it", "",
        *([f"- `XLA_FLAGS={f}`" for f in cures] or ["- none found"]), "",
        f"Found by xla-sentinel (finding `{ctx.record.get('id')}`, verdict "
        f"`{ctx.verdict}`, target `{ctx.record.get('target')}`).", "",
    ]
    return "\n".join(lines)
