"""`make images` refuses clearly where the engine DOCKER_HOST names does not answer, instead of
half-building or quietly building with another engine. (Where DOCKER_HOST is unset and no
Docker answers, it starts Debian's dockerd itself: tests/chart/test_images.py runs what it built.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tools import REPO_ROOT


def test_make_images_with_an_engine_that_does_not_answer_fails_with_one_clear_message(
        tmp_path: Path) -> None:
    # A DOCKER_HOST where nothing listens makes `docker info` fail even where an engine runs.
    host = f"unix://{tmp_path}/no-docker.sock"
    env = {**os.environ, "DOCKER_HOST": host}
    out = subprocess.run(["make", "-s", "images"], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert (f"make images: no Docker engine answers 'docker info' at DOCKER_HOST={host}; unset "
            "DOCKER_HOST to build with this machine's Docker, or with Debian's dockerd started "
            "here\n") in out.stderr
    assert out.stdout == ""  # nothing installed, started, pulled or built
