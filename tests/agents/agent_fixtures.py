"""What the agent tests share: the repository's real reproducers, the snippet that reaches
an injected fault, a scripted model (see conftest.py), and how a tool's reply is read."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
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

# Reaches the injected fault dus_copy_elided: x and x.at[i].set(v) both live after the
# in-place update (tests/faults/test_fault_reach.py: random growth almost never builds this).
DUS_SNIPPET = '''\
def f(x, v):
    y = x.at[2].set(v[0])
    return y, x * 2
'''
DUS_INPUTS = [["f32", [8]], ["f32", [1]]]

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
