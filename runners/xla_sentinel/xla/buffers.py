"""Buffer checks around one execution of a target's executable (docs/detection.md, "Buffer
corruption"), in the worker that runs it.

A compiled program that writes where it must not leaves its own outputs right as often as
not: an in-place update that lands in a caller's buffer, a buffer reused while an earlier
result still lives in it. The oracle, which reads outputs only, cannot see that. So around
each execution of a target (worker/handlers.py `run`) this module checks what the caller
owns:

- every input that is not donated is bit-identical after the run to what was passed in
  (`input_clobbered`; a non-donated input that the run consumed is one too);
- every live result of earlier executions in this process (a few are kept alive, each with
  a digest taken when it was made) is unchanged (`result_clobbered`);
- a donated input was really consumed (`is_deleted()`), and the module gives the same bits
  without its donation (`donation_mismatch`; `donation_check` in the handler);
- the same executable run again on fresh copies of the inputs gives the same bits, and, on a
  sample of programs (`CONCURRENT_EVERY`), so does a run beside the previous executable of
  this process in another thread (`nondeterministic`).

Each problem is a dict (the verdict's evidence): `verdict`, `buffer` (which one), and where
elements differ `count`, `elements` (up to `MAX_ELEMENTS` flat indices with `before` and
`after` values). A partitioned (SPMD) executable gets the rerun check only: its inputs and
results are spread over devices, which this module does not read back one by one.

`XLA_SENTINEL_BUFFER_CHECKS=0` turns the checks off in a worker (bench/throughput.py
measures the two in one run); `XLA_SENTINEL_BUFFER_FAULT` injects a runtime fault for the
tests (`RUNTIME_FAULTS`): no XLA pass can make XLA:CPU write into a caller's buffer (its
buffer assignment copies a non-donated parameter before any in-place use, even with the
protective copy removed after fusion), so the fault is a write into the buffer after the
executable ran, as an aliasing bug in the runtime or buffer assignment would leave it.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xla_sentinel.core import cpu_account
from xla_sentinel.xla import plugins

# Flat indices listed per differing buffer in the evidence.
MAX_ELEMENTS = 8
# Earlier results kept alive per process, and the largest one kept (bytes): the check reads
# each of them after every execution.
LIVE_RESULTS = 4
LIVE_RESULT_BYTES = 1 << 18
# One program in CONCURRENT_EVERY (by a hash of its module) also runs beside the previous
# executable of this process; a thread start and a second executable's run per program,
# sampled to keep campaigns' throughput (docs/detection.md, "Buffer corruption").
CONCURRENT_EVERY = 8
CHECKS_ENV = "XLA_SENTINEL_BUFFER_CHECKS"
FAULT_ENV = "XLA_SENTINEL_BUFFER_FAULT"
# Injected runtime faults (tests only): each writes where the executable must not, after it
# ran. input_alias: output 0's leading bytes over the first element of the first non-donated
# input (as if that input had been aliased to it); result_reuse: output 0's bytes over the
# oldest live result (as if its buffer had been reused);
# donation_ignored: donated inputs are passed as copies, so none is consumed.
RUNTIME_FAULTS = ("input_alias", "result_reuse", "donation_ignored")

# Donation as StableHLO says it on @main's arguments (jax's donate_argnums lowers to these).
_DONATION_ATTR = re.compile(r"(,\s*)?(tf\.aliasing_output\s*=\s*\d+\s*:\s*i32|jax\.buffer_donor\s*=\s*true)(\s*,\s*)?")
_MAIN = re.compile(r"func\.func\s+(?:public\s+)?@main\s*\(")
# Entries of an HLO module header's configs: input_output_alias `{1}: (0, {}, may-alias)`
# (output index: parameter, its index, kind), buffer_donor `(1, {})`.
_ALIAS_PARAM = re.compile(r"\}\s*:\s*\((\d+)\s*,")
_DONOR_PARAM = re.compile(r"\((\d+)\s*,")


def enabled() -> bool:
    return os.environ.get(CHECKS_ENV, "1") != "0"


def injected_fault() -> str | None:
    fault = os.environ.get(FAULT_ENV) or None
    if fault is not None and fault not in RUNTIME_FAULTS:
        raise ValueError(f"{FAULT_ENV}={fault!r}: not a runtime fault; known: {', '.join(RUNTIME_FAULTS)}")
    return fault


def _main_args(module: str) -> tuple[int, int] | None:
    """The span of @main's argument list in module text, or None."""
    m = _MAIN.search(module)
    if m is None:
        return None
    depth, i = 1, m.end()
    while depth and i < len(module):
        depth += {"(": 1, ")": -1}.get(module[i], 0)
        i += 1
    return m.end(), i - 1


def _split_args(args: str) -> list[str]:
    """@main's argument list cut at its top-level commas (attributes hold commas too)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(args):
        if c in "({[<":
            depth += 1
        elif c in ")}]>":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(args[start:i])
            start = i + 1
    parts.append(args[start:])
    return [p for p in parts if p.strip()]


def donated_args(module: str | bytes) -> list[int]:
    """The parameters of @main the module donates (`tf.aliasing_output`, `jax.buffer_donor`)."""
    if not isinstance(module, str):
        return []
    span = _main_args(module)
    if span is None:
        return []
    return [i for i, a in enumerate(_split_args(module[span[0]:span[1]])) if _DONATION_ATTR.search(a)]


def _params(header: str, key: str, entry: re.Pattern[str]) -> set[int]:
    """The parameter numbers of one config (`key={ ... }`) in an HLO module's header."""
    start = header.find(f"{key}={{")
    if start < 0:
        return set()
    depth, i = 0, start + len(key) + 1
    while i < len(header):
        depth += {"{": 1, "}": -1}.get(header[i], 0)
        i += 1
        if depth == 0:
            break
    return {int(p) for p in entry.findall(header[start:i])}


def kept_donation(exe: Any) -> set[int]:
    """The parameters the compiled module donates: its input_output_alias and buffer_donor
    configs, read from the header of its HLO text."""
    header = exe.hlo_modules()[0].to_string().split("\n", 1)[0]
    return _params(header, "input_output_alias", _ALIAS_PARAM) | _params(header, "buffer_donor", _DONOR_PARAM)


def without_donation(module: str) -> str:
    """The module with every donation attribute of @main's arguments removed."""
    span = _main_args(module)
    if span is None:
        return module

    def strip(arg: str) -> str:
        arg = _DONATION_ATTR.sub(lambda m: ", " if m.group(1) and m.group(3) else "", arg)
        return re.sub(r"\s*\{\s*\}", "", arg)

    args = ",".join(strip(a) for a in _split_args(module[span[0]:span[1]]))
    return module[:span[0]] + args + module[span[1]:]


def _bits(x: np.ndarray) -> bytes:
    return np.ascontiguousarray(x).tobytes()


def digest(x: np.ndarray) -> str:
    return hashlib.blake2b(_bits(x), digest_size=16).hexdigest()


def _scalar(v: Any) -> Any:
    v = np.asarray(v)
    if v.dtype.kind == "f" or v.dtype.name == "bfloat16":
        f = float(v)
        # A NaN or infinity with its bits: two NaNs that differ differ there.
        return f if np.isfinite(f) else f"{f!r} (0x{_bits(v)[::-1].hex()})"
    return v.item()


def _both_nan(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Per flat element: NaN in both (floats; False elsewhere)."""
    if before.dtype.kind in "fc" or before.dtype.name == "bfloat16":
        with np.errstate(invalid="ignore"):
            return (np.isnan(before.astype(np.complex128 if before.dtype.kind == "c" else np.float64))
                    & np.isnan(after.astype(np.complex128 if after.dtype.kind == "c" else np.float64))).reshape(-1)
    return np.zeros(before.size, bool)


def differing(before: np.ndarray, after: np.ndarray, nan_equal: bool = False) -> dict[str, Any]:
    """Which elements of a buffer changed bits: count and the first few, before and after.
    `nan_equal`: a NaN against a NaN of other sign or payload is no change."""
    before, after = np.asarray(before), np.asarray(after)
    if before.shape != after.shape or before.dtype != after.dtype:
        return {"count": int(before.size), "elements": [],
                "before_shape": list(before.shape), "after_shape": list(after.shape)}
    width = before.dtype.itemsize
    view = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}.get(width)
    if view is None:  # complex or other widths: compare by bytes per element
        b = np.ascontiguousarray(before).view(np.uint8).reshape(before.size, -1)
        a = np.ascontiguousarray(after).view(np.uint8).reshape(after.size, -1)
        changed = np.flatnonzero((a != b).any(axis=1))
    else:
        changed = np.flatnonzero(np.ascontiguousarray(before).reshape(-1).view(view)
                                 != np.ascontiguousarray(after).reshape(-1).view(view))
    if nan_equal and changed.size:
        changed = changed[~_both_nan(before, after)[changed]]
    flat_b, flat_a = before.reshape(-1), after.reshape(-1)
    return {"count": int(changed.size),
            "elements": [{"index": int(i), "before": _scalar(flat_b[i]), "after": _scalar(flat_a[i])}
                         for i in changed[:MAX_ELEMENTS]]}


@dataclass(eq=False)  # kept and removed by identity (its fields are arrays)
class _Live:
    """A result of an earlier execution kept alive: its device array, a host copy (the
    evidence's `before`) and the digest taken when it was made."""

    array: Any
    copy: np.ndarray
    digest: str
    made_by: str  # module fingerprint and output number


@dataclass
class _Previous:
    """The last executable this process checked, with its inputs and the bits it gave:
    the partner of a concurrent run."""

    exe: Any
    inputs: list[np.ndarray]
    outputs: list[bytes]
    name: str


@dataclass
class _State:
    live: deque[_Live] = field(default_factory=lambda: deque(maxlen=LIVE_RESULTS))
    previous: _Previous | None = None


_state = _State()
_lock = threading.Lock()


def fingerprint(module: str | bytes) -> str:
    data = module.encode() if isinstance(module, str) else module
    return f"{zlib.crc32(data):08x}"


def _place(exe: Any, inputs: list[np.ndarray]) -> list[Any]:
    """Fresh device buffers for the inputs: copies, so that the host arrays stay the
    'before' even where the CPU client would share their memory."""
    import jax

    device = exe.local_devices()[0]
    return [jax.device_put(np.array(x, copy=True), device) for x in inputs]


def _run(exe: Any, bufs: list[Any]) -> list[Any]:
    return [o[0] for o in exe.execute_sharded(bufs).disassemble_into_single_device_arrays()]


def _host(arrays: list[Any]) -> list[np.ndarray]:
    return [np.array(a, copy=True) for a in arrays]


def _write(array: Any, data: bytes) -> None:
    """Overwrite a CPU device buffer in place (injected faults only)."""
    import ctypes

    ctypes.memmove(array.unsafe_buffer_pointer(), data, len(data))


def _over(old: np.ndarray, new: bytes, limit: int) -> bytes:
    """`old`'s bytes with up to `limit` leading bytes taken from `new`, changed in one bit
    at least (a fault that writes the same bits would be no fault)."""
    data = bytearray(_bits(old))
    k = min(limit, len(new), len(data))
    data[:k] = new[:k]
    if bytes(data) == _bits(old):
        data[0] ^= 1
    return bytes(data)


def _inject(fault: str | None, inputs: list[np.ndarray], bufs: list[Any], donated: set[int],
            outs: list[Any]) -> None:
    out = _bits(np.asarray(outs[0])) if outs else b""
    if fault == "input_alias":
        # Output 0's leading bytes over the first element of the first non-donated input.
        for i, (x, b) in enumerate(zip(inputs, bufs, strict=True)):
            if i not in donated and x.size and not b.is_deleted():
                _write(b, _over(x, out, x.itemsize))
                return
    if fault == "result_reuse":
        # Output 0's bytes over the oldest live result, as far as both reach.
        for live in _state.live:
            _write(live.array, _over(live.copy, out, live.copy.nbytes))
            return


def execute_checked(exe: Any, inputs: list[np.ndarray], module: str | bytes,
                    concurrent: bool | None = None) -> tuple[list[np.ndarray], list[dict[str, Any]]]:
    """Run a single-device executable once with the buffer checks: its outputs and the
    problems found (empty when none). `module`: its text, "" when it could not be read."""
    fault = injected_fault()
    donated = set(donated_args(module))
    if donated and plugins.registered():
        # A donation the plugin boundary dropped is no run's fault: the input is checked
        # as one the module does not donate (plugins.registered says why).
        donated &= kept_donation(exe)
    name = fingerprint(module)
    bufs = _place(exe, inputs)
    # donation_ignored: the run consumes copies of the donated inputs, so the buffers the
    # check reads stay alive, as if the runtime had ignored the donation.
    run_bufs = [_place(exe, [inputs[i]])[0] if fault == "donation_ignored" and i in donated else b
                for i, b in enumerate(bufs)]
    with _lock:  # one checked execution at a time per process: the live results are shared
        outs = _run(exe, run_bufs)
        _inject(fault, inputs, bufs, donated, outs)
        with cpu_account.stage(cpu_account.BUFFER_CHECKS):  # the rest is the checks' cost
            problems = _check_inputs(inputs, bufs, donated, known=bool(module)) + _check_live(name)
            outputs = _host(outs)
            problems += _rerun(exe, inputs, outputs)
            if concurrent is None:
                concurrent = zlib.crc32(name.encode()) % CONCURRENT_EVERY == 0
            if concurrent and _state.previous is not None:
                problems += _concurrent(exe, inputs, outputs, name)
            _keep(outs, outputs, name)
            _state.previous = _Previous(exe, [np.array(x, copy=True) for x in inputs],
                                        [_bits(o) for o in outputs], name)
    return outputs, problems


def _check_inputs(inputs: list[np.ndarray], bufs: list[Any], donated: set[int],
                  known: bool = True) -> list[dict[str, Any]]:
    problems: list[dict[str, Any]] = []
    for i, (x, b) in enumerate(zip(inputs, bufs, strict=True)):
        if i in donated:
            if not b.is_deleted():
                problems.append({"verdict": "donation_mismatch", "buffer": f"input {i}",
                                 "reason": "donated input not consumed: is_deleted() is false after the run"})
            continue
        if b.is_deleted():
            if not known:  # a module whose text could not be read: its donation is unknown
                continue
            problems.append({"verdict": "input_clobbered", "buffer": f"input {i}",
                             "reason": "an input the module does not donate was consumed by the run"})
            continue
        after = np.asarray(b)
        if _bits(after) != _bits(x):
            problems.append({"verdict": "input_clobbered", "buffer": f"input {i}",
                             "dtype": str(x.dtype), "shape": list(x.shape), **differing(x, after)})
    return problems


def _check_live(name: str) -> list[dict[str, Any]]:
    problems: list[dict[str, Any]] = []
    for live in list(_state.live):
        if live.array.is_deleted():
            problems.append({"verdict": "result_clobbered", "buffer": f"live result {live.made_by}",
                             "reason": "a live result of an earlier execution was deleted by this one"})
            _state.live.remove(live)
            continue
        now = np.asarray(live.array)
        if digest(now) != live.digest:
            problems.append({"verdict": "result_clobbered", "buffer": f"live result {live.made_by}",
                             "dtype": str(live.copy.dtype), "shape": list(live.copy.shape),
                             "overwritten_by": name, **differing(live.copy, now)})
            # Checked once: it is the evidence now, not a buffer to watch.
            _state.live.remove(live)
    return problems


def _rerun(exe: Any, inputs: list[np.ndarray], first: list[np.ndarray]) -> list[dict[str, Any]]:
    """The same executable on fresh copies of the inputs must give the same bits."""
    return compare(first, _host(_run(exe, _place(exe, inputs))), "nondeterministic",
                   "rerun of the same executable")


def _concurrent(exe: Any, inputs: list[np.ndarray], first: list[np.ndarray], name: str) -> list[dict[str, Any]]:
    """This executable and the previous one of this process, at once in two threads: each
    must give the bits it gave alone."""
    prev = _state.previous
    assert prev is not None
    mine: list[list[np.ndarray]] = []
    theirs: list[list[np.ndarray]] = []
    errors: list[BaseException] = []

    def other() -> None:
        try:
            theirs.append(_host(_run(prev.exe, _place(prev.exe, prev.inputs))))
        except BaseException as e:  # reported below: the harness, not the program
            errors.append(e)

    thread = threading.Thread(target=other, name="buffers-concurrent")
    thread.start()
    mine.append(_host(_run(exe, _place(exe, inputs))))
    thread.join()
    if errors:
        raise errors[0]
    problems = compare(first, mine[0], "nondeterministic", f"run concurrently with executable {prev.name}")
    problems += [{"verdict": "nondeterministic", "buffer": f"output {k} of executable {prev.name}",
                  "reason": f"run concurrently with this executable ({name})",
                  "count": -1, "elements": []}
                 for k, (a, b) in enumerate(zip(prev.outputs, theirs[0], strict=True)) if a != _bits(b)]
    return problems


def _keep(outs: list[Any], outputs: list[np.ndarray], name: str) -> None:
    for k, (arr, host) in enumerate(zip(outs, outputs, strict=True)):
        if 0 < host.nbytes <= LIVE_RESULT_BYTES:
            _state.live.append(_Live(arr, host, digest(host), f"{name}:{k}"))


def reset() -> None:
    """Forget the live results and the previous executable (tests)."""
    with _lock:
        _state.live.clear()
        _state.previous = None


def compare(first: list[np.ndarray], second: list[np.ndarray], verdict: str, reason: str,
            nan_equal: bool = False) -> list[dict[str, Any]]:
    """A problem per output whose bits differ between two runs that must agree.

    `nan_equal` for two compiles (with and without donation): arithmetic leaves a NaN's sign
    and payload open (IEEE 754), and another compile may choose others (s28-i38 under
    no_fusion_emitters: one NaN of 48 came back with other bits). One executable run twice
    must give the same bits, NaNs included."""
    problems = []
    for k, (a, b) in enumerate(zip(first, second, strict=True)):
        if _bits(a) != _bits(b):
            d = differing(a, b, nan_equal)
            if d["count"]:
                problems.append({"verdict": verdict, "buffer": f"output {k}", "reason": reason, **d})
    return problems
