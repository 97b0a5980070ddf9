"""The engine, and the agents package itself, import without the agents extra; the two
commands that need it say so in one line and exit 2. The extra's packages are hidden
from a child interpreter (an import hook refuses them), as on an install without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HIDE = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('mcp', 'pydantic_ai', 'fastmcp'):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, Hide())
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", HIDE + code], capture_output=True, text=True, timeout=120)


def test_engine_and_agents_package_import_without_the_extra() -> None:
    proc = _run("import xla_sentinel.cli.main, xla_sentinel.agents.tools, xla_sentinel.agents.gate, "
                "xla_sentinel.agents.tasks, xla_sentinel.agents.runtime, xla_sentinel.agents.mcp_server\n"
                "assert not any(m.split('.')[0] in ('mcp', 'pydantic_ai') for m in sys.modules)\n"
                "print('ok')")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_mcp_and_agent_commands_name_the_missing_extra(tmp_path: Path) -> None:
    for argv in (["mcp", "--out", str(tmp_path)],
                 ["agent", "--role", "fix", "--model", "openai:x", "--out", str(tmp_path), "--task", "x"]):
        proc = _run(f"from xla_sentinel.cli.main import main\nsys.exit(main({argv!r}))")
        assert proc.returncode == 2, proc.stderr
        assert "the agents extra is not installed" in proc.stderr and "xla-sentinel[agents]" in proc.stderr
