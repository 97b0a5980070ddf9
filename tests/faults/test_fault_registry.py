"""The fault registry and the plugin contract: every fault file is registered, loads
standalone by path, documents itself, and abort_on_pattern really kills the process."""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fault_harness import load_fault
from xla_sentinel.xla.faults import FAULTS, fault_path

FAULTS_DIR = Path(fault_path("abort_on_pattern")).parent


def test_every_fault_file_is_registered_and_every_entry_exists() -> None:
    files = {p.name for p in FAULTS_DIR.glob("*.py") if p.name != "__init__.py"}

    assert set(FAULTS.values()) == files
    assert len(FAULTS) >= 13  # at least 12 miscompilations plus abort_on_pattern
    for name in FAULTS:
        path = Path(fault_path(name))
        assert path.is_absolute() and path.is_file() and path.stem == name


def test_unknown_fault_name_gets_one_clear_error() -> None:
    with pytest.raises(KeyError, match="unknown fault 'nope'.*select_ge_to_gt"):
        fault_path("nope")


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_fault_module_follows_the_plugin_contract(name: str) -> None:
    module = load_fault(name)
    source = Path(fault_path(name)).read_text()

    assert module.NAME == name
    assert module.FIRES_ON.strip() and "\n" not in module.FIRES_ON
    assert "Fires when" in module.__doc__ and "mitate" in module.__doc__
    assert callable(module.transform)
    imports = [node for node in ast.walk(ast.parse(source))
               if isinstance(node, ast.ImportFrom) and node.module
               and node.module.startswith("xla_sentinel")]
    # Loaded by file path in target workers: the only project imports allowed are the HLO
    # text editor and its proto conversion.
    assert all(node.module == "xla_sentinel.xla" and set(a.name for a in node.names) <= {"hlo", "hlo_proto"}
               for node in imports)
    assert not any(isinstance(node, ast.ImportFrom) and node.level
                   for node in ast.walk(ast.parse(source)))


def test_abort_on_pattern_kills_the_compiling_process_only_on_atan2() -> None:
    script = textwrap.dedent(f"""
        import importlib.util, resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the abort must leave no core file
        import jax, jax.extend.xla, jax.numpy as jnp, numpy as np
        spec = importlib.util.spec_from_file_location("plugin", {fault_path("abort_on_pattern")!r})
        plugin = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(plugin)
        jax.extend.xla.register_hlo_module_transformation(
            plugin.transform, name="abort", platforms="cpu",
            stage=jax.extend.xla.PipelineStage.PRE_SCHEDULER)
        jax.clear_caches()
        x = np.ones(3, np.float32)
        print("survived", jax.jit(lambda a: jnp.sin(a) * 2)(x)[0], flush=True)
        jax.jit(jnp.arctan2)(x, x).block_until_ready()
        print("not reached", flush=True)
    """)

    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)

    assert result.returncode == -signal.SIGABRT, result.stderr[-2000:]
    assert "survived" in result.stdout
    assert "not reached" not in result.stdout
