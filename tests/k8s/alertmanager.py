"""A real Alertmanager (Debian's prometheus-alertmanager) on loopback, for tests that follow
an alert from the operator to where people read it; it can be restarted on the same port
and data directory (its notification log survives, its alerts do not)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

CONFIG = """\
route:
  receiver: team
  group_by: [signature]
  group_wait: 1s
receivers:
  - name: team
"""


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Alertmanager:
    def __init__(self, config: str = CONFIG, host: str = "127.0.0.1") -> None:
        """`host`: the local address it listens on; loopback, or the host side of the real
        node's pod bridge (tests/controlplane/node.py) for pods to reach it."""
        self.binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
        if self.binary is None:
            raise RuntimeError("prometheus-alertmanager is not installed: run `make system-deps`")
        self.root = Path(tempfile.mkdtemp(prefix="xs-alertmanager-"))
        (self.root / "alertmanager.yml").write_text(config)
        self.host, self.port = host, _free_port(host)
        self.url = f"http://{host}:{self.port}"
        self.log = self.root / "alertmanager.log"
        self._start()

    def _start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(self.binary), f"--config.file={self.root / 'alertmanager.yml'}",
                 f"--storage.path={self.root / 'data'}",
                 f"--web.listen-address={self.host}:{self.port}",
                 "--cluster.listen-address="],  # no HA gossip: one instance
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"alertmanager exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("alertmanager not ready within 30 s")

    def _terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: it writes its notification log to disk
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def restart(self) -> None:
        """Stop it (as a pod is stopped) and start it again on the same port and storage."""
        self._terminate()
        self._start()

    def metric(self, name: str) -> float:
        """The value of one unlabelled metric of its /metrics."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        raise KeyError(name)

    @property
    def alerts_url(self) -> str:
        """Where clients post alerts: the v2 API."""
        return f"{self.url}/api/v2/alerts"

    def alerts(self, active: bool = True) -> list[dict[str, Any]]:
        """The alerts Alertmanager holds, as its API reports them."""
        query = "" if active else "?active=false&inhibited=true&silenced=true&unprocessed=true"
        with urllib.request.urlopen(self.alerts_url + query, timeout=5) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        self._terminate()
        shutil.rmtree(self.root, ignore_errors=True)
