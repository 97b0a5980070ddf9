"""Compile and run a StableHLO module under per-compile XLA options, in this process.

Runs inside worker processes (imports jax): the coordinator's record of a configuration
is judge/targets.py. Modules are compiled from StableHLO text (or MLIR bytecode), so
generated programs and replayed traces take the same path; an SPMD module is compiled
over as many devices as it is partitioned over, its inputs placed and its outputs put
together as its shardings say.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from xla_sentinel.core import cpu_account
from xla_sentinel.core.anomalies import AnomalyLine, find_anomalies
from xla_sentinel.core.stablehlo import partitions as text_partitions
from xla_sentinel.xla import buffers, hlo_proto, plugins


def backend(platform: str) -> Any:
    """The jax backend of a platform; RuntimeError when this machine has none."""
    from jax._src import xla_bridge
    return xla_bridge.get_backend(platform)


def module_text(module: str | bytes) -> str:
    """StableHLO text of a module given as text or MLIR bytecode."""
    if isinstance(module, str):
        return module
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir
    with mlir.make_ir_context():
        return str(ir.Module.parse(module))


def text_or_empty(module: str | bytes) -> str:
    """Module text for reading attributes (the buffer checks' donation), "" for bytes MLIR
    cannot parse here (a portable artifact of another StableHLO version)."""
    try:
        return module_text(module)
    except Exception:  # MLIR raises its own error types; nothing to read then
        return ""


def verify_module(module: str) -> None:
    """Parse and verify StableHLO text; MLIR's own error when it does not verify."""
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    with mlir.make_ir_context():
        ir.Module.parse(module).operation.verify()


def partitions(module: str | bytes) -> int:
    """How many devices an SPMD module is partitioned over (`mhlo.num_partitions`), 1 if
    it does not say."""
    return text_partitions(module_text(module))


def _devices(backend: Any, n: int) -> list[Any]:
    devices: list[Any] = backend.local_devices()
    if len(devices) < n:
        raise RuntimeError(f"the module is partitioned over {n} devices, this process has "
                           f"{len(devices)} (XLA_FLAGS=--xla_force_host_platform_device_count={n})")
    return devices[:n]


def compile_module(module: str | bytes, options: dict[str, Any], platform: str = "cpu") -> Any:
    """Compile StableHLO text (or MLIR bytecode) with per-compile XLA options, over as
    many devices as the module is partitioned over."""
    from jax._src import compiler
    from jaxlib import xla_client as xc
    client = backend(platform)
    n = partitions(module)
    opts = compiler.get_compile_options(num_replicas=1, num_partitions=n,
                                        env_options_overrides=dict(options))
    plugins.take_failure()  # an earlier compile's plugin failure is that compile's
    try:
        if hasattr(client, "compile_and_load"):
            exe = client.compile_and_load(module, xc.DeviceList(tuple(_devices(client, n))), opts)
        else:  # jaxlib before 0.6 (a target of another jaxlib): compile loads
            exe = client.compile(module, opts)
        return Partitioned(exe, result_shapes(module)) if n > 1 else exe
    except Exception:
        # XLA reports a failed injected plugin as its own INTERNAL error: say whose it was.
        failure = plugins.take_failure()
        if failure:
            raise plugins.PluginError(failure) from None
        raise


@dataclass
class CompileLog:
    """What the process wrote to fd 2 (XLA's log) while a compile ran; set when it ends."""

    text: str = ""


# fd 2 belongs to the whole process, so one compile at a time reads or moves it. A worker
# serves one request at a time (server.serve) and a DeviceOwner queues the requests of the
# targets it serves (client.DeviceOwner._exchange), so compiles never overlap there today;
# the lock keeps each compile's log its own, and fd 2 restored, if two threads ever compile.
_FD2 = threading.Lock()
# Read back from a log file at most this much per compile (a dump flag can log megabytes).
LOG_BYTES = 1 << 20


@contextmanager
def compile_log() -> Iterator[CompileLog]:
    """XLA's log (fd 2) while the block runs, into the CompileLog it yields.

    Where fd 2 is a file (the worker's log) it is read back from there and never moved, so a
    compile that kills the process leaves its last words in the log, which is where the
    crash's evidence comes from (client.WorkerDied.log_tail). Elsewhere (a pipe or terminal:
    `check` without logs) fd 2 goes to a temporary file for the block, and what it caught is
    written on to the real fd 2 after it, so nothing is lost from the worker's output."""
    log = CompileLog()
    with _FD2:
        sys.stderr.flush()
        start = _log_file_size()
        if start is not None:
            try:
                yield log
            finally:
                sys.stderr.flush()
                log.text = _appended_since(start)
        else:
            with _fd2_to_temporary_file(log):
                yield log


def _log_file_size() -> int | None:
    """fd 2's size where it is a regular file that /proc lets this process read back."""
    st = os.fstat(2)
    if not stat.S_ISREG(st.st_mode) or not os.path.exists("/proc/self/fd/2"):
        return None
    return st.st_size


def _appended_since(start: int) -> str:
    with open("/proc/self/fd/2", "rb") as f:
        f.seek(start)
        return f.read(LOG_BYTES).decode(errors="replace")


@contextmanager
def _fd2_to_temporary_file(log: CompileLog) -> Iterator[None]:
    with tempfile.TemporaryFile() as tmp:
        real = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(real, 2)
            os.close(real)
            tmp.seek(0)
            data = tmp.read()
            view = memoryview(data)
            while view:
                view = view[os.write(2, view):]
            log.text = data.decode(errors="replace")


def execute(exe: Any, inputs: list[Any]) -> list[Any]:
    import jax
    import numpy as np
    if isinstance(exe, Partitioned):
        return _execute_partitioned(exe, inputs)
    bufs = [jax.device_put(x, exe.local_devices()[0]) for x in inputs]
    outs = exe.execute_sharded(bufs).disassemble_into_single_device_arrays()
    return [np.asarray(o[0]) for o in outs]


def _execute_partitioned(exe: Partitioned, inputs: list[Any]) -> list[Any]:
    """Run an SPMD executable: place each input as its parameter sharding says, and put
    each output together from its shards as its output sharding says.

    XLA splits a dimension of n over w devices as ceil(n / w) per device, the last shards
    padded (a replayed module may shard unevenly; jax's own arrays refuse to): an input
    is padded to that multiple before it is placed, an output put together at the padded
    shape and cut back to n."""
    import jax
    from jax._src.sharding_impls import GSPMDSharding
    devices = tuple(exe.local_devices())
    bufs = []
    for x, s in zip(inputs, exe.get_parameter_shardings(), strict=True):
        sharding = GSPMDSharding(devices, s)
        bufs.append(jax.device_put(pad_to(x, padded_shape(x.shape, sharding)), sharding))
    shards = exe.execute_sharded(bufs).disassemble_into_single_device_arrays()
    return [assemble_shards(i, per_device, GSPMDSharding(devices, s), shape)
            for i, (per_device, s, shape) in enumerate(
                zip(shards, exe.get_output_shardings(), exe.result_shapes, strict=True))]


class ShardLayoutError(RuntimeError):
    """XLA's per-device results of an output do not tile it as its sharding says (an XLA
    failure: what the devices hold cannot be read as one array)."""


def _ways(sharding: Any, rank: int) -> list[int]:
    """How many tiles a sharding cuts each dimension of a rank-`rank` array into."""
    from jax._src.op_shardings import get_num_ways_dim_sharded
    ways, _ = get_num_ways_dim_sharded(sharding._to_xla_hlo_sharding(rank))
    return list(ways) or [1] * rank


def padded_shape(shape: tuple[int, ...], sharding: Any) -> tuple[int, ...]:
    """The shape XLA's per-device tiles add up to: each dimension rounded up to a
    multiple of its tile count."""
    return tuple(-(-n // w) * w for n, w in zip(shape, _ways(sharding, len(shape)), strict=True))


def pad_to(x: Any, shape: tuple[int, ...]) -> Any:
    import numpy as np
    x = np.asarray(x)
    if x.shape == shape:
        return x
    # The padding's content is XLA's to ignore; zeros (False for bool).
    return np.pad(x, [(0, p - n) for n, p in zip(x.shape, shape, strict=True)])


def assemble_shards(i: int, per_device: list[Any], sharding: Any, shape: tuple[int, ...]) -> Any:
    """Output i from its shards, tile by tile, as the devices hold them. Shards of the
    size their sharding gives them make the module's array; shards of another size (an
    XLA bug: s31-i61 returned 13 rows of a 14-row tile) make an array of another shape,
    which the oracle reports as a shape mismatch (oracle.judge) instead of the harness
    failing to place them."""
    import numpy as np
    if not shape:
        return np.asarray(per_device[0])
    padded = padded_shape(shape, sharding)
    ways = _ways(sharding, len(shape))
    where = sharding.devices_indices_map(padded)
    tiles: dict[tuple[int, ...], Any] = {}
    for shard in per_device:
        at = tuple((sl.start or 0) // (p // w)
                   for sl, p, w in zip(where[shard.device], padded, ways, strict=True))
        tiles.setdefault(at, np.asarray(shard))  # replicas of a tile: the first device's

    def block(prefix: tuple[int, ...]) -> Any:
        if len(prefix) == len(shape):
            return tiles[prefix]
        return [block((*prefix, k)) for k in range(ways[len(prefix)])]

    try:
        out = np.block(block(())) if len(tiles) > 1 else tiles[(0,) * len(shape)]
    except ValueError as e:
        got = sorted({tuple(a.shape) for a in tiles.values()})
        raise ShardLayoutError(f"output {i} {list(shape)}: XLA's per-device results {got} do "
                               f"not tile it as its sharding says ({e})") from None
    return out[tuple(slice(0, n) for n in shape)]


def result_shapes(module: str | bytes) -> list[tuple[int, ...]]:
    """The global shapes of the entry function's results (an SPMD executable knows only
    its per-device ones)."""
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir
    with mlir.make_ir_context():
        parsed = ir.Module.parse(module)
        for op in parsed.body.operations:
            if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
                ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
                return [tuple(ir.RankedTensorType(t).shape) for t in ftype.results]
    raise ValueError("the module has no main function")


class Partitioned:
    """An SPMD executable with the global shapes of its results; otherwise the loaded
    executable itself."""

    def __init__(self, exe: Any, result_shapes: list[tuple[int, ...]]) -> None:
        self.exe = exe
        self.result_shapes = result_shapes

    def __getattr__(self, name: str) -> Any:
        return getattr(self.exe, name)


@dataclass
class Execution:
    outputs: list[Any]
    compile_s: float
    run_s: float
    optimized_hlo: str | None = None
    # What the buffer checks found (xla/buffers.py), when asked for: one dict per problem.
    buffers: list[dict[str, Any]] = field(default_factory=list)
    # The lines of XLA's log during the compile that flag an anomaly (core/anomalies.py).
    anomalies: list[AnomalyLine] = field(default_factory=list)


def run_module(module: str | bytes, inputs: list[Any], options: dict[str, Any], platform: str = "cpu",
               want_hlo: bool = False, checked: bool = False) -> Execution:
    """Compile and run a module; `checked`: with the buffer checks of xla/buffers.py (a
    target's run; run_s then includes them)."""
    t0 = time.perf_counter()
    with cpu_account.stage(cpu_account.COMPILE), compile_log() as log:
        exe = compile_module(module, options, platform)
    t1 = time.perf_counter()
    problems: list[dict[str, Any]] = []
    with cpu_account.stage(cpu_account.RUN):
        if checked and not isinstance(exe, Partitioned):
            # As text: donation is read from @main's argument attributes.
            outs, problems = buffers.execute_checked(exe, inputs, text_or_empty(module))
        else:
            outs = execute(exe, inputs)
            if checked:  # an SPMD executable: the rerun check only (buffers.py)
                with cpu_account.stage(cpu_account.BUFFER_CHECKS):
                    problems = buffers.compare(outs, execute(exe, inputs), "nondeterministic",
                                               "rerun of the same executable")
    t2 = time.perf_counter()
    # Full constants: the bisector compiles fusions cut out of this text.
    with cpu_account.stage("hlo_text"):
        text = hlo_proto.full_text(exe.hlo_modules()[0]) if want_hlo else None
    return Execution(outs, t1 - t0, t2 - t1, text, problems, find_anomalies(log.text))
