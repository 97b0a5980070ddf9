"""What a worker process needs before it serves, imported once for all workers.

client.py forks workers from a multiprocessing forkserver that has imported this module:
jax, the request handlers and the op table (about 3 CPU-seconds, a large share of a short
campaign's work when each of its processes imported them itself). Nothing here starts a
backend: jax reads XLA_FLAGS and creates its CPU client in the forked worker, so every
worker still gets its own client, devices and flags (server.serve).
"""

import importlib
import os
import time

from xla_sentinel.core import cpu_account

# As server.serve sets it: jax reads the platform setting when it is imported.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# The modules a spawned worker would import: the server loop and every handler of the
# current release, and what the coordinator's main module pulls in (a forked worker
# re-imports it: the campaign engine). Imported by name: a preload list, not a dependency
# of the worker on the campaign.
PRELOAD = ("xla_sentinel.worker.server", "xla_sentinel.xla.plugins", "xla_sentinel.worker.client",
           "xla_sentinel.campaign.engine")

try:
    for _name in PRELOAD:
        importlib.import_module(_name)
    importlib.import_module("xla_sentinel.worker.server").load_table("current")
except Exception:  # noqa: BLE001 - a worker that imports them itself reports the error in its log
    pass
# What the imports cost, once for every worker forked from here: each reports it under
# this process's id (server.serve), and the coordinator counts it once (cpu_account.ZYGOTES).
cpu_account.ZYGOTES[os.getpid()] = time.process_time()
