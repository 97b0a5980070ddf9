"""Fixtures: one GCS emulator per test module, and its address in the environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gcs_emulator import Emulator


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    emu = Emulator(tmp_path_factory.mktemp("gcs"))
    emu.start()
    yield emu
    emu.close()


@pytest.fixture
def gcs(emulator: Emulator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Emulator:
    """The emulator, reached by gcsfs; staging folders land under the test's tmp_path."""
    if not emulator.up:
        emulator.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.host)
    monkeypatch.setenv("XLA_SENTINEL_STAGING", str(tmp_path / "staging"))
    return emulator
