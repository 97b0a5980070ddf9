"""Tool schemas a constrained decoder can take: llama.cpp (llama-cpp-python's server, the
agent bench's) turns each tool's input schema into a grammar and generates the arguments
under it, and its conversion failed on the `"items": {}` of `inputs` (list[Any]): run_test,
submit_test and submit_reproducer were then generated under the generic JSON grammar and
came out malformed (docs/agents.md, "A real model on this machine"). The schemas are the
real server's (build_server over a Workbench, listed as a client lists them); the property
is checked here without llama-cpp, and with llama-cpp-python's own converter where the
bench's environment exists."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from agent_fixtures import DUS_INPUTS
from pydantic import TypeAdapter
from xla_sentinel.agents.mcp_server import build_server
from xla_sentinel.agents.mcp_tools import Inputs
from xla_sentinel.agents.tools import ToolError, Workbench
from xla_sentinel.core.names import DTYPES
from xla_sentinel.spec.campaign import MAX_RANK

INPUT_TOOLS = ("run_test", "submit_test", "submit_reproducer")
# What a node must say so that a converter knows what to generate: a type, a choice, or
# fixed values. A node with none of these (`{}`, or a description alone) is "anything",
# which llama.cpp's converter refuses inside an array and asserts on elsewhere.
TYPED = ("type", "anyOf", "oneOf", "enum", "const")
LLAMA_PYTHON = Path.home() / ".cache" / "xla-sentinel" / "envs" / "agent-bench" / "bin" / "python"


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    import anyio

    bench = Workbench(None, tmp_path_factory.mktemp("schemas"))
    try:
        tools = anyio.run(build_server(bench).list_tools)
    finally:
        bench.close()
    return {t.name: t.inputSchema for t in tools}


def _nodes(schema: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every subschema with its path: properties, array items, tuple positions, choices."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}[]")
    for i, sub in enumerate(schema.get("prefixItems") or ()):
        yield from _nodes(sub, f"{path}[{i}]")
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(schema.get(key) or ()):
            yield from _nodes(sub, f"{path}|{key}{i}")


def test_every_array_says_what_its_items_are(schemas: dict[str, dict[str, Any]]) -> None:
    assert set(INPUT_TOOLS) <= set(schemas)
    untyped_arrays, anything, refs = [], [], []
    for tool, schema in schemas.items():
        for path, node in _nodes(schema, tool):
            if node.get("type") == "array" and not (node.get("items") or node.get("prefixItems")):
                untyped_arrays.append(path)
            if path != tool and not any(k in node for k in TYPED):
                anything.append(path)
            if "$ref" in node or "$defs" in node:  # Gemini and Anthropic's strict tools refuse recursion
                refs.append(path)
    assert untyped_arrays == []
    assert anything == []
    assert refs == []


def test_every_parameter_is_described(schemas: dict[str, dict[str, Any]]) -> None:
    undescribed = [f"{tool}.{name}" for tool, schema in schemas.items()
                   for name, sub in (schema.get("properties") or {}).items() if not sub.get("description")]
    assert undescribed == []


def test_the_inputs_schema_takes_what_the_tool_takes(schemas: dict[str, dict[str, Any]]) -> None:
    """A decoder held to the schema can write every input the tool takes: a [dtype, shape]
    pair per parameter of a snippet, or one parameter's values nested as deep as any rank a
    campaign draws; and none of a wrong kind."""
    valid = [DUS_INPUTS, [["bool", []], ["bf16", [2, 3, 4]]], [[1.0, -2.0, 3.0]], [2.5, True],
             [[[1, 2], [3, 4]], [[True, False]]], [[0.5] * 2], None]
    deepest: Any = 1.0
    for _ in range(MAX_RANK):
        deepest = [deepest]
    valid.append([deepest])
    # An unknown dtype, a pair of three, a negative or unlisted shape, an object, a string
    # for a value, no list at all, values nested deeper than any rank.
    invalid = [[["f99", [4]]], [["f32", [4], "extra"]], [["f32", [-1]]], [["f32", "4"]], [{"dtype": "f32"}],
               ["nan"], "f32", [[deepest]]]
    for tool in INPUT_TOOLS:
        schema = schemas[tool]["properties"]["inputs"]
        for value in valid:
            jsonschema.validate(value, schema)
        for value in invalid:
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(value, schema)
        pair = schema["anyOf"][0]["items"]["anyOf"][0]
        assert pair["prefixItems"][0]["enum"] == list(DTYPES)


def test_validation_still_lets_the_tool_name_a_bad_item(tmp_path: Path) -> None:
    """The schema is what a model reads; the arguments are validated as before (list[Any]),
    so a bad item still reaches the tool, whose error names it (a hosted model sends
    arguments no grammar held)."""
    for value in ([["f99", [4]]], [{"dtype": "f32"}], ["nan"]):
        assert TypeAdapter(Inputs).validate_python(value) == value
    bench = Workbench(None, tmp_path)
    try:
        with pytest.raises(ToolError, match="inputs\\[0\\]: unknown dtype 'f99'"):
            bench.run_test("def f(x):\n    return x\n", "jax", [["f99", [4]]])
        with pytest.raises(ToolError, match="inputs\\[0\\] is"):
            bench.run_test("def f(x):\n    return x\n", "jax", [{"dtype": "f32"}])
    finally:
        bench.close()


def test_every_provider_takes_every_tool_schema(schemas: dict[str, dict[str, Any]],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Each provider's model (built as `agent --model` builds it, a key in the environment,
    nothing sent) rewrites a tool's schema for its API with its profile's transformer
    before the first request; Gemini's refuses a recursive $ref, for one. MCP tools are
    not strict (pydantic-ai's MCPToolset leaves `strict` unset): the walk that runs."""
    from xla_sentinel.agents.runtime import make_model
    from xla_sentinel.spec.campaign import AGENT_CREDENTIAL_ENV, AGENT_PROVIDERS

    for var in AGENT_CREDENTIAL_ENV.values():
        monkeypatch.setenv(var, "not-a-real-key")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "a-project")
    refused = {}
    for provider in AGENT_PROVIDERS:
        model = make_model(f"{provider}:{'gemini-3.8-flash' if provider.startswith('google') else 'a-model'}")
        transformer = model.wrapped.profile.get("json_schema_transformer")
        for tool, schema in schemas.items():
            try:
                if transformer is not None:
                    transformer(json.loads(json.dumps(schema)), strict=None).walk()
            except Exception as e:  # noqa: BLE001 - any refusal is the finding
                refused[f"{provider} {tool}"] = f"{type(e).__name__}: {e}"
    assert refused == {}


@pytest.mark.skipif(not LLAMA_PYTHON.exists(),
                    reason=f"llama-cpp-python is not installed ({LLAMA_PYTHON}: bench/agent_bench_setup.sh env, "
                           "make agent-bench); the property above is checked without it")
def test_llama_cpp_converts_every_tool_schema(schemas: dict[str, dict[str, Any]]) -> None:
    """llama-cpp-python's own conversion, as its chatml-function-calling handler calls it
    for a tool (LlamaGrammar.from_json_schema: the schema to GBNF, then llama.cpp's parser)."""
    script = ("import json, sys\n"
              "from llama_cpp.llama_grammar import LlamaGrammar\n"
              "failed = {}\n"
              "for name, schema in json.load(sys.stdin).items():\n"
              "    try:\n"
              "        LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)\n"
              "    except Exception as e:\n"
              "        failed[name] = f'{type(e).__name__}: {e}'\n"
              "print(json.dumps(failed))\n")
    proc = subprocess.run([str(LLAMA_PYTHON), "-c", script], input=json.dumps(schemas), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {}
