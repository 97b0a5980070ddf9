"""The one base class of the errors a user can fix (a file, a field, a flag, a URI, a
credential), with the command line's exit code on the class: `xla-sentinel` catches it once
and prints its message as one line (README.md, "Exit codes")."""

from __future__ import annotations

EXIT_BAD_INPUT = 2


class UserError(Exception):
    """Bad input; the message names the field or file and what was wrong with it. Engine
    errors of this kind keep ValueError or RuntimeError as a second base, where callers
    catch those."""

    exit_code = EXIT_BAD_INPUT
