"""Throughput of `run` before and after issue 16, in one run on the same seed.

Four campaigns of the same programs (targets default, O0, no_fusion_emitters; 1 worker;
bisection off), run one after the other so all see the same machine; each step keeps the
ones above it:

  before        references f64_eager, f64_jit, eager, with eager all through XLA (every
                program pays the XLA float64 references and one XLA compile per op, shape and
                dtype); every worker process spawned (it imports jax itself)
  f64 numpy     the campaign default, f64_numpy with f64_eager and f64_jit as its cross-check
                (a suspect, every crossCheckEvery-th program, a numpy fallback), eager still
                all through XLA (XLA_SENTINEL_EAGER_ALL_XLA=1, handlers.py)
  eager numpy   eager in numpy where it reproduces XLA:CPU bit for bit (own_precision.py),
                XLA op by op for the rest (summary.json eager_xla_ops)
  after         the campaign as it runs now: workers forked from one process that imported
                jax once (worker/client.py _Zygote)
  no buffer checks  "after" with the targets' buffer checks off (XLA_SENTINEL_BUFFER_CHECKS=0,
                xla/buffers.py): ratio_after_over_no_buffer_checks is what they cost

For each it prints programs per wall second, programs per core-second (CPU time of the
coordinator and its worker processes, which is what a loaded machine does not distort),
findings and cross-checks. Then, in-process on the same programs, the XLA compiles per
program of each configuration (targets, references; the cross-check only on the programs
the campaign samples) and the seconds each configuration costs, so where the remaining
time goes is visible. Usage: python bench/throughput.py [--programs N] [--seed S] [--rows R,..] [--no-in-process]
[--account smoke,families [--workers 1,2] [--verdicts-out FILE]] [--eager-compiles SMOKE,FAMILIES]

`--account SETTINGS` (issue 39; SETTINGS of smoke, families, hosts) runs instead a campaign of
examples/smoke.yaml's settings (families: every shape family on; hosts: 4 devices, every
partitioned program also on 2 host processes x 2 devices, their CPU from their own
counters) per worker slot count of
`--workers` (1 by default; comma-separated) and prints where its CPU went: every stage
(generation, inputs, each reference, each target's compile and run, buffer checks, judging,
coverage, pickling and transport, storage, start-up, waiting), measured where it ran by the
process's own CPU clock (core/cpu_account.py), the unaccounted remainder against the
coordinator's and its workers' counters, and the share of the targets-only floor (their
compile and run over all the CPU). The table goes to stderr, the figures (raw stages
included) to stdout as JSON; `--verdicts-out FILE` writes each run's verdict per program.

`--eager-compiles SMOKE,FAMILIES` (issue 39) evaluates instead the `eager` reference alone, in
this process, on the first SMOKE programs of smoke's settings and FAMILIES of families', and
prints its XLA compiles per entry (and how often each entry went to XLA) and its CPU seconds.

`--generators` (issue 28) runs instead the campaign as it runs now twice in one run, with the
old default generator (`generator.version: 1`) and the new one (version 2: shape families,
4 devices, large sizes), the same seed and budget, and prints programs per core-second of
each, the ratio new/old, and the kernel decisions (coverage.KERNEL_DECISIONS) each reached.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Literal, cast

import jax
import structlog

jax.config.update("jax_enable_x64", True)  # type: ignore[no-untyped-call]
# The figures are JSON on stdout; the engine's log lines go to stderr.
structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))

from xla_sentinel.campaign.engine import run_campaign  # noqa: E402
from xla_sentinel.core import cpu_account  # noqa: E402
from xla_sentinel.judge import targets  # noqa: E402
from xla_sentinel.judge.assess import cross_check_reason  # noqa: E402
from xla_sentinel.programs import evaluate  # noqa: E402
from xla_sentinel.programs.generator import generate  # noqa: E402
from xla_sentinel.programs.inputs import make_inputs  # noqa: E402
from xla_sentinel.spec.campaign import DEFAULT_REFERENCES, CampaignSpec, parse_spec  # noqa: E402
from xla_sentinel.worker import client as worker  # noqa: E402
from xla_sentinel.worker import server as dispatch  # noqa: E402
from xla_sentinel.worker.protocol import GraphReference, NumpyReference  # noqa: E402
from xla_sentinel.xla import compiler  # noqa: E402

TABLE = dispatch.load_table("current")  # the handlers a worker of this release serves

BEFORE = ["f64_eager", "f64_jit", "eager"]
AFTER = list(DEFAULT_REFERENCES)
# Each row's references, whether eager goes all through XLA, whether workers fork from the zygote.
ROWS = {"before": (BEFORE, True, False), "f64 numpy": (AFTER, True, False),
        "eager numpy": (AFTER, False, False), "after": (AFTER, False, True),
        "no buffer checks": (AFTER, False, True)}
# Environment a row's worker processes start with (they inherit it).
ROW_ENV = {"no buffer checks": {"XLA_SENTINEL_BUFFER_CHECKS": "0"}}
COMPILES: Counter[str] = Counter()
GraphKind = Literal["eager", "f64_eager", "f64_jit", "unsharded"]


def _count_jax(event: str, duration_secs: float, **_: str | int) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        COMPILES["n"] += 1


def _count_module_compiles() -> None:
    """compiler.compile_module compiles without jax's jit path (no event): count it too."""
    inner = compiler.compile_module

    def counted(*a: Any, **k: Any) -> Any:
        COMPILES["n"] += 1
        return inner(*a, **k)
    compiler.compile_module = counted


def _cpu_seconds() -> float:
    """CPU time of this process and of its exited children (the campaign's workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _spec(seed: int, programs: int, references: list[str],
          generator: dict[str, Any] | None = None) -> CampaignSpec:
    return parse_spec({"seed": seed, "budget": {"programs": programs}, "workers": 1,
                       "references": references, "bisect": {"enabled": False},
                       "generator": generator or {}})


def campaign(seed: int, programs: int, references: list[str], eager_all_xla: bool,
             zygote: bool, generator: dict[str, Any] | None = None) -> dict[str, Any]:
    # The worker processes read it when they start (handlers.EAGER_ALL_XLA).
    os.environ["XLA_SENTINEL_EAGER_ALL_XLA"] = "1" if eager_all_xla else "0"
    # The campaign stops the forkserver at its end, so the CPU time of the workers it
    # forked is in RUSAGE_CHILDREN when it is read, and each campaign pays its own start.
    worker._ZYGOTE.enabled = zygote
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cpu0 = _cpu_seconds()
            s = run_campaign(_spec(seed, programs, references, generator), Path(tmp))
            cpu = _cpu_seconds() - cpu0
    finally:
        del os.environ["XLA_SENTINEL_EAGER_ALL_XLA"]
        worker._ZYGOTE.enabled = True
    return {"references": references, "eager": "xla" if eager_all_xla else "numpy + xla",
            "workers": "forked from the zygote" if zygote else "spawned",
            "programs": s["programs"], "elapsed_s": s["elapsed_s"],
            "cpu_s": round(cpu, 1), "programs_per_s": round(s["programs"] / s["elapsed_s"], 3),
            "programs_per_core_s": round(s["programs"] / cpu, 3), "executions": s["executions"],
            "findings": s["findings"], "program_status": s["program_status"],
            "cross_checks": s.get("cross_checks", {}), "reference_fallbacks": s.get("reference_fallbacks", {}),
            "eager_xla_ops": sum(s.get("eager_xla_ops", {}).values()),
            "kernel_decisions": s["kernel_decisions"]}


def in_process(seed: int, programs: int) -> dict[str, object]:
    """XLA compiles and seconds per configuration, on the campaign's programs (special
    inputs drawn as the campaign draws them), in this one warm process."""
    import numpy as np

    spec = _spec(seed, programs, AFTER)
    every = spec.crossCheckEvery
    items = []
    for i in range(programs):
        g = generate(seed, i, spec.generator)
        special = bool(np.random.default_rng([seed, i, 0x5BEC]).random() < spec.generator.specialValues)
        x = make_inputs({"seed": seed, "index": i, "special": special}, g.inputs)
        items.append((f"s{seed}-i{i}", g, x, evaluate.lower_text(g)))
    compiles: dict[str, int] = {}
    seconds: dict[str, float] = {}
    sampled = {pid for pid, *_ in items if cross_check_reason(pid, 0, {}, every)}
    for t in spec.targets:
        before, t0 = COMPILES["n"], time.perf_counter()
        opts = targets.resolve(t).options
        for _, _, x, m in items:
            compiler.run_module(m, x, opts)
        compiles[t.name], seconds[t.name] = COMPILES["n"] - before, time.perf_counter() - t0
    for kind in ("f64_numpy", "f64_eager", "f64_jit", "eager (all XLA)", "eager"):
        before, t0 = COMPILES["n"], time.perf_counter()
        sampled_compiles, sampled_s = 0, 0.0
        for pid, g, x, m in items:
            c0, s0 = COMPILES["n"], time.perf_counter()
            if kind == "eager (all XLA)":
                evaluate.eager(g, x)
            else:
                dispatch.handle(TABLE, NumpyReference(m, x, g) if kind == "f64_numpy"
                                else GraphReference(cast(GraphKind, kind), g, x))
            if pid in sampled:
                sampled_compiles += COMPILES["n"] - c0
                sampled_s += time.perf_counter() - s0
        compiles[kind], seconds[kind] = COMPILES["n"] - before, time.perf_counter() - t0
        if kind in ("f64_eager", "f64_jit"):
            compiles[kind + " (cross-check sample)"] = sampled_compiles
            seconds[kind + " (cross-check sample)"] = sampled_s
    target_compiles = sum(compiles[t.name] for t in spec.targets)
    before = target_compiles + compiles["f64_eager"] + compiles["f64_jit"] + compiles["eager (all XLA)"]
    cross_check = sum(compiles[k + " (cross-check sample)"] for k in ("f64_eager", "f64_jit"))
    f64_numpy = target_compiles + compiles["f64_numpy"] + compiles["eager (all XLA)"] + cross_check
    after = target_compiles + compiles["f64_numpy"] + compiles["eager"] + cross_check
    return {"programs": programs, "cross_check_sample": len(sampled),
            "xla_compiles_per_program": {"before": round(before / programs, 2),
                                         "f64 numpy": round(f64_numpy / programs, 2),
                                         "after": round(after / programs, 2)},
            "compiles_by_configuration": compiles,
            "seconds_by_configuration": {k: round(v, 2) for k, v in seconds.items()}}


def generators(seed: int, programs: int) -> dict[str, Any]:
    """The old and the new default generator, one after the other on the same machine."""
    old = campaign(seed, programs, AFTER, False, True, {"version": 1})
    new = campaign(seed, programs, AFTER, False, True, {"version": 2})
    reached_old, reached_new = set(old["kernel_decisions"]["reached"]), set(new["kernel_decisions"]["reached"])
    return {"generator v1": old, "generator v2": new,
            "ratio_v2_over_v1": {k: round(new[k] / old[k], 2) for k in ("programs_per_s", "programs_per_core_s")},
            "kernel_decisions": {"v1": len(reached_old), "v2": len(reached_new),
                                 "only_v2": sorted(reached_new - reached_old),
                                 "only_v1": sorted(reached_old - reached_new)}}


# --- the CPU account (issue 39) ---------------------------------------------------------
# Campaign settings the account is taken for: examples/smoke.yaml's generator, targets and
# references (one worker per slot count given, bisection off), and the same with every
# shape family drawn at weight 1.
SMOKE = Path(__file__).resolve().parent.parent / "examples" / "smoke.yaml"
SETTINGS = ("smoke", "families", "hosts")


def _settings_spec(settings: str, seed: int, programs: int, workers: int) -> CampaignSpec:
    import yaml

    data = yaml.safe_load(SMOKE.read_text())
    data.update(seed=seed, budget={"programs": programs}, workers=workers, bisect={"enabled": False})
    if settings == "families":
        from xla_sentinel.spec.campaign import SHAPE_FAMILIES

        data["generator"] = {**data.get("generator", {}), "shapes": list(SHAPE_FAMILIES)}
    if settings == "hosts":
        # Every partitioned program once more on 2 host processes x 2 devices (issue 35):
        # the host processes' stages come in their frames (worker/host.py).
        data["generator"] = {**data.get("generator", {}), "devices": 4}
        data["accelerator"] = {"hosts": 2}
    return parse_spec(data)


def _children_cpu() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def stage_category(where: str, path: str, target_names: set[str]) -> str:
    """The account table's row of one measured stage: `where` is "coordinator" or a worker's
    role (client.role), `path` the stage's path in that process (core/cpu_account.py)."""
    parts = path.split("/")
    last = parts[-1]
    if last == cpu_account.IDLE:
        return f"{where if where == 'coordinator' else 'workers'}: idle waiting"
    if last == cpu_account.TRANSPORT:
        return f"{where if where == 'coordinator' else 'workers'}: serialization and transport"
    if last == cpu_account.STARTUP or parts[0] in ("ping", "validate") or where.startswith("validate-"):
        return f"{where if where == 'coordinator' else 'workers'}: process start-up"
    if where == "coordinator":
        inner = [p for p in parts if p not in ("program", "judging")]
        return "coordinator: " + ("/".join(inner) or parts[0])
    if where in target_names:
        if cpu_account.BUFFER_CHECKS in parts:
            return "buffer checks (targets)"
        if last == "hlo_text":
            return "kernel decisions: optimized HLO text"
        if last in (cpu_account.COMPILE, cpu_account.RUN):
            return f"target {where}: {last}"
        return f"target {where}: request handling"
    if parts[0] == "generate":
        return {"generation": "generation", "inputs": "inputs", "lowering": "generation: lowering"}.get(
            last, "generation")
    if parts[0].startswith("reference:"):
        ref = parts[0].replace(":", " ")
        if last == "lowering":
            return f"{ref}: lowering"
        if last == "numpy":  # eager's ops numpy reproduces (references/own_precision.py)
            return f"{ref}: in numpy"
        if last in (cpu_account.COMPILE, cpu_account.RUN):
            return f"{ref}: XLA compile and run"
        # eager: its ops through XLA, each compiled alone (evaluate.literal); f64_numpy: npref
        return ref
    if parts[0] == "noise":
        return "reference noise (4 perturbed f64 evaluations)"
    if parts[0] == "pass_effects":
        return "coverage: pass effects (sampled compiles)"
    return f"{where}: {path}"


def account(seed: int, programs: int, settings: str, workers: int) -> dict[str, object]:
    """One campaign of `settings` and where its CPU went: every stage, measured where it
    ran (the coordinator's threads, each worker process), against the CPU the coordinator
    and its worker processes spent as their own counters say."""
    from xla_sentinel.campaign.multihost import layout

    spec = _settings_spec(settings, seed, programs, workers)
    lay = layout(spec)
    # A layout's target (hosts2x2) is a target under test: its compile and run on every
    # host process are in the floor.
    target_names = {t.name for t in spec.targets} | ({lay.name} if lay else set())
    os.environ["XLA_SENTINEL_EAGER_ALL_XLA"] = "0"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cpu_account.reset()
            coord0, kids0 = time.process_time(), _children_cpu()
            s = run_campaign(spec, Path(tmp))
            coord, kids = time.process_time() - coord0, _children_cpu() - kids0
            stages = [("coordinator", k, v) for k, v in cpu_account.ACCOUNT.snapshot().items()]
            stages += [(k.split(":", 1)[0], k.split(":", 1)[1], v) for k, v in cpu_account.WORKERS.snapshot().items()]
            zygotes = sum(cpu_account.ZYGOTES.values())
            verdicts = program_verdicts(Path(tmp))
    finally:
        del os.environ["XLA_SENTINEL_EAGER_ALL_XLA"]
    rows: dict[str, float] = {}
    for where, path, v in stages:
        key = stage_category(where, path, target_names)
        rows[key] = rows.get(key, 0.0) + v
    if zygotes:
        rows["workers: process start-up (forkserver imports)"] = zygotes
    coord_counted = sum(v for w, _, v in stages if w == "coordinator")
    worker_counted = sum(v for w, _, v in stages if w != "coordinator") + zygotes
    total = coord + kids
    floor = sum(v for k, v in rows.items() if k.startswith("target ") and k.endswith((": compile", ": run")))
    n = s["programs"]
    table = {k: round(v, 2) for k, v in sorted(rows.items(), key=lambda kv: -kv[1])}
    return {"settings": settings, "workers": workers, "programs": n,
            "cpu_s": round(total, 2), "worker_restarts": s.get("worker_restarts"),
            "coordinator_cpu_s": round(coord, 2), "workers_cpu_s": round(kids, 2),
            "unaccounted_s": {"coordinator": round(coord - coord_counted, 2),
                              "workers": round(kids - worker_counted, 2),
                              "share": round((total - coord_counted - worker_counted) / total, 3)},
            "programs_per_core_s": round(n / total, 3),
            "coordinator_cpu_per_program_s": round(coord / n, 4),
            "targets_floor_s": round(floor, 2),
            "targets_floor_programs_per_core_s": round(n / floor, 3) if floor else None,
            "share_of_floor": round(floor / total, 3),
            "table_s": table,
            "stages_s": {f"{w}:{p}": round(v, 3) for w, p, v in sorted(stages, key=lambda x: -x[2]) if v >= 0.005},
            "verdicts": verdicts, "program_status": s["program_status"]}


def eager_compiles(seed: int, smoke: int, families: int) -> dict[str, object]:
    """The XLA compiles of the `eager` reference (evaluate.literal) per entry, in this one
    process, over the first `smoke` programs of examples/smoke.yaml's settings and the first
    `families` of every shape family's (issue 39): which entries its compiles go to."""
    import numpy as np

    current = ["(none)"]
    compiles: Counter[str] = Counter()
    calls: Counter[str] = Counter()

    def listener(event: str, duration_secs: float, **_: str | int) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            compiles[current[0]] += 1

    def attributed(fn: Any) -> Any:
        def wrapped(op: Any, *a: Any) -> Any:
            current[0] = op.name
            try:
                return fn(op, *a)
            finally:
                current[0] = "(none)"
        return wrapped

    # literal's two ways to XLA, looked up in the module when called: attributed to the entry.
    saved = evaluate.by_primitive, evaluate._bucketed
    evaluate.by_primitive, evaluate._bucketed = map(attributed, saved)
    jax.monitoring.register_event_duration_secs_listener(listener)
    cpu0 = time.process_time()
    try:
        for settings, n in (("smoke", smoke), ("families", families)):
            spec = _settings_spec(settings, seed, n, 1)
            for i in range(n):
                g = generate(seed, i, spec.generator)
                special = bool(np.random.default_rng([seed, i, 0x5BEC]).random() < spec.generator.specialValues)
                evaluate.literal(g, make_inputs({"seed": seed, "index": i, "special": special}, g.inputs), calls)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
        evaluate.by_primitive, evaluate._bucketed = saved
    return {"programs": {"smoke": smoke, "families": families}, "compiles": sum(compiles.values()),
            "cpu_s": round(time.process_time() - cpu0, 2),
            "by_entry": {op: {"compiles": compiles[op], "xla_calls": calls[op]}
                         for op in sorted(set(compiles) | set(calls), key=lambda k: (-compiles[k], k))}}


def program_verdicts(out: Path) -> dict[str, object]:
    """Per program, its status and its findings' (target, verdict), sorted: what must not
    change when the overhead is cut (the oracle's answer on the same programs)."""
    import sqlite3

    con = sqlite3.connect(out / "campaign.sqlite")
    try:
        found: dict[str, list[list[str]]] = {}
        status = dict(con.execute("select id, status from programs"))
        for pid, target, verdict in con.execute("select program, target, verdict from findings"):
            found.setdefault(pid, []).append([target, verdict])
    finally:
        con.close()
    return {pid: [st, sorted(found.get(pid, []))] for pid, st in sorted(status.items())}


def print_account(result: dict[str, object]) -> None:
    """The table on stderr, readable; the figures stay JSON on stdout."""
    total = float(result["cpu_s"])  # type: ignore[arg-type]
    print(f"\n{result['settings']}, {result['programs']} programs, {result['workers']} worker slot(s): "
          f"{total:.2f} CPU-s ({result['coordinator_cpu_s']} coordinator, {result['workers_cpu_s']} workers)",
          file=sys.stderr)
    for name, v in result["table_s"].items():  # type: ignore[attr-defined]
        print(f"  {name:58s} {v:8.2f}  {100 * v / total:5.1f}%", file=sys.stderr)
    un = result["unaccounted_s"]
    print(f"  {'unaccounted (coordinator, workers)':58s} {un['coordinator']:8.2f} {un['workers']:8.2f}"  # type: ignore[index]
          f"  ({100 * un['share']:.1f}%)", file=sys.stderr)  # type: ignore[index]
    print(f"  share of the targets-only floor: {result['share_of_floor']} "
          f"({result['programs_per_core_s']} programs/core-s, floor {result['targets_floor_programs_per_core_s']})",
          file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=60)
    ap.add_argument("--seed", type=int, default=5)
    # A long campaign's steady state: fixed costs (worker start-up) weigh less, caches
    # (eager's compiled kernels, reused across programs) fill up.
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}")
    ap.add_argument("--no-in-process", action="store_true", help="skip the per-configuration part")
    ap.add_argument("--generators", action="store_true",
                    help="compare the old (version 1) and new (version 2) default generators instead")
    ap.add_argument("--account", default="",
                    help=f"comma-separated settings of {', '.join(SETTINGS)}: the CPU account by stage instead")
    ap.add_argument("--workers", default="1", help="with --account: comma-separated worker slot counts")
    ap.add_argument("--verdicts-out", default="", help="with --account: write each run's verdict per program here")
    ap.add_argument("--eager-compiles", default="",
                    help="SMOKE,FAMILIES: eager's XLA compiles per entry over that many programs of each instead")
    args = ap.parse_args()
    if args.eager_compiles:
        smoke, families = (int(n) for n in args.eager_compiles.split(","))
        json.dump(eager_compiles(args.seed, smoke, families), sys.stdout, indent=1)
        print()
        return 0
    if args.account:
        if unknown := [x for x in args.account.split(",") if x.strip() not in SETTINGS]:
            ap.error(f"--account: unknown {', '.join(unknown)}")
        runs = [account(args.seed, args.programs, settings.strip(), int(w))
                for settings in args.account.split(",") for w in args.workers.split(",")]
        for r in runs:
            print_account(r)
        if args.verdicts_out:
            Path(args.verdicts_out).write_text(json.dumps({f"{r['settings']}/{r['workers']}": r["verdicts"]
                                                           for r in runs}, indent=0))
        json.dump([{k: v for k, v in r.items() if k != "verdicts"} for r in runs], sys.stdout, indent=1)
        print()
        return 0
    if args.generators:
        json.dump(generators(args.seed, args.programs), sys.stdout, indent=1)
        print()
        return 0
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    if unknown := [r for r in rows if r not in ROWS]:
        ap.error(f"--rows: unknown {', '.join(unknown)}")
    if "after" not in rows:
        ap.error("--rows: the ratios are against 'after': name it")
    jax.monitoring.register_event_duration_secs_listener(_count_jax)
    _count_module_compiles()
    result: dict[str, Any] = {}
    for row in ROWS:
        if row in rows:
            os.environ.update(ROW_ENV.get(row, {}))
            try:
                result[row] = campaign(args.seed, args.programs, *ROWS[row])
            finally:
                for k in ROW_ENV.get(row, {}):
                    del os.environ[k]
    for base in rows:
        if base != "after":
            result[f"ratio_after_over_{base.replace(' ', '_')}"] = {
                k: round(result["after"][k] / result[base][k], 2) for k in ("programs_per_s", "programs_per_core_s")}
    if not args.no_in_process:
        result["in_process"] = in_process(args.seed, args.programs)
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
