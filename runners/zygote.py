"""What a worker process needs before it serves, imported once for all workers.

worker.py forks workers from a multiprocessing forkserver that has imported this module:
jax, the request handlers and the op table (about 3 CPU-seconds, a large share of a short
campaign's work when each of its processes imported them itself). Nothing here starts a
backend: jax reads XLA_FLAGS and creates its CPU client in the forked worker, so every
worker still gets its own client, devices and flags (worker._serve).
"""

import os

# As worker._serve sets it: jax reads the platform setting when it is imported.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

try:
    # The modules a spawned worker would import: the server loop and every handler, and
    # what the coordinator's main module pulls in (a forked worker re-imports it).
    from . import dispatch, engine, plugins, worker  # noqa: F401
except Exception:  # noqa: BLE001 - a worker that imports them itself reports the error in its log
    pass
