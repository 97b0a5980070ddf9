"""The agent half (issue 27): an MCP server over the engine (`mcp_server.py`), the agent
runtime (`runtime.py`), the verification gate (`gate.py`) and the task queue with leases
(`tasks.py`). The tools themselves are plain functions over the engine (`tools.py`).

Nothing in the engine imports this package (pyproject's import contracts), and importing
it imports neither `mcp` nor `pydantic_ai`: the modules that need them import them inside
their functions, so the engine installs and runs without the `agents` extra.
"""
