"""Every file format xla-sentinel reads, fuzzed from real valid files (tests/inputs/filefuzz.py):
no traceback, no silent acceptance, each rejection names the file. Bounded here; longer
runs: bench/fuzz_inputs.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xla_sentinel.worker.client import Worker

from inputs import filefuzz

# The MLIR bytecode reader of jaxlib 0.10.2 (bytecode, VHLO, and inside jax.export blobs)
# aborts or loops on some corrupt files (see the bench); in a campaign that is a worker
# death or timeout reported as the file's error. A short timeout keeps a loop cheap here.
TIMEOUT_S = 5.0
BYTECODE_KINDS = ("mlir_bytecode", "jax_export")
CASES = settings(max_examples=12, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return filefuzz.write_seeds(tmp_path_factory.mktemp("seeds"))


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    w = Worker("fuzz-inputs", log_path=tmp_path_factory.mktemp("logs") / "worker.log")
    yield w
    w.close()


def test_the_seed_files_are_accepted(seeds: dict[str, Path], worker: Worker, tmp_path: Path) -> None:
    """Unmutated, each kind is read: a reader that refused everything would pass the rest."""
    units = {"trace_module": seeds["trace"], "hlo_text": seeds["hlo"], "mlir_bytecode": seeds["mlirbc"],
             "jax_export": seeds["jaxexport"], "corpus_snippet": seeds["snippet"],
             "plugin_module": seeds["plugin"], "finding_json": seeds["finding"]}
    for kind, unit in units.items():
        assert filefuzz.read(filefuzz.Case(kind, unit, unit, False, "none"), worker, 60)[0] == "accepted", kind


@pytest.mark.parametrize("kind", filefuzz.KINDS)
def test_mutated_inputs_are_rejected_by_name_or_accepted_never_crash(
        kind: str, seeds: dict[str, Path], worker: Worker, tmp_path: Path) -> None:
    seen: list[tuple[str, str, str]] = []

    @CASES
    @given(st.integers(0, 2**32 - 1))
    def one(seed: int) -> None:
        case = filefuzz.make_case(kind, seeds, tmp_path / "case", np.random.default_rng(seed))
        outcome, message = filefuzz.read(case, worker, TIMEOUT_S)
        seen.append((outcome, case.mutation, message))
        allowed = ("rejected", "accepted", "abort", "hang") if kind in BYTECODE_KINDS else ("rejected", "accepted")
        assert outcome in allowed, (case.mutation, outcome, message)

    one()
    assert any(o == "rejected" for o, _, _ in seen), seen
