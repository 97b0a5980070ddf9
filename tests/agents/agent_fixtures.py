"""What the agent tests share: the repository's real reproducers, the snippet that reaches
an injected fault, a scripted model (see conftest.py), and how a tool's reply is read."""

from __future__ import annotations

import contextlib
import inspect
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
REPROS = REPO / "bench" / "repros"
SHIFT = REPROS / "shift_set_then_reshape.py"  # a real XLA:CPU bug, cured by disabling algsimp
# A regression corpus small enough for the suite: one known bug algsimp also cures, two it
# does not (the server's default is every reproducer in bench/repros).
REGRESSION = [str(REPROS / n) for n in ("divide_by_broadcast_reciprocal.py", "reduce_max_drops_nan.py",
                                         "atan2_subnormal_nan.py")]
SERVER = [sys.executable, "-m", "xla_sentinel.cli.entry", "mcp"]

# The reproduce agent's repro.py, written from the report of bench/repros/shift_set_then_reshape.py.
SHIFT_REPRO = '''\
import sys

import jax
import numpy as np

x = np.array([12, -7, -3, -3, 12, 13, 0], np.int32)
got = np.asarray(jax.jit(lambda v: v.at[1:].set(v[:-1])[:, None])(x)).ravel()
want = np.concatenate([x[:1], x[:-1]])
print("got", got.tolist(), "want", want.tolist())
sys.exit(0 if np.array_equal(got, want) else 1)
'''

# The same bug as a program the engine judges (run_test's form): the reproduce agent's
# submission. Its default target's verdict is mismatch; with algsimp disabled, pass.
SHIFT_PROGRAM = '''\
INPUTS = [("s32", (7,))]


def f(v):
    return v.at[1:].set(v[:-1])[:, None]
'''

DIVIDE = REPROS / "divide_by_broadcast_reciprocal.py"  # a real XLA:CPU bug: x / y done as x * (1 / y)

# The fix agent's HLO pass plugin for DIVIDE: undo x * (1 / y) into x / y. FUSIONS_ONLY is
# its first draft, which knows only the form f32 takes (the reciprocal in one fusion, the
# multiply in another) and misses bf16's (both in one fusion, between converts).
EXACT_DIVISION = '''\
"""Cure plugin: x * (1 / y), in one fusion or across two, back into x / y."""

from xla_sentinel.xla import hlo_proto


def _is_one(body, name):
    instr = body.get(name)
    while instr.opcode in ("broadcast", "convert") and instr.operands:
        instr = body.get(instr.operands[0])
    return instr.opcode == "constant" and instr.operand_text.strip() in ("1", "1.0")


def _drop_dead(body):
    while True:
        dead = [i for i in body if not i.is_root and i.opcode != "parameter" and not body.users(i.name)]
        if not dead:
            return
        for i in dead:
            body.instructions.remove(i)


def _edit(module):
    bodies = {c.name: c for c in module.computations}
    changed = False
    for body in bodies.values():  # x * (1 / y) inside one computation
        touched = False
        for m in body:
            for k, name in enumerate(m.operands if m.opcode == "multiply" else []):
                recip = body.get(name)
                if recip.opcode == "divide" and _is_one(body, recip.operands[0]):
                    m.opcode = "divide"
                    m.set_operands([m.operands[1 - k], recip.operands[1]])
                    touched = True
                    break
        if touched and not body.is_entry:
            _drop_dead(body)
        changed |= touched
    for comp in module.computations:  # 1 / y computed by one fusion, x * it by another
        for fusion in comp:
            if fusion.opcode != "fusion":
                continue
            body = bodies[fusion.callees()[0][1]]
            root = body.root
            if root.opcode != "divide" or not _is_one(body, root.operands[0]):
                continue
            plan = []
            for user in comp.users(fusion.name):
                if user.opcode != "fusion" or user.operands.count(fusion.name) != 1:
                    plan = []
                    break
                ubody = bodies[user.callees()[0][1]]
                param = ubody.parameters()[user.operands.index(fusion.name)]
                muls = ubody.users(param.name)
                if not muls or any(m.opcode != "multiply" or m.operands.count(param.name) != 1 for m in muls):
                    plan = []
                    break
                plan.append((param, muls))
            if not plan:
                continue
            root.is_root = False
            body.get(root.operands[1]).is_root = True
            _drop_dead(body)
            for param, muls in plan:
                for m in muls:
                    other = next(o for o in m.operands if o != param.name)
                    m.opcode = "divide"
                    m.set_operands([other, param.name])
            changed = True
    return changed


def transform(proto):
    return hlo_proto.rewrite_proto(proto, _edit)
'''
FUSIONS_ONLY = EXACT_DIVISION.replace("for body in bodies.values():  # x * (1 / y) inside one computation",
                                      "for body in []:")

# Reaches the injected fault dus_copy_elided: x and x.at[i].set(v) both live after the
# in-place update (tests/faults/test_fault_reach.py: random growth almost never builds this).
DUS_SNIPPET = '''\
def f(x, v):
    y = x.at[2].set(v[0])
    return y, x * 2
'''
DUS_INPUTS = [["f32", [8]], ["f32", [1]]]
# The fix agent's rewrite of the reduced program of that fault's finding (its bundle's
# module.mlir: f(x, index, value, c) = (scatter of value into x at index, x * c)): a select
# on the position, no in-place update for the fault to break.
DUS_REWRITE = '''\
import jax.numpy as jnp


def f(x, i, v, c):
    return jnp.where(jnp.arange(x.shape[0]) == i[0], v, x), x * c
'''

Step = Callable[[Any], "tuple[str, dict[str, Any]] | str"] | str


def scripted(steps: list[Any], seen: list[Any]) -> Any:
    """A FunctionModel that plays `steps`: each is a final answer (str), a tool call
    (name, args), or a function (or coroutine function) of the previous tool's return
    giving one of those. What
    each tool returned is appended to `seen`."""
    from pydantic_ai.messages import (
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import FunctionModel

    script = iter(steps)

    async def play(messages: list[Any], info: Any) -> ModelResponse:
        last = None
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart):
                last = part.content
                seen.append(last)
            elif isinstance(part, RetryPromptPart):
                last = {"tool_error": part.content}
                seen.append(last)
        step = next(script)
        out = step(last) if callable(step) else step
        if inspect.isawaitable(out):
            out = await out
        if isinstance(out, str):
            return ModelResponse(parts=[TextPart(out)])
        name, args = out
        return ModelResponse(parts=[ToolCallPart(name, args)])

    return FunctionModel(play, model_name="scripted")


def tool_result(reply: Any) -> Any:
    """A tool reply's structured result (FastMCP wraps a list in {"result": ...})."""
    assert not reply.isError, reply.content[0].text
    if reply.structuredContent is not None:
        sc = reply.structuredContent
        return sc["result"] if set(sc) == {"result"} else sc
    return json.loads(reply.content[0].text)


@contextlib.contextmanager
def http_server(out: Path, *args: str) -> Iterator[str]:
    """`xla-sentinel mcp --http` on a free loopback port with `args`; its /mcp URL once it
    accepts connections (its log in out/server.log), stopped after."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    with open(out / "server.log", "w") as log:
        proc = subprocess.Popen([*SERVER, "--out", str(out), "--http", f"127.0.0.1:{port}", *args],
                                stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, (out / "server.log").read_text()
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(30)
