"""The `xla-sentinel` console script. `xla-sentinel operator` starts the operator
(`operator migrate-storage` migrates the CRDs' stored versions), and
`xla-sentinel --version` answers, without the engine's imports (numpy, jax: cli/main.py
imports them through bisect, storage and the worker client), which the operator image does
not hold; every other command is cli/main.py's. main.py keeps its own `operator` subcommand
and `--version` flag for its help text and for in-process callers; this is the route the
image takes (tests/chart/test_dockerfile.py)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["operator", "migrate-storage"]:
        from xla_sentinel_operator.storage_versions import run as migrate

        return migrate(argv[2:])
    if argv[:1] == ["operator"]:
        from xla_sentinel_operator.main import run

        return run(argv[1:])
    if argv == ["--version"]:
        from xla_sentinel.cli.version import version_line

        print(version_line())
        return 0
    from xla_sentinel.cli.main import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
