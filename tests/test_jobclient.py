"""The Python job client against a socket that stops reading, closes, and comes back; the
progress reporter a throughput command writes its work count with."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
from critmem.jobclient import OUTBOX_BYTES, PROGRESS_ENV, JobClient, ProgressReporter


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


def test_a_progress_reporter_outside_critmem_writes_nothing_and_never_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with ProgressReporter.from_env() as progress:
        progress.update(5)
    assert progress.path is None and progress.work_units == 5 and progress.failures == 0
    assert list(tmp_path.iterdir()) == []


def test_progress_goes_to_the_named_file_at_most_every_interval_and_the_final_count_on_close(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "progress.json"
    monkeypatch.setenv(PROGRESS_ENV, str(path))
    progress = ProgressReporter.from_env(min_interval_s=3600)
    progress.update(1)
    assert json.loads(path.read_text()) == {"work_units": 1}, "the first count goes out at once"
    progress.update(2)
    progress.update(3)
    assert json.loads(path.read_text()) == {"work_units": 1}, "then no more than once an interval"
    progress.close()
    assert json.loads(path.read_text()) == {"work_units": 3}
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"], "no temporary file is left"


def test_a_reader_never_sees_half_a_count(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    progress = ProgressReporter(path, min_interval_s=0)
    progress.update(0)
    seen: list[int] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.append(json.loads(path.read_text())["work_units"])

    reader = threading.Thread(target=read)
    reader.start()
    for units in range(1, 500):
        progress.update(units * 1_000_003)
    done.set()
    reader.join()
    assert seen and seen == sorted(seen), "every read was a whole count the writer had written"


def test_a_lost_progress_directory_is_counted_not_raised(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    directory.mkdir()
    with ProgressReporter(directory / "progress.json", min_interval_s=0) as progress:
        progress.update(1)
        shutil.rmtree(directory)
        progress.update(2)
    assert progress.failures == 2 and progress.written == 1, "the update and the close failed; the work went on"


@pytest.mark.parametrize("work_units", [-1, 2**64, 1.5, True, "3"])
def test_a_progress_count_must_be_a_non_negative_integer(tmp_path: Path, work_units: object) -> None:
    progress = ProgressReporter(tmp_path / "progress.json")
    with pytest.raises(ValueError, match="work_units must be an integer"):
        progress.update(work_units)  # type: ignore[arg-type]
    assert not (tmp_path / "progress.json").exists()
