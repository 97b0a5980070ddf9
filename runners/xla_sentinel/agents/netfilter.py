"""No network for agent code where no namespace can be made: a seccomp filter of its own.

In the agent pod's sandbox container, under the RuntimeDefault seccomp profile with no
capabilities, neither bubblewrap nor unshare may make a network namespace
(`Sandbox.detect`), and the containers of a pod share one network: a NetworkPolicy cannot
tell the sandbox from the runtime, which must reach the model endpoint and the API server.
What an unprivileged process may still do is narrow itself: with no_new_privs set, install
a seccomp filter that its children inherit across exec and cannot lift. This one refuses
(EPERM) every socket but a unix one, io_uring (whose ops can open sockets) and every
system call of a foreign ABI (x32, or 32-bit calls on a 64-bit kernel, whose socketcall
would slip past the socket rule); everything else, jax and XLA included, runs as before.

Applied by the sandbox server to each run it starts (sandbox_exchange.Server) when there is
no local sandbox; a local sandbox (bubblewrap, unshare) has a network namespace of its own
and needs netlink to set up its loopback, so the two are not combined.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import socket
import struct

# The native ABI's audit arch and system call numbers (linux/audit.h, asm/unistd.h).
_ABIS = {
    "x86_64": (0xC000003E, 41, 425),  # AUDIT_ARCH_X86_64, socket, io_uring_setup
    "aarch64": (0xC00000B7, 198, 425),  # AUDIT_ARCH_AARCH64
}
_X32_BIT = 0x40000000  # __X32_SYSCALL_BIT: x32 calls on x86_64 carry it

# Classic BPF (linux/filter.h) and seccomp (linux/seccomp.h).
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_NR, _ARCH, _ARG0 = 0, 4, 16

DESCRIPTION = "seccomp: no sockets but unix ones"


class NetfilterError(RuntimeError):
    """The filter cannot be installed here (another machine, or the kernel refused it)."""


def supported() -> bool:
    return platform.system() == "Linux" and platform.machine() in _ABIS


def program() -> bytes:
    """The filter: struct sock_filter[] for this machine's ABI."""
    if not supported():
        raise NetfilterError(f"no seccomp network filter for {platform.system()} {platform.machine()}")
    arch, sys_socket, sys_io_uring_setup = _ABIS[platform.machine()]
    deny = _RET_ERRNO | errno.EPERM
    # (code, jt, jf, k); a jump goes to pc + 1 + offset. ALLOW is 8, DENY 9.
    code = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ_K, 0, 7, arch),  # a foreign ABI: DENY
        (_LD_W_ABS, 0, 0, _NR),
        (_JGE_K, 5, 0, _X32_BIT),  # x32: DENY
        (_JEQ_K, 0, 2, sys_socket),  # not socket: to the io_uring test (7)
        (_LD_W_ABS, 0, 0, _ARG0),  # socket's domain (the low half of args[0])
        (_JEQ_K, 1, 2, socket.AF_UNIX),  # unix: ALLOW, else DENY
        (_JEQ_K, 1, 0, sys_io_uring_setup),  # io_uring: DENY, else ALLOW
        (_RET_K, 0, 0, _RET_ALLOW),
        (_RET_K, 0, 0, deny),
    ]
    return b"".join(struct.pack("=HBBI", *ins) for ins in code)


def deny_network() -> None:
    """Narrow this process (and every child it starts) to unix sockets. Meant for a
    subprocess's preexec_fn: it changes the calling process for good."""
    filt = program()
    buf = ctypes.create_string_buffer(filt, len(filt))

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Prog(len(filt) // 8, ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise NetfilterError(f"prctl(PR_SET_NO_NEW_PRIVS): {errno.errorcode.get(ctypes.get_errno())}")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise NetfilterError(f"prctl(PR_SET_SECCOMP): {errno.errorcode.get(ctypes.get_errno())}")
