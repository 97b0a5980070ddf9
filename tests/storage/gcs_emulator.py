"""A real GCS JSON API server on loopback: `gcp-storage-emulator` (PyPI) in its own process,
its objects on disk, reached by gcsfs through the standard STORAGE_EMULATOR_HOST.

Clients reach it through a TCP relay on loopback that this module runs, and an outage
(`stop`) closes the relay: every connection is refused or cut, as by a store that is down,
while the emulator process runs on. Killing the emulator instead could land in the middle
of rewriting its metadata file (.meta, written in place): the restarted emulator could not
parse it, exited at every start, and each later test of the module found the store gone
(seen once in a full suite run: JSONDecodeError in emulator.log)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
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
        self.port = free_port()  # the relay's: what clients know
        self.host = f"http://127.0.0.1:{self.port}"
        self._server_port = free_port()
        self._server: subprocess.Popen[bytes] | None = None
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def up(self) -> bool:
        return self._listener is not None

    def start(self) -> None:
        """Start the emulator once, then (again, on the same port) the relay to it."""
        if self._server is None or self._server.poll() is not None:
            self._launch()
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT of the last one
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        """The outage: no new connection is accepted and every open one is cut."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._open = self._open, set()
        for s in [*([listener] if listener else []), *conns]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.stop()
        if self._server is not None:
            self._server.terminate()
            self._server.wait(timeout=10)
            self._server = None

    def _launch(self) -> None:
        exe = Path(sys.executable).parent / "gcp-storage-emulator"
        self._server = subprocess.Popen(
            [str(exe), "start", "-H", "127.0.0.1", "--port", str(self._server_port),
             "--default-bucket", BUCKET, "-q"],
            env={**os.environ, "STORAGE_BASE": str(self.data)},
            stdout=subprocess.DEVNULL, stderr=open(self.data.parent / "emulator.log", "ab"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self._server.poll() is not None:
                raise RuntimeError(f"gcp-storage-emulator exited with {self._server.returncode} "
                                   f"(see {self.data.parent / 'emulator.log'})")
            try:
                socket.create_connection(("127.0.0.1", self._server_port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"gcp-storage-emulator did not listen on {self._server_port}")

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # the relay was closed: an outage or the end
                return
            try:
                server = socket.create_connection(("127.0.0.1", self._server_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:  # stopped meanwhile
                    client.close()
                    server.close()
                    return
                self._open.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            with self._lock:
                self._open.discard(src)
                self._open.discard(dst)
