"""The worker protocol's one table: every request class has its handler, a worker under
another jaxlib serves only what its handlers need of jax, and the JSON form reaches every
request. The old hand-written lists had already lost `Lower`."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from xla_sentinel.worker import protocol, registry, server


def test_every_request_has_a_handler_in_the_current_release() -> None:
    table = server.load_table("current")
    missing = [r.__name__ for r in protocol.REQUESTS if r not in table]
    assert missing == []
    assert protocol.Lower in protocol.REQUESTS


def test_another_release_serves_the_portable_filter_only() -> None:
    served = set(server.load_table("other"))
    server.load_table("current")  # not left to test order: each xdist process runs its own
    assert served == {protocol.Ping, protocol.WhichVersions, protocol.Run, protocol.Validate}
    # Its Run reads portable artifacts: not the current release's handler.
    assert registry.HANDLERS[(protocol.Run, "other")] is not registry.HANDLERS[(protocol.Run, "current")]


def test_the_other_release_table_loads_without_the_campaign_handlers() -> None:
    # What a worker under another jaxlib imports: none of the generator, the references
    # or the bisector's handlers, whose jax use an older release may not have.
    code = ("import sys; from xla_sentinel.worker import server; server.load_table('other'); "
            "print(sorted(m for m in sys.modules if m.startswith('xla_sentinel.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout
    for heavy in ("worker.handlers", "worker.bisect_handlers", "programs.generator",
                  "references.npref", "ops.table"):
        assert f"xla_sentinel.{heavy}'" not in loaded


def test_a_second_handler_for_one_request_is_refused() -> None:
    server.load_table("current")
    with pytest.raises(ValueError, match="Run has two handlers"):
        registry.handles(protocol.Run)(lambda req: None)


def test_a_request_class_registers_itself_and_names_must_be_unique() -> None:
    with pytest.raises(TypeError, match="share cmd 'run'"):
        @dataclasses.dataclass
        class Again(protocol.Request[protocol.Ran]):  # noqa: F841 - defining it is the act
            cmd = "run"


def test_the_json_form_names_every_request() -> None:
    for cls in protocol.REQUESTS:
        assert protocol._BY_CMD[cls.cmd] is cls
    with pytest.raises(ValueError, match="unknown request"):
        protocol.from_wire({"cmd": "no-such"})
