//! The job-protocol client for Rust workloads (the Python one is `critmem.jobclient`, the C
//! one `include/critmem_job.h`; all three speak protocol version 1, see [`crate::protocol`],
//! and behave alike).
//!
//! ```no_run
//! use critmem_linux::client::{monotonic_ns, JobClient, JobOp};
//! use std::time::Duration;
//! let mut client = JobClient::new("/run/critmem/jobs.sock".into());
//! let release_ns = monotonic_ns();
//! client.send(JobOp::Release { deadline_ns: release_ns + 20_000_000 }, 0, release_ns);
//! // ... work, checking now and then:
//! if client.drop_requests().contains(&0) {
//!     client.send(JobOp::Drop, 0, monotonic_ns());
//! } else {
//!     client.send(JobOp::Complete, 0, monotonic_ns());
//! }
//! // At exit: give the agent a moment to take what is still pending.
//! client.close(Duration::from_millis(200));
//! ```
//!
//! The client never blocks and never fails. A message the socket cannot take at once (the
//! agent busy, or the kernel short of socket memory: EAGAIN, ENOBUFS) waits in an outbox of
//! [`OUTBOX_BYTES`] and goes out, in order, on the next send or [`JobClient::drop_requests`].
//! A message that cannot be sent at all (no agent, agent restarting, outbox full) is counted in
//! `unsent`, and the next send reconnects (at most every 200 ms). Every message ends up in
//! exactly one of `sent`, `unsent` and [`JobClient::pending`].

pub use crate::clock::monotonic_ns;
pub use crate::protocol::JobOp;
use crate::protocol::{format_message, JobMessage};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What a client holds for an agent that is not reading: 32 of the longest lines the agent
/// accepts, a few hundred typical reports.
pub const OUTBOX_BYTES: usize = 16 * 1024;
const RETRY_CONNECT: Duration = Duration::from_millis(200);

/// The workload's end of the job socket; see the module documentation.
pub struct JobClient {
    path: PathBuf,
    stream: Option<UnixStream>,
    last_attempt: Option<Instant>,
    inbox: Vec<u8>,
    /// Whole lines not yet written; only the first may be partly written.
    outbox: Vec<u8>,
    /// Messages whose last byte has been written.
    pub sent: u64,
    pub unsent: u64,
    pub connects: u64,
}

/// A socket that cannot take more for the moment: the message stays in the outbox.
fn transient(e: &std::io::Error) -> bool {
    e.kind() == ErrorKind::WouldBlock || e.raw_os_error() == Some(nix::libc::ENOBUFS)
}

fn lines_in(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

impl JobClient {
    pub fn new(path: PathBuf) -> Self {
        JobClient { path, stream: None, last_attempt: None, inbox: Vec::new(), outbox: Vec::new(), sent: 0, unsent: 0, connects: 0 }
    }

    fn ensure_connected(&mut self) {
        if self.stream.is_some() || self.last_attempt.is_some_and(|t| t.elapsed() < RETRY_CONNECT) {
            return;
        }
        self.last_attempt = Some(Instant::now());
        if let Ok(stream) = UnixStream::connect(&self.path) {
            if stream.set_nonblocking(true).is_ok() {
                self.stream = Some(stream);
                self.connects += 1;
            }
        }
    }

    /// The connection is gone: what was pending for it is lost (a partial line must not start
    /// a new connection).
    fn disconnect(&mut self) {
        self.stream = None;
        self.unsent += lines_in(&self.outbox);
        self.outbox.clear();
    }

    /// Writes what the socket takes now.
    fn flush(&mut self) {
        while !self.outbox.is_empty() {
            let Some(stream) = self.stream.as_mut() else { return };
            match stream.write(&self.outbox) {
                Ok(0) => self.disconnect(),
                Ok(n) => {
                    self.sent += lines_in(&self.outbox[..n]);
                    self.outbox.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if transient(&e) => return,
                Err(_) => self.disconnect(),
            }
        }
    }

    /// Sends one message: written now, held in the outbox, or lost and counted in `unsent`.
    pub fn send(&mut self, op: JobOp, job: u64, at_ns: u64) {
        self.ensure_connected();
        let line = format_message(&JobMessage { op, job, at_ns: Some(at_ns), group: None });
        if self.stream.is_none() || self.outbox.len() + line.len() > OUTBOX_BYTES {
            self.unsent += 1;
            return;
        }
        self.outbox.extend_from_slice(line.as_bytes());
        self.flush();
    }

    /// Messages in the outbox, not yet written whole.
    pub fn pending(&self) -> u64 {
        lines_in(&self.outbox)
    }

    /// Waits up to `linger` for the agent to take what is pending, then closes the connection;
    /// what is still pending then counts as unsent.
    pub fn close(&mut self, linger: Duration) {
        let started = Instant::now();
        self.flush();
        while !self.outbox.is_empty() && self.stream.is_some() && started.elapsed() < linger {
            std::thread::sleep(Duration::from_millis(1));
            self.flush();
        }
        self.disconnect();
    }

    /// Jobs the agent asked to drop since the last call (`{"v":1,"op":"drop","job":N}`). Also
    /// writes what is pending.
    pub fn drop_requests(&mut self) -> Vec<u64> {
        self.flush();
        let mut chunk = [0u8; 1024];
        while let Some(stream) = self.stream.as_mut() {
            match stream.read(&mut chunk) {
                Ok(0) => self.disconnect(),
                Ok(n) => self.inbox.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => self.disconnect(),
            }
        }
        let mut jobs = Vec::new();
        while let Some(end) = self.inbox.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.inbox.drain(..=end).collect();
            if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&line) {
                if value["v"] == 1 && value["op"] == "drop" {
                    if let Some(job) = value["job"].as_u64() {
                        jobs.push(job);
                    }
                }
            }
        }
        jobs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::parse_message;
    use std::io::BufRead;
    use std::os::unix::net::UnixListener;

    fn listening() -> (tempfile::TempDir, UnixListener, JobClient) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sock");
        let listener = UnixListener::bind(&path).unwrap();
        (dir, listener, JobClient::new(path))
    }

    fn complete(client: &mut JobClient, job: u64) {
        client.send(JobOp::Complete, job, job);
    }

    /// The jobs of every whole line the agent's end can read now.
    fn read_jobs(peer: &mut UnixStream) -> Vec<u64> {
        peer.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 65536];
        while let Ok(n @ 1..) = peer.read(&mut chunk) {
            bytes.extend_from_slice(&chunk[..n]);
        }
        assert_eq!(bytes.last().copied().unwrap_or(b'\n'), b'\n', "a line arrived in part");
        bytes.lines().map(|l| parse_message(l.unwrap().as_bytes()).unwrap().job).collect()
    }

    #[test]
    fn reports_the_socket_cannot_take_yet_go_out_later_in_order() {
        let (_dir, listener, mut client) = listening();
        complete(&mut client, 0);
        let (mut peer, _) = listener.accept().unwrap();
        // Until the socket's buffer is full and something waits in the outbox.
        let mut jobs = 1;
        while client.pending() == 0 {
            complete(&mut client, jobs);
            jobs += 1;
        }
        let pending = client.pending();
        assert_eq!(client.unsent, 0);
        assert_eq!(client.sent + pending, jobs);
        let mut seen = read_jobs(&mut peer);
        client.drop_requests();
        assert_eq!(client.pending(), 0, "the next call wrote what was pending");
        seen.extend(read_jobs(&mut peer));
        assert_eq!(seen, (0..jobs).collect::<Vec<_>>(), "every report arrived once, whole and in order");
        assert_eq!((client.sent, client.unsent), (jobs, 0));
    }

    #[test]
    fn a_full_outbox_loses_new_reports_and_counts_them() {
        let (_dir, listener, mut client) = listening();
        complete(&mut client, 0);
        let (mut peer, _) = listener.accept().unwrap();
        let total = 20_000;
        for job in 1..total {
            complete(&mut client, job);
        }
        assert!(client.unsent > 0, "an agent that never reads fills the outbox");
        assert!(client.outbox.len() <= OUTBOX_BYTES);
        assert_eq!(client.sent + client.unsent + client.pending(), total);
        let mut seen = read_jobs(&mut peer);
        client.close(Duration::from_secs(5));
        seen.extend(read_jobs(&mut peer));
        assert_eq!(seen.len() as u64, client.sent);
        assert_eq!(client.sent + client.unsent, total);
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "what arrived is in order");
    }

    #[test]
    fn reports_pending_for_a_closed_agent_count_as_unsent_and_the_next_agent_gets_whole_lines() {
        let (dir, listener, mut client) = listening();
        complete(&mut client, 0);
        let (peer, _) = listener.accept().unwrap();
        let mut job = 1;
        while client.pending() == 0 {
            complete(&mut client, job);
            job += 1;
        }
        drop((peer, listener));
        client.drop_requests();
        assert_eq!(client.pending(), 0);
        assert_eq!(client.sent + client.unsent, job);
        assert!(client.unsent > 0);
        // The agent comes back: the client reconnects and its next line arrives whole.
        std::fs::remove_file(dir.path().join("jobs.sock")).unwrap();
        let listener = UnixListener::bind(dir.path().join("jobs.sock")).unwrap();
        std::thread::sleep(RETRY_CONNECT);
        complete(&mut client, 999);
        let (mut peer, _) = listener.accept().unwrap();
        assert_eq!(read_jobs(&mut peer), vec![999]);
        assert_eq!(client.connects, 2);
    }
}
