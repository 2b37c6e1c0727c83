"""A client for the critmem agent's job socket (protocol version 1).

A soft real-time process reports each job's release, completion or drop; the agent may ask it
to drop a job (a controller's DropJob). Lines are JSON objects, one per line, on a Unix
stream socket; the agent identifies the sender by SO_PEERCRED, so a process can report only
for the cgroup it is in. Times are CLOCK_MONOTONIC nanoseconds (`time.monotonic_ns()`).

The client never blocks and never raises on a lost agent. A message the socket cannot take at
once (the agent busy, or the kernel short of socket memory: EAGAIN, ENOBUFS) waits in an outbox
of `OUTBOX_BYTES` and goes out, in order, on the next send or `drop_requests()`. A message that
cannot be sent at all (no agent, agent restarting, outbox full) is counted in `unsent`, and the
client reconnects (at most every `retry_s`) on the next send, so a workload keeps running while
the agent restarts. Every message ends up in exactly one of `sent`, `unsent` and `pending`;
`close()` gives what is pending a moment (`linger_s`) to go out.

    >>> from critmem.jobclient import JobClient
    >>> client = JobClient("/run/critmem/jobs.sock")
    >>> client.release(job=0, deadline_ns=time.monotonic_ns() + 20_000_000)
    >>> if 0 in client.drop_requests(): ...   # abandon the job
    >>> client.complete(job=0)
    >>> client.close()
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from typing import Any, Self

PROTOCOL_VERSION = 1
# The agent refuses longer lines.
MAX_LINE_BYTES = 512
# Set by `critmem run --platform linux` for a task's command (with CRITMEM_GROUP,
# CRITMEM_TASK, CRITMEM_PERIOD_NS, CRITMEM_DEADLINE_NS, CRITMEM_WCET_NS and CRITMEM_SEED).
SOCKET_ENV = "CRITMEM_JOB_SOCKET"
# What a client holds for an agent that is not reading (as the Rust and C clients).
OUTBOX_BYTES = 16 * 1024


def format_message(op: str, job: int, *, deadline_ns: int | None = None, at_ns: int | None = None, group: str | None = None) -> bytes:
    """One protocol line. `op` is `release` (needs `deadline_ns`), `complete` or `drop`."""
    if op not in ("release", "complete", "drop"):
        raise ValueError(f"unknown op {op!r} (expected release, complete or drop)")
    if (op == "release") != (deadline_ns is not None):
        raise ValueError("deadline_ns is required for release and not allowed otherwise")
    if not 0 <= job < 2**64:
        raise ValueError(f"job must be a u64 (got {job})")
    message: dict[str, Any] = {"v": PROTOCOL_VERSION, "op": op, "job": job}
    if deadline_ns is not None:
        message["deadline_ns"] = deadline_ns
    if at_ns is not None:
        message["at_ns"] = at_ns
    if group is not None:
        message["group"] = group
    line = (json.dumps(message, separators=(",", ":")) + "\n").encode()
    if len(line) > MAX_LINE_BYTES:
        raise ValueError(f"message is {len(line)} bytes, longer than {MAX_LINE_BYTES}")
    return line


def parse_drop_request(line: bytes) -> int | None:
    """The job number of an agent's `{"v":1,"op":"drop","job":N}` line, else None."""
    try:
        value = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(value, dict) or value.get("v") != PROTOCOL_VERSION or value.get("op") != "drop":
        return None
    job = value.get("job")
    return job if isinstance(job, int) and not isinstance(job, bool) and job >= 0 else None


class JobClient:
    """The workload's end of the job socket; see the module documentation."""

    def __init__(self, path: str | os.PathLike[str], *, retry_s: float = 0.2) -> None:
        self.path = os.fspath(path)
        self.retry_s = retry_s
        self.sent = 0
        self.unsent = 0
        self.connects = 0
        self._sock: socket.socket | None = None
        self._last_attempt: float | None = None
        self._inbox = b""
        # Whole lines not yet written; only the first may be partly written.
        self._outbox = bytearray()

    @classmethod
    def from_env(cls, *, retry_s: float = 0.2) -> JobClient:
        """The client of the socket named by `CRITMEM_JOB_SOCKET`."""
        path = os.environ.get(SOCKET_ENV)
        if not path:
            raise RuntimeError(f"{SOCKET_ENV} is not set: run this program as a task's command under critmem")
        return cls(path, retry_s=retry_s)

    def _connect(self) -> socket.socket | None:
        if self._sock is not None:
            return self._sock
        now = time.monotonic()
        if self._last_attempt is not None and now - self._last_attempt < self.retry_s:
            return None
        self._last_attempt = now
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            return None
        sock.setblocking(False)
        self._sock = sock
        self.connects += 1
        return sock

    def _disconnect(self) -> None:
        """The connection is gone: what was pending for it is lost (a partial line must not
        start a new connection)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self.unsent += self._outbox.count(b"\n")
        self._outbox.clear()

    def _flush(self) -> None:
        """Writes what the socket takes now."""
        while self._outbox and self._sock is not None:
            try:
                n = self._sock.send(self._outbox)
            except InterruptedError:
                continue
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno == errno.ENOBUFS:
                    return
                self._disconnect()
                return
            if n == 0:
                self._disconnect()
                return
            self.sent += self._outbox.count(b"\n", 0, n)
            del self._outbox[:n]

    @property
    def pending(self) -> int:
        """Messages in the outbox, not yet written whole."""
        return self._outbox.count(b"\n")

    def send(self, line: bytes) -> bool:
        """Sends one formatted line; returns False when it is lost (counted in `unsent`), True
        when it went out or waits in the outbox."""
        sock = self._connect()
        if sock is None or len(self._outbox) + len(line) > OUTBOX_BYTES:
            self.unsent += 1
            return False
        self._outbox += line
        self._flush()
        return True

    def release(self, job: int, deadline_ns: int, at_ns: int | None = None) -> bool:
        """Job `job` was released; its absolute deadline is `deadline_ns` (CLOCK_MONOTONIC)."""
        return self.send(format_message("release", job, deadline_ns=deadline_ns, at_ns=_now(at_ns)))

    def complete(self, job: int, at_ns: int | None = None) -> bool:
        return self.send(format_message("complete", job, at_ns=_now(at_ns)))

    def drop(self, job: int, at_ns: int | None = None) -> bool:
        """Job `job` was abandoned (on the agent's request or the workload's own decision)."""
        return self.send(format_message("drop", job, at_ns=_now(at_ns)))

    def drop_requests(self) -> list[int]:
        """Jobs the agent asked to drop since the last call; never blocks. Also writes what is
        pending."""
        self._flush()
        while (sock := self._sock) is not None:
            try:
                chunk = sock.recv(4096)
            except BlockingIOError:
                break
            except InterruptedError:
                continue
            except OSError:
                self._disconnect()
                break
            if not chunk:
                self._disconnect()
                break
            self._inbox += chunk
        jobs: list[int] = []
        *lines, self._inbox = self._inbox.split(b"\n")
        for line in lines:
            job = parse_drop_request(line)
            if job is not None:
                jobs.append(job)
        return jobs

    def close(self, linger_s: float = 0.2) -> None:
        """Waits up to `linger_s` for the agent to take what is pending, then closes; what is
        still pending then counts as unsent."""
        end = time.monotonic() + linger_s
        self._flush()
        while self._outbox and self._sock is not None and time.monotonic() < end:
            time.sleep(0.001)
            self._flush()
        self._disconnect()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _now(at_ns: int | None) -> int:
    return time.monotonic_ns() if at_ns is None else at_ns
