"""Findings for the bisection tests: hand-built folders bisected once per module, and a
small campaign under an injected fault with bisection on."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
