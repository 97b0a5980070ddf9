"""A real GCS JSON API server on loopback: `gcp-storage-emulator` (PyPI) in its own process,
its objects on disk so that a stop and a restart keep them, reached by gcsfs through the
standard STORAGE_EMULATOR_HOST."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

BUCKET = "findings"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Emulator:
    def __init__(self, data: Path) -> None:
        self.data = data
        self.port = free_port()
        self.host = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def _launch(self) -> subprocess.Popen[bytes]:
        exe = Path(sys.executable).parent / "gcp-storage-emulator"
        return subprocess.Popen(
            [str(exe), "start", "-H", "127.0.0.1", "--port", str(self.port),
             "--default-bucket", BUCKET, "-q"],
            env={**os.environ, "STORAGE_BASE": str(self.data)},
            stdout=subprocess.DEVNULL, stderr=open(self.data.parent / "emulator.log", "ab"))

    def start(self) -> None:
        """Start (or restart, on the same port: clients know it). A restart can find the
        port still held by the last server's connections in TIME_WAIT (up to 60 s on
        Linux); the emulator then exits at once, and it is started again until it binds."""
        self.proc = self._launch()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                time.sleep(0.5)
                self.proc = self._launch()
                continue
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"gcp-storage-emulator did not listen on {self.port}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None
