"""A Chat Completions endpoint on loopback for the swarm tests (the model API is what cannot
exist here): the server's start and stop; each test's model says what it answers
(`_handle`)."""

from __future__ import annotations

from aiohttp import web


class ChatEndpoint:
    """Serves POST /v1/chat/completions with `_handle` at `url` once started."""

    def __init__(self) -> None:
        self.url = ""
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def start(self, host: str = "127.0.0.1") -> ChatEndpoint:
        """Listen on `host` (loopback; the real node's pods reach the pod bridge's host
        address instead, tests/node/test_swarm_node.py)."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://{host}:{self.port}/v1"
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
