"""Injected fault: one host leaves out an all-reduce the others wait in.

Imitates a miscompile that exists on one host of a multi-host program only (a compile
that differs between hosts: a host-dependent flag, autotuning result or cache entry):
host 1 of the group (worker/hosts.py, XLA_SENTINEL_HOST=1) compiles every all-reduce of
one array as a copy of its operand, so it goes on while its peers wait for it in the
all-reduce: the collective never completes. In one process, or on any other host, the
module is left as it is.

Fires when: the partitioned module holds an all-reduce of one array and the process is
host 1 of a multi-host group.
"""

import os

from xla_sentinel.xla import hlo, hlo_proto

NAME = "allreduce_skipped_on_one_host"
FIRES_ON = "all-reduce of a module compiled by host 1 of a multi-host group (its peers wait forever)"
# The host that leaves the collective out (worker/hosts.py HOST_ENV).
HOST_ENV = "XLA_SENTINEL_HOST"
SKIPPING_HOST = "1"


def _edit(module: hlo.HloModule) -> bool:
    changed = False
    for comp in module.editable_computations():
        for instr in list(comp):
            if instr.opcode != "all-reduce" or len(instr.operands) != 1 or instr.shape is None:
                continue
            # The same value, never reduced: this host's own part taken for the group's sum.
            instr.opcode = "copy"
            instr.attrs = [(k, v) for k, v in instr.attrs if k == "metadata"]
            changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    if os.environ.get(HOST_ENV) != SKIPPING_HOST:
        return None
    return hlo_proto.rewrite_proto(proto, _edit)
