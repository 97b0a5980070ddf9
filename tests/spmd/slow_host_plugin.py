"""Test plugin (not a fault): host 1 of a multi-host group stalls in its compile while the
file named by $XLA_SENTINEL_TEST_SLOW_HOST exists, after touching `<that file>.compiling`,
so a test can kill it mid-program while host 0 already waits in the collective; while
`<that file>.abort` exists, host 1 aborts in its compile instead (a compiler CHECK's exit)."""

import os
import time
from pathlib import Path


def transform(proto: bytes) -> bytes | None:
    flag = os.environ.get("XLA_SENTINEL_TEST_SLOW_HOST")
    if os.environ.get("XLA_SENTINEL_HOST") == "1" and flag and Path(flag + ".abort").exists():
        os.abort()
    if os.environ.get("XLA_SENTINEL_HOST") == "1" and flag and Path(flag).exists():
        Path(flag + ".compiling").touch()
        deadline = time.monotonic() + 120
        while Path(flag).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    return None
