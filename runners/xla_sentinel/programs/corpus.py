"""External programs: a corpus folder of JAX snippets and StableHLO files, submitted by
people or automated agents, judged by the same targets and oracle as generated programs.

A corpus folder holds, at any depth:

- JAX snippets (`*.py`): a module that defines `f(*args)` and `INPUTS`, a list with one
  `(dtype, shape)` pair per argument (dtype one of campaign.DTYPES), for example

      import jax.numpy as jnp
      INPUTS = [("f32", (4, 8)), ("f32", (8,))]
      def f(x, b):
          return jnp.tanh(x @ jnp.ones((8, 8), x.dtype) + b)

  Optional `SPECIAL = True` draws the inputs from the special-value pool (ties, signed
  zeros, NaN/Inf, extremes). `f` is lowered with jax.jit at those shapes; the StableHLO
  that comes out is the program.
- StableHLO modules (`*.mlir` text, `*.mlirbc` bytecode), read like trace files; their
  inputs are drawn from the parameter types.

`discover` only lists files (the coordinator calls it, without jax). `load` executes the
snippet, so it runs inside a worker process, never in the coordinator: a snippet that
raises, exits or hangs takes down only that worker. Every problem is a ProgramError whose
message starts with the file's path.
"""

from __future__ import annotations

import hashlib
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from xla_sentinel.core.names import DTYPES
from xla_sentinel.core.program import Program, ProgramError
from xla_sentinel.programs.inputs import make_array
from xla_sentinel.programs.units import SNIPPET_SUFFIX

EXAMPLE = 'INPUTS = [("f32", (4, 8))]'


def program_id(path: Path) -> str:
    """A stable id: the file's stem plus a hash of its path (two folders may share names)."""
    return f"corpus-{path.stem}-{hashlib.sha256(str(path).encode()).hexdigest()[:6]}"


def _input_specs(path: Path, raw: Any) -> list[tuple[str, tuple[int, ...]]]:
    bad = f"{path}: INPUTS must be a list of (dtype, shape) pairs, e.g. {EXAMPLE}"
    if not isinstance(raw, list | tuple):
        raise ProgramError(bad)
    specs = []
    for i, item in enumerate(raw):
        if not (isinstance(item, list | tuple) and len(item) == 2):
            raise ProgramError(f"{bad} (INPUTS[{i}] is {item!r})")
        dtype, shape = item
        if dtype not in DTYPES:
            raise ProgramError(f"{path}: INPUTS[{i}]: unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
        if not (isinstance(shape, list | tuple) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise ProgramError(f"{path}: INPUTS[{i}]: shape must be a tuple of non-negative ints, got {shape!r}")
        specs.append((dtype, tuple(shape)))
    return specs


def _where(path: Path, e: BaseException) -> str:
    """`line N` of the snippet where an exception came from, when it came from there."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == str(path)]
    return f" (line {frames[-1].lineno})" if frames else ""


def load_snippet(path: Path, seed: int = 0) -> Program:
    """Execute a JAX snippet and lower its `f` at `INPUTS` (worker side: runs user code)."""
    import jax

    from xla_sentinel.core.dtypes import NP_DTYPES
    from xla_sentinel.programs.evaluate import shape_struct

    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ProgramError(f"{path}: unreadable ({e})") from None
    try:
        code = compile(source, str(path), "exec")
    except SyntaxError as e:
        raise ProgramError(f"{path}: syntax error at line {e.lineno}: {e.msg}") from None
    namespace: dict[str, Any] = {"__name__": f"corpus_{path.stem}", "__file__": str(path)}
    try:
        exec(code, namespace)  # noqa: S102 - user code, in a worker process by design
    except Exception as e:
        raise ProgramError(f"{path}: raised {type(e).__name__} while loading{_where(path, e)}: {e}") from None
    f = namespace.get("f")
    if not callable(f):
        raise ProgramError(f"{path}: defines no function f(*args)")
    if "INPUTS" not in namespace:
        raise ProgramError(f"{path}: defines no INPUTS; add one (dtype, shape) pair per argument of f, "
                           f"e.g. {EXAMPLE}")
    specs = _input_specs(path, namespace["INPUTS"])
    structs = [shape_struct(shape, NP_DTYPES[d]) for d, shape in specs]
    try:
        module = jax.jit(f).lower(*structs).as_text()
    except Exception as e:
        msg = str(e).splitlines()[0] if str(e) else ""
        raise ProgramError(f"{path}: f(*args) does not trace at INPUTS{_where(path, e)}: "
                           f"{type(e).__name__}: {msg}") from None
    special = bool(namespace.get("SPECIAL", False))
    # Inputs depend on the campaign seed and the file's name, not on its place in the corpus.
    salt = int(hashlib.sha256(path.name.encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng([seed, salt, 0xC0])
    inputs = [make_array(rng, shape, d, special) for d, shape in specs]
    return Program(id=program_id(path), module=module, inputs=inputs,
                   input_dtypes=[d for d, _ in specs],
                   provenance={"source": "corpus", "path": str(path), "special": special})


def load(path: Path, seed: int = 0) -> Program:
    """A Program from one corpus file: a snippet, or a StableHLO module (worker side)."""
    from xla_sentinel.programs import traces

    path = Path(path)
    if path.suffix == SNIPPET_SUFFIX:
        return load_snippet(path, seed)
    program = traces.load(path, seed)
    program.id = program_id(path)
    program.provenance = {**program.provenance, "source": "corpus"}
    return program
