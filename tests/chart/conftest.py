"""Fixtures: one parametrised values file per CI shape, and its rendered objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .render import CI_VALUES, render


@pytest.fixture(params=CI_VALUES, ids=[p.name.removesuffix("-values.yaml") for p in CI_VALUES])
def values_file(request: pytest.FixtureRequest) -> Path:
    return request.param


@pytest.fixture
def rendered(values_file: Path) -> tuple[dict[str, Any], ...]:
    return render(values_file)
