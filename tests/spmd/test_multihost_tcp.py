"""A multi-host group whose host 1 is served over TCP (worker/host_link.py): the cluster's
transport, on loopback. The driver (HostGroup with `remote`) runs host 0 itself and
accepts host 1's supervisor (`xla-sentinel host`, the process a JobSet's pod 1 runs) on
its listener; the supervisor starts a fresh host process for every generation of the
group and relays its frames. Real jax.distributed, gloo between the two processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from spmd_programs import SLOW_PLUGIN, TIMEOUT, inputs_for, one_op_graph, with_region
from xla_sentinel.worker import host_link
from xla_sentinel.worker.client import WorkerHung
from xla_sentinel.worker.host_link import RemoteHosts
from xla_sentinel.worker.hosts import HostGroup, Layout
from xla_sentinel.worker.protocol import Lower, Run

HEARTBEAT_S = 10
TOKEN = "restart-0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Remote:
    """The driver's group and the supervisors the test starts for host 1 (a pod each)."""

    def __init__(self, group: HostGroup, logs: Path) -> None:
        self.group = group
        self.logs = logs
        self.supervisors: list[subprocess.Popen[bytes]] = []
        self.lost: list[float] = []

    def supervise(self, token: str = TOKEN) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"supervisor{len(self.supervisors)}.log", "wb")  # noqa: SIM115 (the child keeps it)
        sup = subprocess.Popen([sys.executable, "-m", "xla_sentinel.cli.entry", "host",
                                "--driver", f"127.0.0.1:{self.group.listen_port}", "--host", "1",
                                "--token", token, "--connect-seconds", "60"],
                               stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.supervisors.append(sup)
        return sup

    def host_process(self, sup: subprocess.Popen[bytes]) -> int:
        """The host process the supervisor runs now (its one child)."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            children = Path(f"/proc/{sup.pid}/task/{sup.pid}/children").read_text().split()
            if children:
                return int(children[0])
            time.sleep(0.05)
        raise AssertionError("the supervisor started no host process")


@pytest.fixture(scope="module")
def remote(slow_flag, tmp_path_factory) -> Iterator[Remote]:
    logs = tmp_path_factory.mktemp("tcp-logs")
    port = _free_port()
    hosts = RemoteHosts(listen="127.0.0.1:0", coordinator=f"127.0.0.1:{port}", bind=f"127.0.0.1:{port}",
                        token=TOKEN)
    lost: list[float] = []
    group = HostGroup(Layout(2, 2), [SLOW_PLUGIN], logs, heartbeat_s=HEARTBEAT_S, remote=hosts,
                      on_lost=lambda: lost.append(time.monotonic()))
    r = Remote(group, logs)
    r.lost = lost
    r.supervise()
    try:
        yield r
    finally:
        group.close()
        for sup in r.supervisors:
            if sup.poll() is None:
                sup.kill()
            sup.wait(30)


def _psum(probe, seed: int) -> tuple[str, list[np.ndarray]]:
    graph = with_region(one_op_graph((4, 6)), [2, 2], {"kind": "psum_broadcast", "axis": "x", "source": 0},
                        inputs=[["x", None], [None, None]], output=[None, None])
    return str(probe.call(Lower(graph), TIMEOUT).module), inputs_for(graph, seed=seed)


def test_a_host_over_tcp_computes_what_one_process_computes(probe, remote) -> None:
    module, inputs = _psum(probe, seed=3)

    on_hosts = remote.group.call(Run(module, inputs, {}), TIMEOUT).outputs
    one_process = probe.call(Run(module, inputs, {}), TIMEOUT).outputs

    assert on_hosts[0].tobytes() == one_process[0].tobytes()
    assert np.array_equal(on_hosts[0], inputs[0] + inputs[1])
    assert remote.group.cross_host_programs >= 1  # the all-reduce crossed the TCP-served host
    assert len(remote.group.pids()) == 1  # host 0 alone runs here


def test_a_connection_with_another_token_is_refused_and_the_group_goes_on(probe, remote) -> None:
    stale = remote.supervise(token="restart-7")  # a pod of another restart of the slice
    try:
        deadline = time.monotonic() + 30
        while not remote.group._listener.refused and time.monotonic() < deadline:  # noqa: SLF001
            time.sleep(0.1)
        assert any("token" in line for line in remote.group._listener.refused)  # noqa: SLF001
        module, inputs = _psum(probe, seed=4)
        assert np.array_equal(remote.group.call(Run(module, inputs, {}), TIMEOUT).outputs[0],
                              inputs[0] + inputs[1])
    finally:
        stale.kill()
        stale.wait(30)
        remote.supervisors.remove(stale)


def _stall_host_1_and(slow_flag: Path, action) -> threading.Thread:
    """Host 1 stalls in its compile (host 0 goes on into the all-reduce); then `action`."""
    slow_flag.touch()
    compiling = Path(f"{slow_flag}.compiling")
    compiling.unlink(missing_ok=True)

    def run() -> None:
        deadline = time.monotonic() + TIMEOUT
        while not compiling.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # host 0 compiled too and waits in the collective by now
        action()

    t = threading.Thread(target=run)
    t.start()
    return t


def test_a_remote_host_process_killed_mid_program_is_a_hang_naming_it(probe, remote, slow_flag) -> None:
    module, inputs = _psum(probe, seed=5)
    remote.group.call(Run(module, inputs, {}), TIMEOUT)  # the group is up
    sup = remote.supervisors[0]
    victim = remote.host_process(sup)
    local = remote.group.pids()
    restarts, lost = remote.group.restarts, len(remote.lost)

    killer = _stall_host_1_and(slow_flag, lambda: os.kill(victim, 9))
    started = time.monotonic()
    try:
        with pytest.raises(WorkerHung) as hung:
            remote.group.call(Run(module, inputs, {}), TIMEOUT)
    finally:
        killer.join()
        slow_flag.unlink()
    took = time.monotonic() - started

    message = str(hung.value)
    # The supervisor's exit frame carried the host's exit: the same verdict as a local host.
    assert "host 1 (exit -9) lost" in message, message
    assert "hosts [0] waited" in message and "all-reduce" in message and "across hosts" in message, message
    assert took < TIMEOUT / 2
    assert remote.group.restarts == restarts + 1
    assert len(remote.lost) == lost  # its pod is still there: not a lost slice
    assert all(not Path(f"/proc/{pid}").exists() for pid in [victim, *local])
    assert sup.poll() is None  # the supervisor serves the next generation
    again = remote.group.call(Run(module, inputs, {}), TIMEOUT).outputs
    assert np.array_equal(again[0], inputs[0] + inputs[1])
    assert remote.host_process(sup) != victim


def test_a_remote_hosts_pod_lost_mid_program_stops_instead_of_a_finding(probe, remote, slow_flag) -> None:
    module, inputs = _psum(probe, seed=6)
    remote.group.call(Run(module, inputs, {}), TIMEOUT)
    sup = remote.supervisors[0]
    victim = remote.host_process(sup)
    lost = len(remote.lost)

    # The whole "pod" goes: its supervisor killed, no exit frame; the host it ran ends by
    # itself when its stdin closes.
    killer = _stall_host_1_and(slow_flag, lambda: os.kill(sup.pid, 9))
    try:
        with pytest.raises(WorkerHung) as hung:
            remote.group.call(Run(module, inputs, {}), TIMEOUT)
    finally:
        killer.join()
        slow_flag.unlink()

    assert "host 1 (exit None) lost" in str(hung.value), str(hung.value)
    assert len(remote.lost) == lost + 1  # the campaign's stop: the Assessor records no finding
    sup.wait(30)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{victim}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{victim}").exists()  # no host left behind without its supervisor
    remote.supervisors.remove(sup)
    fresh = remote.supervise()  # the restarted slice's pod 1
    assert np.array_equal(remote.group.call(Run(module, inputs, {}), TIMEOUT).outputs[0], inputs[0] + inputs[1])
    assert fresh.poll() is None


def test_a_remote_hosts_pod_lost_between_programs_stops_at_the_next_one(probe, remote) -> None:
    module, inputs = _psum(probe, seed=7)
    remote.group.call(Run(module, inputs, {}), TIMEOUT)
    sup = remote.supervisors[-1]
    lost = len(remote.lost)
    sup.kill()
    sup.wait(30)
    remote.supervisors.remove(sup)
    time.sleep(1.0)  # the driver reads the end of its connection

    started = time.monotonic()
    with pytest.raises(WorkerHung, match="host 1's pod is gone"):
        remote.group.call(Run(module, inputs, {}), TIMEOUT)
    assert time.monotonic() - started < 10  # not a wait for a host that will not come
    assert len(remote.lost) == lost + 1
    assert remote.group.pids() == []  # host 0 ended too
    remote.supervise()
    assert np.array_equal(remote.group.call(Run(module, inputs, {}), TIMEOUT).outputs[0], inputs[0] + inputs[1])


def test_closing_the_group_ends_the_supervisor_with_exit_0(probe, remote) -> None:
    # Last in the module: a closed group stays closed.
    module, inputs = _psum(probe, seed=9)
    remote.group.call(Run(module, inputs, {}), TIMEOUT)
    sup = remote.supervisors[-1]
    # The last generation ended before the campaign did (its host 1 killed): the
    # supervisor, connecting again, is told the campaign is done rather than left waiting.
    os.kill(remote.host_process(sup), 9)
    time.sleep(1.0)
    remote.group.close()
    assert sup.wait(60) == 0  # its pod completes
    assert remote.group.pids() == []


def test_a_supervisor_gives_up_with_exit_1_when_no_driver_answers(tmp_path) -> None:
    started = time.monotonic()
    code = host_link.serve_remote(f"127.0.0.1:{_free_port()}", 1, connect_s=1.5, log_dir=tmp_path)
    assert code == 1 and time.monotonic() - started < 10


def test_remote_hosts_from_the_environment_refuse_a_bad_address() -> None:
    good = RemoteHosts("0.0.0.0:8483", "pod-0.slice:8482", "0.0.0.0:8482", "3")
    assert RemoteHosts.from_environ(good.environment()) == good
    assert RemoteHosts.from_environ({}) is None
    bad = {host_link.REMOTE_ENV: '{"listen": "0.0.0.0", "coordinator": "a:1", "bind": "b:2"}'}
    with pytest.raises(ValueError, match="is not host:port"):
        RemoteHosts.from_environ(bad)


def test_a_supervisor_names_the_coordinator_by_the_address_it_reached_the_driver_at() -> None:
    from xla_sentinel.worker.hosts import COORDINATOR_ENV, HOST_ENV

    env = {COORDINATOR_ENV: "mh-main-s0-hosts-0-0.mh-main-s0:8482", HOST_ENV: "1"}
    got = host_link.coordinator_by_address(env, "mh-main-s0-hosts-0-0.mh-main-s0", "10.244.0.7")
    assert got == {COORDINATOR_ENV: "10.244.0.7:8482", HOST_ENV: "1"}
    assert host_link.coordinator_by_address(env, "mh-main-s0-hosts-0-0.mh-main-s0", "fd00::7")[
        COORDINATOR_ENV] == "[fd00::7]:8482"
    # A coordinator elsewhere than the driver's pod is left as named.
    assert host_link.coordinator_by_address(env, "other", "10.244.0.7") == env
