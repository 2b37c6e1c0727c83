"""The Python job client against a socket that stops reading, closes, and comes back."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from critmem.jobclient import OUTBOX_BYTES, JobClient


def listening(tmp_path: Path) -> tuple[socket.socket, JobClient]:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(tmp_path / "jobs.sock"))
    server.listen()
    return server, JobClient(tmp_path / "jobs.sock")


def read_jobs(peer: socket.socket) -> list[int]:
    """The jobs of every whole line the agent's end can read now."""
    peer.settimeout(0.05)
    data = b""
    while True:
        try:
            chunk = peer.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    assert data.endswith(b"\n") or not data, "a line arrived in part"
    return [json.loads(line)["job"] for line in data.splitlines()]


def test_reports_the_socket_cannot_take_yet_go_out_later_in_order(tmp_path: Path) -> None:
    server, client = listening(tmp_path)
    client.complete(0, at_ns=0)
    peer, _ = server.accept()
    jobs = 1
    while client.pending == 0:
        assert client.complete(jobs, at_ns=jobs)
        jobs += 1
    assert client.unsent == 0
    assert client.sent + client.pending == jobs
    seen = read_jobs(peer)
    client.drop_requests()
    assert client.pending == 0, "the next call wrote what was pending"
    seen += read_jobs(peer)
    assert seen == list(range(jobs)), "every report arrived once, whole and in order"
    assert (client.sent, client.unsent) == (jobs, 0)
    for end in (client, peer, server):
        end.close()


def test_a_full_outbox_loses_new_reports_and_counts_them(tmp_path: Path) -> None:
    server, client = listening(tmp_path)
    client.complete(0, at_ns=0)
    peer, _ = server.accept()
    total = 20_000
    lost = [job for job in range(1, total) if not client.complete(job, at_ns=job)]
    assert lost and client.unsent == len(lost), "an agent that never reads fills the outbox"
    assert 0 < len(client._outbox) <= OUTBOX_BYTES
    assert client.sent + client.unsent + client.pending == total
    seen = read_jobs(peer)
    client.close(linger_s=5)
    seen += read_jobs(peer)
    assert len(seen) == client.sent and client.sent + client.unsent == total
    assert seen == sorted(seen) and not set(seen) & set(lost)
    peer.close()
    server.close()


def test_pending_reports_for_a_closed_agent_count_as_unsent_and_the_next_agent_gets_whole_lines(tmp_path: Path) -> None:
    server, client = listening(tmp_path)
    client.complete(0, at_ns=0)
    peer, _ = server.accept()
    job = 1
    while client.pending == 0:
        client.complete(job, at_ns=job)
        job += 1
    peer.close()
    server.close()
    client.drop_requests()
    assert client.pending == 0 and client.unsent > 0
    assert client.sent + client.unsent == job
    (tmp_path / "jobs.sock").unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(tmp_path / "jobs.sock"))
    server.listen()
    time.sleep(client.retry_s)
    client.complete(999, at_ns=1)
    peer, _ = server.accept()
    assert read_jobs(peer) == [999]
    assert client.connects == 2
    for end in (client, peer, server):
        end.close()
