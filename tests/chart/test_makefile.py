"""`make images` refuses clearly where no Docker engine answers, instead of half-building."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tools import REPO_ROOT


def test_make_images_without_an_engine_fails_with_one_clear_message(tmp_path: Path) -> None:
    # A DOCKER_HOST where nothing listens makes `docker info` fail even where an engine runs.
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    out = subprocess.run(["make", "-s", "images"], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "make images: no Docker engine answers 'docker info' here" in out.stderr
    assert "docker build" not in out.stdout + out.stderr
