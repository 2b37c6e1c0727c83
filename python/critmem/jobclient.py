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

A throughput program reports how much work it has done instead: `ProgressReporter` writes the
cumulative count to the file `critmem run --platform linux` names in `CRITMEM_PROGRESS_FILE`,
and the run's task row shows the last count as `work_units` and `work_units_per_s`.

    >>> from critmem.jobclient import ProgressReporter
    >>> with ProgressReporter.from_env() as progress:
    ...     for done in range(1, 1_000_001):
    ...         progress.update(done)   # written at most every 0.1 s; the last on close
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import threading
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
# Set by `critmem run --platform linux` for a task's command: the file its progress goes to.
PROGRESS_ENV = "CRITMEM_PROGRESS_FILE"


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


class ProgressReporter:
    """Writes a command's cumulative work count to its progress file as `{"work_units": N}`.

    Each write goes to a temporary file in the same directory, renamed over the progress file,
    so critmem never reads half a count. `update()` writes at most every `min_interval_s`;
    `close()` writes the final count. Without a path (`CRITMEM_PROGRESS_FILE` unset) it only
    keeps the count. I/O errors (the run's directory removed at its end, a full disk) are
    counted in `failures`, never raised: the work goes on.
    """

    def __init__(self, path: str | os.PathLike[str] | None, *, min_interval_s: float = 0.1) -> None:
        if not (isinstance(min_interval_s, int | float) and min_interval_s >= 0 and min_interval_s < float("inf")):
            raise ValueError(f"min_interval_s must be a finite number of seconds >= 0 (got {min_interval_s!r})")
        self.path = None if path is None else os.fspath(path)
        self.min_interval_s = float(min_interval_s)
        self.work_units = 0
        # The count the file holds, once written.
        self.written: int | None = None
        self.failures = 0
        self._last_write_s: float | None = None

    @classmethod
    def from_env(cls, *, min_interval_s: float = 0.1) -> ProgressReporter:
        """The reporter of the file named by `CRITMEM_PROGRESS_FILE`; one that writes nothing
        when it is unset (the program runs outside critmem)."""
        return cls(os.environ.get(PROGRESS_ENV) or None, min_interval_s=min_interval_s)

    def update(self, work_units: int) -> None:
        """`work_units` done so far (cumulative, a non-negative integer)."""
        if isinstance(work_units, bool) or not isinstance(work_units, int) or not 0 <= work_units < 2**64:
            raise ValueError(f"work_units must be an integer from 0 to 2**64 - 1 (got {work_units!r})")
        self.work_units = work_units
        now_s = time.monotonic()
        if self._last_write_s is None or now_s - self._last_write_s >= self.min_interval_s:
            self._write(now_s)

    def close(self) -> None:
        """Writes the final count, if the file does not hold it yet."""
        if self.written != self.work_units:
            self._write(time.monotonic())

    def _write(self, now_s: float) -> None:
        self._last_write_s = now_s
        if self.path is None:
            return
        units = self.work_units
        directory, name = os.path.split(self.path)
        # Unique per process and thread, so concurrent writers never share a temporary file.
        temporary = os.path.join(directory, f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
        data = json.dumps({"work_units": units}).encode()
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(temporary, self.path)
        except OSError:
            self.failures += 1
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            return
        self.written = units

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
