"""The repro.py every bundle carries: needs only jax and numpy (and, for a finding made
under an injected pass plugin, the plugin file copied beside it)."""

from __future__ import annotations

from typing import Any

from xla_sentinel.judge import invariants

# The buffer verdicts repro.py judges by the buffers (core/model.py, StillFails.BUFFERS but
# result_clobbered, which needs the earlier results of a process that ran other programs).
BUFFER_FAILURES = ("input_clobbered", "donation_mismatch")

# How long repro.py lets a hang finding's child compile and run before it calls it a hang.
HANG_SECONDS = 60

TEMPLATE = '''\
"""Reproducer for an XLA miscompilation found by xla-sentinel ({finding_id}).

Compiles module.mlir (StableHLO) with the failing XLA options, runs it on inputs.npz and
compares against expected.npz (float64 reference); for a compiler crash, hang or compile
error (FAILURE below) it compiles in a child process and checks that it succeeds (a hang:
within HANG_SECONDS). An SPMD module
(PARTITIONS > 1) runs on that many virtual CPU devices, each input placed and each output
put together as the compiled module's shardings say. Exit 1 while the bug shows, 0 once
fixed. Options: --without-plugins (do not register the injected pass plugins the finding
was made under), --xla-option NAME=VALUE (add or override an XLA option, e.g. the
workaround xla_disable_hlo_passes=...). Needs only jax and numpy. A finding that broke an
invariant (INVARIANT below) is judged by that invariant alone, as the campaign judged it:
the bound comes from the float64 values and the output's type, widened by the legal
configuration's own miss (legal.npz); the numbers may differ as long as it holds.
A buffer finding (FAILURE "input_clobbered" or "donation_mismatch") is judged by the
buffers instead: each input the module does not donate must hold the same bits after the
run and not be consumed; each donated input (DONATED) must be consumed, and the outputs
must equal those of the module without its donation (module_undonated.mlir). A finding
made under an injected runtime fault (RUNTIME_FAULT, xla-sentinel's tests) replays it
after the run, as the finding's worker did; --without-plugins leaves it out too.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FAILURE = {failure!r}  # "wrong_result", or the compiler failure: "crash", "hang", "compile_error"
HANG_SECONDS = {hang_seconds}  # a hang: the compile and run of this small module takes seconds when fixed
PARTITIONS = {partitions}  # devices the module is partitioned over (mhlo.num_partitions)
OPTIONS = {options}
PLUGINS = {plugins}
INPUT_DTYPES = {input_dtypes}
# Per output: element type and the largest legal normwise error against float64
# (k * max(error of a legal configuration, unit roundoff), the xla-sentinel oracle's rule),
# or "bitwise": a result IEEE 754 fixes exactly, compared value for value with expected.npz.
OUTPUTS = {outputs}
# The invariant the finding broke, numbered in this module's outputs and arguments; None:
# the outputs are judged by their numbers.
INVARIANT = {invariant}
# A buffer finding: the parameters the module donates, and the injected runtime fault the
# finding was made under (None: XLA's own doing).
DONATED = {donated}
RUNTIME_FAULT = {runtime_fault}
BUFFER_FAILURES = ("input_clobbered", "donation_mismatch")
{invariant_checker}


def parse_value(text):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {{"true": True, "false": False}}.get(text.lower(), text)


def classes(a):
    a = np.asarray(a, np.float64)
    return np.select([np.isnan(a), np.isposinf(a), np.isneginf(a)], [1, 2, 3], 0)


def normwise(actual, expected):
    a, r = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    mask = np.isfinite(a) & np.isfinite(r)
    if not mask.any():
        return 0.0
    return float(np.linalg.norm(a[mask] - r[mask]) / max(np.linalg.norm(r[mask]), 1e-300))


def same_values(actual, expected, tiny):
    """Equal as numbers: NaN equals NaN, -0 equals +0, a subnormal equals zero."""
    a, r = (np.asarray(v, np.float64) for v in (actual, expected))
    a, r = (np.where(np.abs(v) < tiny, 0.0, v) for v in (a, r))
    return (a == r) | (np.isnan(a) & np.isnan(r))


def broken_invariant(outputs, expected, legal, inputs):
    """What breaks INVARIANT in `outputs` ([] if it holds): the legal configuration's
    non-finite elements are excused and its own miss widens the bound, as in xla-sentinel."""
    inv = Invariant.from_json(dict(INVARIANT))
    i = inv.output
    out = np.asarray(outputs[i])
    if out.shape != np.shape(expected[i]):
        return [f"output {{i}}: shape {{list(out.shape)}}, expected {{list(np.shape(expected[i]))}}"]
    v = check_beside_legal(inv, [np.asarray(o) for o in outputs], expected, OUTPUTS[i]["dtype"], legal,
                           inputs=inputs)
    if v is None:
        print(f"output {{i}}: invariant {{inv.kind}} ({{inv.source}}) holds")
        return []
    worst = v.worst[0]
    return [f"output {{i}} ({{OUTPUTS[i]['dtype']}}): invariant {{inv.kind}} ({{inv.source}}) broken in "
            f"{{v.count}} rows or elements; worst {{worst}}"]


def replay_fault(fault, inputs, bufs, outs):
    """RUNTIME_FAULT, as xla-sentinel's worker injects it after the run (xla/buffers.py):
    input_alias writes output 0's leading bytes over the first element of the first
    non-donated input."""
    if fault != "input_alias" or not outs:
        return
    import ctypes

    out = np.ascontiguousarray(np.asarray(outs[0])).tobytes()
    for i, (x, b) in enumerate(zip(inputs, bufs)):
        if i in DONATED or not x.size or b.is_deleted():
            continue
        data = bytearray(np.ascontiguousarray(x).tobytes())
        k = min(x.itemsize, len(out), len(data))
        data[:k] = out[:k]
        if bytes(data) == np.ascontiguousarray(x).tobytes():
            data[0] ^= 1
        ctypes.memmove(b.unsafe_buffer_pointer(), bytes(data), len(data))
        return


def broken_buffers(exe, device, inputs, options, fault):
    """What the run does to buffers it must not touch ([] if nothing)."""
    import jax
    from jax._src import compiler, xla_bridge
    from jax._src.lib import xla_client

    bufs = [jax.device_put(np.array(x, copy=True), device) for x in inputs]
    # donation_ignored: the run consumes copies of the donated inputs, which stay alive.
    run = [jax.device_put(np.array(x, copy=True), device) if fault == "donation_ignored" and i in DONATED
           else b for i, (x, b) in enumerate(zip(inputs, bufs))]
    outs = [o[0] for o in exe.execute_sharded(run).disassemble_into_single_device_arrays()]
    replay_fault(fault, inputs, bufs, outs)
    wrong = []
    for i, (x, b) in enumerate(zip(inputs, bufs)):
        if i in DONATED:
            if not b.is_deleted():
                wrong.append(f"input {{i}} is donated and was not consumed by the run")
            continue
        if b.is_deleted():
            wrong.append(f"input {{i}} is not donated and was consumed by the run")
            continue
        after = np.asarray(b)
        if np.ascontiguousarray(after).tobytes() != np.ascontiguousarray(x).tobytes():
            n = int(np.count_nonzero(np.frombuffer(np.ascontiguousarray(after).tobytes(), np.uint8)
                                     != np.frombuffer(np.ascontiguousarray(x).tobytes(), np.uint8)))
            wrong.append(f"input {{i}} is not donated and the run changed it ({{n}} bytes differ)")
    if FAILURE == "donation_mismatch" and DONATED:
        # The same module without its donation must give the same bits.
        plain = xla_bridge.get_backend("cpu").compile_and_load(
            (HERE / "module_undonated.mlir").read_text(), xla_client.DeviceList((device,)),
            compiler.get_compile_options(num_replicas=1, num_partitions=1, env_options_overrides=options))
        again = [np.asarray(o[0]) for o in plain.execute_sharded(
            [jax.device_put(np.array(x, copy=True), device) for x in inputs]).disassemble_into_single_device_arrays()]
        for i, (a, b) in enumerate(zip(outs, again)):
            if np.ascontiguousarray(np.asarray(a)).tobytes() != np.ascontiguousarray(b).tobytes():
                wrong.append(f"output {{i}} differs from the module's without donation")
    return wrong


def host_devices():
    """XLA_FLAGS with PARTITIONS virtual CPU devices: read once, when jax first
    initializes its CPU client, so it is set before jax is imported."""
    flags = os.environ.get("XLA_FLAGS", "")
    if PARTITIONS > 1 and "--xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{{flags}} --xla_force_host_platform_device_count={{PARTITIONS}}".strip()


def run_partitioned(exe, devices, inputs, shapes):
    """Run an SPMD executable: each input placed on the devices as its parameter sharding
    says, each output of global shape `shapes[i]` put together from its shards, tile by
    tile as the devices hold them. XLA gives each device ceil(n / w) of a dimension of n
    cut in w tiles (the last ones padded): inputs are padded to that multiple, outputs cut
    back to n; a device that returns a short tile (an XLA bug) makes an output of another
    shape, which the check below reports."""
    import jax
    from jax._src.op_shardings import get_num_ways_dim_sharded
    from jax._src.sharding_impls import GSPMDSharding

    def tiling(s, shape):
        sharding = GSPMDSharding(devices, s)
        ways = list(get_num_ways_dim_sharded(sharding._to_xla_hlo_sharding(len(shape)))[0])
        ways = ways or [1] * len(shape)
        return sharding, ways, tuple(-(-n // w) * w for n, w in zip(shape, ways))

    bufs = []
    for x, s in zip(inputs, exe.get_parameter_shardings()):
        sharding, _, padded = tiling(s, x.shape)
        if padded != x.shape:  # np.pad refuses the empty padding of a scalar
            x = np.pad(x, [(0, p - n) for n, p in zip(x.shape, padded)])
        bufs.append(jax.device_put(x, sharding))
    shards = exe.execute_sharded(bufs).disassemble_into_single_device_arrays()
    outputs = []
    for per_device, s, shape in zip(shards, exe.get_output_shardings(), shapes):
        if not shape:
            outputs.append(np.asarray(per_device[0]))
            continue
        sharding, ways, padded = tiling(s, shape)
        where = sharding.devices_indices_map(padded)
        tiles = {{}}
        for shard in per_device:
            at = tuple((sl.start or 0) // (p // w) for sl, p, w in zip(where[shard.device], padded, ways))
            tiles.setdefault(at, np.asarray(shard))

        def block(prefix):
            if len(prefix) == len(shape):
                return tiles[prefix]
            return [block(prefix + (k,)) for k in range(ways[len(prefix)])]

        outputs.append(np.block(block(()))[tuple(slice(0, n) for n in shape)])
    return outputs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--without-plugins", action="store_true")
    parser.add_argument("--xla-option", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if FAILURE not in ("wrong_result", *BUFFER_FAILURES) and not args.child:
        # The compile may take the process down: run it in a child and judge its exit.
        import subprocess

        try:
            child = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child",
                                    *sys.argv[1:]], capture_output=True, text=True,
                                   timeout=HANG_SECONDS if FAILURE == "hang" else None)
        except subprocess.TimeoutExpired:
            print(f"BUG: compiling and running the module did not finish in {{HANG_SECONDS}} s (hang)")
            return 1
        print(child.stdout.strip())
        if child.returncode != 0:
            tail = (child.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"BUG: compiling and running the module failed (exit {{child.returncode}}): {{tail}}")
            return 1
        print("OK: the module compiles and runs")
        return 0
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    host_devices()
    import jax
    import jax.extend
    import jax.numpy as jnp
    from jax._src import compiler, xla_bridge
    from jax._src.lib import xla_client

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    options = dict(OPTIONS)
    for item in args.xla_option:
        name, _, value = item.partition("=")
        options[name] = parse_value(value)
    if PLUGINS and not args.without_plugins:
        for i, ref in enumerate(PLUGINS):
            path, _, func = ref.partition(":")
            spec = importlib.util.spec_from_file_location(f"plugin_{{i}}", HERE / path)
            plugin = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(plugin)
            jax.extend.xla.register_hlo_module_transformation(
                getattr(plugin, func or "transform"), name=f"repro_plugin_{{i}}", platforms="cpu",
                stage=jax.extend.xla.PipelineStage.PRE_SCHEDULER)
        jax.clear_caches()
    with np.load(HERE / "inputs.npz") as z:
        inputs = [z[f"arg{{i}}"].view(jnp.bfloat16) if d == "bf16" else z[f"arg{{i}}"]
                  for i, d in enumerate(INPUT_DTYPES)]
    with np.load(HERE / "expected.npz") as z:
        expected = [z[f"arg{{i}}"] for i in range(len(OUTPUTS))]
    backend = xla_bridge.get_backend("cpu")
    devices = tuple(backend.local_devices()[:PARTITIONS])
    if len(devices) < PARTITIONS:
        raise RuntimeError(f"the module is partitioned over {{PARTITIONS}} devices, jax has "
                           f"{{len(devices)}} (XLA_FLAGS sets another device count)")
    compile_options = compiler.get_compile_options(num_replicas=1, num_partitions=PARTITIONS,
                                                   env_options_overrides=options)
    exe = backend.compile_and_load((HERE / "module.mlir").read_text(),
                                   xla_client.DeviceList(devices), compile_options)
    if PARTITIONS > 1:
        outputs = run_partitioned(exe, devices, inputs, [e.shape for e in expected])
    else:
        result = exe.execute_sharded([jax.device_put(x, devices[0]) for x in inputs])
        outputs = [np.asarray(o[0]) for o in result.disassemble_into_single_device_arrays()]
    if args.child:
        return 0
    if FAILURE in BUFFER_FAILURES:
        wrong = broken_buffers(exe, devices[0], inputs, options, None if args.without_plugins else RUNTIME_FAULT)
        print(f"jax {{jax.__version__}}, options {{options}}, donated inputs {{DONATED}}, runtime fault "
              f"{{'off' if args.without_plugins else RUNTIME_FAULT}}")
        return verdict(wrong, "OK: every buffer the run must not touch is as it was")
    wrong = []
    if INVARIANT is not None:
        with np.load(HERE / "legal.npz") as z:
            legal = [z[f"arg{{i}}"] for i in range(len(OUTPUTS))]
        wrong = broken_invariant(outputs, expected, legal, inputs)
    # An invariant finding is judged by its invariant alone (above), not output by output.
    judged = [] if INVARIANT is not None else list(zip(outputs, expected, OUTPUTS))
    for i, (out, ref, spec) in enumerate(judged):
        if out.shape != ref.shape:
            wrong.append(f"output {{i}}: shape {{list(out.shape)}}, expected {{list(ref.shape)}}")
            continue
        if spec.get("bitwise"):
            tiny = float(jnp.finfo(out.dtype).tiny) if spec["float"] else 0.0
            bad = int(np.count_nonzero(~same_values(out, ref, tiny)))
            if bad:
                wrong.append(f"output {{i}} ({{spec['dtype']}}): {{bad}} of {{out.size}} elements differ "
                             f"from the result IEEE 754 fixes exactly")
            continue
        if not spec["float"]:
            bad = int(np.count_nonzero(np.asarray(out) != np.asarray(ref)))
            if bad:
                wrong.append(f"output {{i}}: {{bad}} of {{out.size}} integer elements differ")
            continue
        flips = int(np.count_nonzero(classes(out) != classes(np.asarray(ref).astype(out.dtype))))
        if flips:
            wrong.append(f"output {{i}}: {{flips}} elements NaN/Inf where float64 says otherwise")
        err = normwise(out, ref)
        if err > spec["threshold"]:
            wrong.append(f"output {{i}} ({{spec['dtype']}}): normwise error {{err:.3g}} against "
                         f"float64, legal at most {{spec['threshold']:.3g}}")
    print(f"jax {{jax.__version__}}, options {{options}}, plugins "
          f"{{'off' if args.without_plugins else PLUGINS or 'none'}}")
    return verdict(wrong, "OK: outputs agree with the expected results")


def verdict(wrong, ok):
    """Exit 1 naming what is wrong (the bug shows), else 0 with `ok`."""
    if wrong:
        print("BUG: " + "; ".join(wrong))
        return 1
    print(ok)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # the harness failed: neither "bug shows" (1) nor "fixed" (0)
        print(f"ERROR: {{type(e).__name__}}: {{e}}")
        sys.exit(2)
'''


def render(finding_id: str, failure: str, options: dict[str, Any], plugins: list[str],
           input_dtypes: list[str], outputs: list[dict[str, Any]], partitions: int = 1,
           invariant: dict[str, Any] | None = None, donated: list[int] | None = None,
           runtime_fault: str | None = None) -> str:
    """repro.py with the finding's constants filled in (as Python literals); `partitions`
    is the module's mhlo.num_partitions (targets.partitions); `invariant` the declaration
    (invariants.Invariant.to_json, numbered in the module) an invariant finding broke,
    judged by the checkers of judge/invariants.py copied in (standalone_source). A buffer
    finding (`failure` one of BUFFER_FAILURES) gives `donated`, the module's donated
    parameters, and `runtime_fault`, the injected runtime fault it was made under."""
    checker = ""
    if invariant is not None:
        checker = ("\n# --- the invariant's declaration and checkers (xla_sentinel/judge/invariants.py) ---\n"
                   + invariants.standalone_source() + "\n# --- end of the checkers ---\n")
    return TEMPLATE.format(finding_id=finding_id, failure=failure, partitions=int(partitions),
                           invariant=repr(invariant), invariant_checker=checker,
                           donated=repr(list(donated or [])), runtime_fault=repr(runtime_fault),
                           hang_seconds=HANG_SECONDS,
                           options=repr(options),
                           plugins=repr(plugins),
                           input_dtypes=repr(input_dtypes),
                           outputs=repr(outputs))
