"""One host process of a multi-host group: a program that spans processes runs here in part.

`python -m xla_sentinel.worker.host`, started by worker/hosts.py `HostGroup` (one per host
of the group, on loopback) or, for a host in another pod, by that pod's supervisor
(worker/host_link.py serve_remote, which relays its frames over TCP), with the group in
its environment (hosts.HOST_ENV). It
initializes jax.distributed with host 0's coordinator, so the group's devices are one
global set: on the CPU (GroupEnv.platform `cpu`) with the cross-process collectives over
gloo and its own virtual devices; on a TPU slice (`tpu`) with its VM's chips, the
collectives libtpu's over ICI. Then it serves the requests its driver sends every host
alike (lockstep), in order:

- ping: answered once jax.distributed is up (every host has joined);
- run: compile the module over the global devices (device assignment in global device
  order, host 0's devices first), place this host's shards of each input, run, and give
  this host's output shards to host 0 through the coordinator's key-value store; host 0
  puts each output together and answers with it, the other hosts answer `done`. Before it
  runs, each host says which collectives the optimized module holds (a `stage` frame), so
  a run that never ends is reported with its collectives.

Frames are pickled (length-prefixed) on stdin and on the fd that was stdout, which is
moved away from fd 1 first: XLA, gloo and jax print to both stdout and stderr, and the
driver reads only frames. A closed stdin (the driver gone) ends the process at once, even
mid-collective: a host is never left waiting for peers that will not come.
"""

from __future__ import annotations

import os
import pickle
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import IO, Any

from xla_sentinel.core import cpu_account
from xla_sentinel.worker import host_link, hosts

# The CPU account's stage of reading which collectives the optimized module holds.
COLLECTIVES = "collectives"
# How long host 0 waits for another host's output shards once its own run is done: the
# hosts finish a program's collectives together, so a host that has not written its
# shards by then is gone (the driver also bounds the whole request).
GATHER_MS = 60_000


def _send(out: IO[bytes], lock: threading.Lock, frame: dict[str, Any]) -> None:
    host_link.write_frame(out, frame, lock)


def _reader(inp: IO[bytes], requests: queue.Queue[dict[str, Any] | None]) -> None:
    """Requests from the driver into `requests`; on EOF the process ends (os._exit: the
    main thread may be blocked in a collective that will never complete)."""
    while True:
        data = host_link.read_raw(inp)
        if data is None:
            os._exit(0)
        frame = pickle.loads(data)
        if frame is None:
            requests.put(None)
            return
        requests.put(frame)


class Host:
    """This process's part of the group: jax.distributed initialized, the global devices."""

    def __init__(self, group: hosts.GroupEnv) -> None:
        import jax

        self.group = group
        t0 = time.monotonic()
        if group.platform == "cpu":
            # Cross-process collectives on the CPU: gloo (XLA:CPU's default has none).
            _set_option("jax_cpu_collectives_implementation", "gloo")
            jax.distributed.initialize(group.coordinator, num_processes=group.hosts,
                                       process_id=group.host,
                                       heartbeat_timeout_seconds=group.heartbeat_s,
                                       coordinator_bind_address=group.bind or None)
        else:
            # A TPU slice: the driver's values, not jax's detection of GKE's variables.
            # They agree (cluster/pod.py tpu_slice_host reads the index from TPU_WORKER_ID
            # and host 0 from TPU_WORKER_HOSTNAMES, on jax's port 8482), but with no
            # arguments jax would bind [::] (a pod network may have no IPv6), keep its
            # 100 s heartbeat (a lost host's peers held that long) and miss the address
            # host 0's pod was resolved to (host_link.coordinator_by_address). With the
            # three given, jax's detection would only set local_device_ids, never on a
            # TPU VM: "deactivate" skips it (and its metadata queries).
            jax.distributed.initialize(group.coordinator, num_processes=group.hosts,
                                       process_id=group.host,
                                       cluster_detection_method="deactivate",
                                       heartbeat_timeout_seconds=group.heartbeat_s,
                                       coordinator_bind_address=group.bind or None)
        self.init_s = time.monotonic() - t0
        # Global device order: by process, then local id, the order jax.devices() gives.
        every = tuple(jax.devices())
        if group.platform == "cpu":
            self.devices = every
            if len(self.devices) != group.hosts * group.devices_per_host:
                raise RuntimeError(f"the group has {len(self.devices)} devices, expected "
                                   f"{group.hosts} x {group.devices_per_host}")
        else:
            # A TPU host has its VM's chips; the layout may use fewer: each host's first.
            chosen = hosts.group_devices([(d.id, d.process_index) for d in every], group.hosts,
                                         group.devices_per_host)
            by_id = {d.id: d for d in every}
            self.devices = tuple(by_id[i] for i in chosen)
        self.host_of = {d.id: d.process_index for d in self.devices}

    def _kv(self) -> Any:
        from jax._src import distributed
        return distributed.global_state.client

    def compile(self, module: str, options: dict[str, Any]) -> Any:
        """The module compiled over the group's devices (its partitions, in global order)."""
        import numpy as np
        from jax._src import compiler
        from jaxlib import xla_client as xc

        from xla_sentinel.xla.compiler import backend, partitions

        n = partitions(module)
        if n != len(self.devices):
            raise ValueError(f"the module is partitioned over {n} devices, the group has {len(self.devices)}")
        # The default assignment is ids 0..n-1; a process's CPU devices are numbered from
        # its process index (2048, 2049 for the second), so the assignment must be given.
        opts = compiler.get_compile_options(
            num_replicas=1, num_partitions=n,
            device_assignment=np.array([[d.id for d in self.devices]]),
            env_options_overrides=dict(options))
        return backend(self.group.platform).compile_and_load(module, xc.DeviceList(self.devices), opts)

    def collectives(self, exe: Any) -> list[dict[str, Any]]:
        """The optimized module's collectives, each with whether it crosses hosts."""
        text = "\n".join(m.to_string() for m in exe.hlo_modules())
        partition_host = [d.process_index for d in self.devices]
        return hosts.collectives(text, partition_host)

    def execute(self, exe: Any, inputs: list[Any]) -> dict[int, list[Any]]:
        """Run once; this host's output shards: output index -> [(device id, array)]."""
        import jax
        import numpy as np
        from jax._src.sharding_impls import GSPMDSharding

        from xla_sentinel.xla.compiler import pad_to, padded_shape

        bufs = []
        for x, s in zip(inputs, exe.get_parameter_shardings(), strict=True):
            sharding = GSPMDSharding(self.devices, s)
            padded = pad_to(np.asarray(x), padded_shape(np.shape(x), sharding))
            bufs.append(jax.make_array_from_callback(padded.shape, sharding, _slicer(padded)))
        shards = exe.execute_sharded(bufs).disassemble_into_single_device_arrays()
        return {i: [(a.device.id, np.asarray(a)) for a in per_device] for i, per_device in enumerate(shards)}

    def gather(self, seq: int, mine: dict[int, list[Any]], exe: Any, shapes: list[tuple[int, ...]]) -> list[Any] | None:
        """Host 0: every host's shards (through the key-value store), each output put
        together as the executable's output sharding says; other hosts: None."""
        from jax._src.sharding_impls import GSPMDSharding

        from xla_sentinel.xla.compiler import assemble_shards

        kv = self._kv()
        if self.group.host != 0:
            kv.key_value_set_bytes(f"xs/{seq}/{self.group.host}", pickle.dumps(mine))
            return None
        by_output: dict[int, list[Any]] = {i: list(v) for i, v in mine.items()}
        for k in range(1, self.group.hosts):
            key = f"xs/{seq}/{k}"
            try:
                theirs = pickle.loads(kv.blocking_key_value_get_bytes(key, GATHER_MS))
            except Exception as e:  # the store's own error type: a host that never wrote
                raise hosts.HostMissing(k, f"host {k} sent no output shards ({e})") from None
            kv.key_value_delete(key)
            for i, v in theirs.items():
                by_output[i].extend(v)
        devices = {d.id: d for d in self.devices}
        outs = []
        for i, (s, shape) in enumerate(zip(exe.get_output_shardings(), shapes, strict=True)):
            per_device = [_Shard(devices[d], a) for d, a in by_output[i]]
            outs.append(assemble_shards(i, per_device, GSPMDSharding(self.devices, s), shape))
        return outs


def _slicer(array: Any) -> Callable[[Any], Any]:
    """The callback that cuts a device's shard out of a whole input."""
    return lambda index: array[index]


def _set_option(name: str, value: object) -> None:
    """jax.config.update, through a typed view: jax leaves it unannotated."""
    import jax

    update: Callable[[str, object], None] = jax.config.update
    update(name, value)


class _Shard:
    """A shard as compiler.assemble_shards reads one: its device and its values."""

    def __init__(self, device: Any, data: Any) -> None:
        self.device = device
        self.data = data

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np
        return np.asarray(self.data, dtype=dtype)


def _run(host: Host, request: dict[str, Any], reply: Any) -> dict[str, Any]:
    from xla_sentinel.xla.compiler import result_shapes

    module: str = request["module"]
    t0 = time.perf_counter()
    with cpu_account.stage(cpu_account.COMPILE):
        exe = host.compile(module, request["options"])
    compile_s = time.perf_counter() - t0
    with cpu_account.stage(COLLECTIVES):
        found = host.collectives(exe)
    reply({"stage": "running", "collectives": found})
    shapes = result_shapes(module)
    t1 = time.perf_counter()
    with cpu_account.stage(cpu_account.RUN):
        outputs = host.gather(request["seq"], host.execute(exe, request["inputs"]), exe, shapes)
    again = None
    if request.get("repeat"):
        # A fresh compile and run (protocol.Run `repeat`): every host, in lockstep.
        with cpu_account.stage(cpu_account.COMPILE):
            fresh = host.compile(module, request["options"])
        with cpu_account.stage(cpu_account.RUN):
            again = host.gather(request["seq"] + (1 << 40), host.execute(fresh, request["inputs"]), fresh, shapes)
    return {"outputs": outputs, "again": again, "compile_s": compile_s,
            "run_s": time.perf_counter() - t1, "collectives": found}


def serve() -> None:
    # Ctrl-C reaches the whole process group; the driver stops its hosts itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    group = hosts.GroupEnv.from_environ(os.environ)
    # Frames go to the real stdout only: fd 1 becomes the log (stderr) for everyone else.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    lock = threading.Lock()
    requests: queue.Queue[dict[str, Any] | None] = queue.Queue()
    threading.Thread(target=_reader, args=(sys.stdin.buffer, requests), daemon=True).start()

    # As every worker (server.serve): 64-bit types on, no persistent compilation cache
    # (injected transformations are not part of its key).
    _set_option("jax_enable_x64", True)
    _set_option("jax_enable_compilation_cache", False)
    if group.plugins:
        from xla_sentinel.xla import plugins
        plugins.register(list(group.plugins))
    host = Host(group)
    print(f"host {group.host}/{group.hosts}: jax.distributed up in {host.init_s:.2f} s, "
          f"{len(host.devices)} devices", file=sys.stderr, flush=True)
    # Every frame that answers carries this process's CPU by stage since the last one, as a
    # worker's answer does (core/cpu_account.py): the process clock, so gloo's and XLA's
    # threads count; the driver adds it to the campaign's account under the layout's name.
    account = cpu_account.ACCOUNT
    cpu_account.use_process_clock()
    account.add(cpu_account.STARTUP, time.process_time())
    _send(out, lock, {"ready": True, "init_s": host.init_s, "cpu": account.take()})
    while True:
        with account.stage(cpu_account.IDLE):
            request = requests.get()
        if request is None:
            break
        try:
            body = _run(host, request, lambda f: _send(out, lock, f))
            _send(out, lock, {"reply": body, "seq": request["seq"], "cpu": account.take()})
        except Exception as e:  # XLA's errors and ours: the driver tells them apart by type
            _send(out, lock, {"failed": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(),
                              "seq": request["seq"], "cpu": account.take()})
    out.close()


if __name__ == "__main__":
    serve()
