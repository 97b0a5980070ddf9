"""The one table of the worker protocol: each request class to its handler.

Handlers register themselves beside their code (`@handles(Run)`), so adding a request is
one class in protocol.py and one decorated function. A handler serves the current jaxlib's
workers, workers under another jaxlib (`release="other"`: only compiling and running a
module, which older releases share with this one; docs/versions.md), or both. The server
(server.py) imports the handler modules its release needs and serves a filter of this
table; the coordinator never imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from xla_sentinel.worker.protocol import Reply, Request

Release = Literal["current", "other"]
RELEASES: tuple[Release, ...] = ("current", "other")

F = TypeVar("F", bound=Callable[..., Reply])

HANDLERS: dict[tuple[type[Request[Any]], Release], Callable[[Any], Reply]] = {}


def handles(request: type[Request[Any]], *, releases: tuple[Release, ...] = ("current",)) -> Callable[[F], F]:
    """Register the decorated function as the handler of `request` for `releases`."""

    def register(fn: F) -> F:
        for release in releases:
            if (request, release) in HANDLERS:
                raise ValueError(f"{request.__name__} has two handlers for the {release} release")
            HANDLERS[(request, release)] = fn
        return fn

    return register


def table(release: Release) -> dict[type[Request[Any]], Callable[[Any], Reply]]:
    """What a worker of `release` serves: the filter of HANDLERS for it."""
    return {req: fn for (req, rel), fn in HANDLERS.items() if rel == release}
