"""Agent-written code with no network and none of the caller's files: `xla-sentinel mcp
--sandbox` (docs/agents.md, "The local sandbox").

What runs agent code under it: the loading of a run_test snippet or a rewrite (the snippet
runs when it is traced), and a reproducer's child process with an agent's pass plugin
(`gate.run_script`). Each runs in new network, mount and PID namespaces under a root of its
own: the system's programs and libraries, this interpreter's environment and this package
read-only, the one folder it works in writable (or read-only, for a reproducer), a fresh
/tmp, its own /proc; nothing else of the machine's files (the campaign's store, the home
folder, tokens, the caller's checkout but its `runners/`), no network but a loopback that is
down, a cleared environment, and PID 1 is itself, so /proc/1/environ is its own, cleared.

With bubblewrap installed (`bwrap`, Debian's `bubblewrap`) it builds that root; otherwise
`unshare` (util-linux) makes the namespaces, with a user namespace where this process is
not root, and this module's `main` builds the root inside them (mount, chroot, exec).
`Sandbox.detect` says which, or why neither works here.

In an agent pod (kind "container"): the command runs in the pod's `sandbox` container
instead, `xla-sentinel sandbox-server` (agents/sandbox_exchange.py), chosen where
$XLA_SENTINEL_SANDBOX_SOCKET names its socket.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from xla_sentinel.core.errors import UserError

# The only variables agent code sees (values from here, or fixed).
ENV_KEEP = ("PATH", "LANG", "LC_ALL", "JAX_PLATFORMS", "XLA_FLAGS")
# On the runtime side of an agent pod: run agent code through the sandbox container's server
# at this socket (agents/sandbox_exchange.py).
SOCKET_ENV = "XLA_SENTINEL_SANDBOX_SOCKET"
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/sys")


class SandboxError(UserError, RuntimeError):
    """No way to confine agent code on this machine, where --sandbox asked for one."""


def _code_paths() -> list[Path]:
    """What the confined interpreter needs to run: its environment and this package (an
    editable install's source folder too)."""
    import xla_sentinel

    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(xla_sentinel.__file__).resolve().parents[1]}
    return sorted({p.resolve() for p in paths if p.exists()})


def _env(extra: dict[str, str] | None, home: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update({"HOME": str(home), "TMPDIR": "/tmp", "JAX_PLATFORMS": "cpu", "PYTHONDONTWRITEBYTECODE": "1"})
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class Sandbox:
    kind: str  # "bwrap", "unshare" or "container"
    tool: str  # its path (a container's: the sandbox server's socket)

    @staticmethod
    def detect() -> Sandbox:
        """The pod's sandbox container where $XLA_SENTINEL_SANDBOX_SOCKET names it, else
        bubblewrap, else unshare, whichever can make the namespaces here. Each is tried, not
        assumed from being installed: both need a user namespace, which a container under
        the RuntimeDefault seccomp profile without capabilities is refused (unshare: "Operation
        not permitted" in the agent pod's sandbox container on the real node)."""
        if os.environ.get(SOCKET_ENV):
            return Sandbox("container", os.environ[SOCKET_ENV])
        refused = []
        for kind, flags in (("bwrap", ["--unshare-all", "--ro-bind", "/", "/"]), ("unshare", _unshare_flags())):
            tool = shutil.which(kind)
            if tool is None:
                continue
            probe = subprocess.run([tool, *flags, "true"], capture_output=True, text=True, timeout=30)
            if probe.returncode == 0:
                return Sandbox(kind, tool)
            refused.append(f"{kind} cannot make namespaces here ({probe.stderr.strip()[-200:]})")
        if refused:
            raise SandboxError(f"--sandbox: {'; '.join(refused)}")
        raise SandboxError("--sandbox: neither bwrap (bubblewrap) nor unshare (util-linux) is installed")

    def argv(self, argv: Sequence[str], work: Path, *, writable: bool = True,
             readonly: Sequence[Path] = (), env: dict[str, str] | None = None,
             seconds: float | None = None) -> list[str]:
        """`argv` confined: run in `work` (writable or not), with `readonly` besides the
        system's and the interpreter's files, and only `env` (and ENV_KEEP) set. `seconds`:
        the caller's own time limit, which the sandbox container enforces too (it kills the
        run's process group there; here the caller's kill of this process does)."""
        work = work.resolve()
        if self.kind == "container":
            out = [sys.executable, "-m", "xla_sentinel.agents.sandbox_exchange", "--socket", self.tool,
                   "--work", str(work)]
            if not writable:
                out.append("--readonly-work")
            for p in readonly:
                out += ["--ro", str(Path(p).resolve())]
            for k, v in (env or {}).items():
                out += ["--env", f"{k}={v}"]
            if seconds is not None:
                out += ["--seconds", repr(float(seconds))]
            return [*out, "--", *argv]
        ro = [*(Path(p) for p in SYSTEM if Path(p).exists()), *_code_paths(), *(Path(p).resolve() for p in readonly)]
        environment = _env(env, work)
        if self.kind == "bwrap":
            out = [self.tool, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                   "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
            for p in ro:
                out += ["--ro-bind", str(p), str(p)]
            out += ["--bind" if writable else "--ro-bind", str(work), str(work), "--chdir", str(work)]
            for k, v in environment.items():
                out += ["--setenv", k, v]
            return [*out, *argv]
        inner = [sys.executable, "-m", "xla_sentinel.agents.sandbox", "--work", str(work)]
        if not writable:
            inner.append("--readonly-work")
        for p in ro:
            inner += ["--ro", str(p)]
        for k, v in environment.items():
            inner += ["--env", f"{k}={v}"]
        return [self.tool, *_unshare_flags(), *inner, "--", *argv]


# Inside the sandbox: load a snippet or module file (SOURCE SEED DEST) as the campaign loads
# corpus files, and save the Program to DEST in the writable work folder. Run as a string:
# the loader imports jax, which this package does not (pyproject's import contracts).
LOAD = ("import sys; from pathlib import Path; from xla_sentinel.programs.corpus import load; "
        "load(Path(sys.argv[1]), int(sys.argv[2])).save(Path(sys.argv[3]))")


def _unshare_flags() -> list[str]:
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    return ["--net", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private", *user]


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def main(args: list[str]) -> None:
    """Inside unshare's namespaces: build the root (a tmpfs; the read-only folders bound
    into it, the work folder, /tmp, /proc, /dev), chroot into it and exec the command with
    only the given environment. PID 1 of the namespace is the command itself."""
    split = args.index("--")
    opts, command = args[:split], args[split + 1:]
    ro, env, work, writable = [], {}, "", True
    i = 0
    while i < len(opts):
        if opts[i] == "--readonly-work":
            writable = False
            i += 1
            continue
        key, value = opts[i], opts[i + 1]
        if key == "--ro":
            ro.append(value)
        elif key == "--env":
            name, _, val = value.partition("=")
            env[name] = val
        elif key == "--work":
            work = value
        i += 2
    # The new root on a folder of the machine's that nothing bound here sits under (in this
    # private mount namespace: the machine's own folder is untouched), else a fresh one.
    sources = [*ro, work]
    free = [d for d in ("/mnt", "/media", "/srv") if os.path.isdir(d)
            and not any(s == d or s.startswith(d + "/") for s in sources)]
    root = free[0] if free else tempfile.mkdtemp(prefix="xla-sentinel-sandbox-")
    _mount("-t", "tmpfs", "-o", "mode=755", "sandbox", root)

    def bind(path: str, readonly: bool) -> None:
        target = root + path
        if os.path.isdir(path):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        _mount("--rbind", path, target)
        if readonly:
            _mount("-o", "remount,bind,ro", target)

    # A fresh /tmp first, then the folders bound over it: the venv or the checkout may live
    # under /tmp (a CI clone in /tmp/...), and a tmpfs mounted after them would hide them.
    os.makedirs(root + "/tmp", exist_ok=True)
    _mount("-t", "tmpfs", "-o", "mode=1777", "tmp", root + "/tmp")
    for path in sorted(set(ro)):
        bind(path, True)
    bind(work, not writable)
    os.makedirs(root + "/dev", exist_ok=True)
    for dev in ("null", "zero", "random", "urandom"):
        bind(f"/dev/{dev}", False)
    os.makedirs(root + "/proc", exist_ok=True)
    _mount("-t", "proc", "proc", root + "/proc")
    os.chroot(root)
    os.chdir(work)
    # The command's name is looked up on the sandbox's own PATH, as bwrap does (execve would
    # take a bare `sleep` for a file in the work folder).
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main(sys.argv[1:])
