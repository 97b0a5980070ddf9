"""Session fixtures for the fault-suite tests."""

from __future__ import annotations

import pytest
from fault_corpus import CORPUS
from fault_harness import captured_proto


@pytest.fixture(scope="session")
def corpus_protos() -> dict[str, bytes]:
    return {name: captured_proto(f, *args) for name, (f, args) in CORPUS.items()}
