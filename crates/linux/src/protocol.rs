//! The job protocol: soft real-time processes report job release, completion and drops to the
//! agent over a Unix-domain stream socket.
//!
//! Wire format, version 1: one JSON object per line (UTF-8, at most [`MAX_LINE_BYTES`] bytes
//! including the newline). Client to agent:
//!
//! ```text
//! {"v":1,"op":"release","job":12,"deadline_ns":1700000000}
//! {"v":1,"op":"complete","job":12}
//! {"v":1,"op":"drop","job":12,"at_ns":1650000000}
//! ```
//!
//! - `v` (required): protocol version, 1.
//! - `op` (required): `release`, `complete` or `drop`.
//! - `job` (required): the job's sequence number within its task (u64).
//! - `deadline_ns` (release only, required there): absolute deadline on CLOCK_MONOTONIC.
//! - `at_ns` (optional): when it happened on CLOCK_MONOTONIC; the agent uses the time it
//!   received the line if absent.
//! - `group` (optional): the group the sender believes it is in; if present it must be the
//!   group the sender really is in.
//!
//! Agent to client, one kind of line (clients that never read may ignore it; the agent's
//! writes are non-blocking and a full socket buffer only loses the request):
//!
//! ```text
//! {"v":1,"op":"drop","job":12}
//! ```
//!
//! asks every process of the group connected on this socket to abort job 12 now (a
//! controller's [`critmem_policy::Action::DropJob`]); the client then reports
//! `{"v":1,"op":"drop","job":12}` back when it has.
//!
//! Unknown fields are rejected (a new field means a new version). The sender is identified
//! with SO_PEERCRED (pid, uid) when it connects, and its group is read from
//! `/proc/<pid>/cgroup` again whenever its messages are read (once per poll of the connection),
//! so a process can report only for the group it is in now. A pid names a process only until it exits (the number is then reused), so the agent
//! also holds the connecting process's pidfd (SO_PEERPIDFD, which names that process and no
//! other) and checks after each read of `/proc/<pid>/cgroup` that the process has not exited:
//! if it has not, the pid was still its own, and the file read was its cgroup. Once the process
//! that connected has exited, the connection's messages are refused even if a child it forked
//! still holds the socket (that child connects anew to report). On kernels without
//! SO_PEERPIDFD (before 6.5) the agent opens `/proc/<pid>` when it accepts the connection
//! instead: that directory stays the process's own (it fails once the process is reaped, and a
//! new process given the pid gets a new one), so only a pid reused between the connect and
//! the accept could be mistaken. Connections from
//! processes in no managed group or already gone, and messages naming another group or sent
//! after the connecting process exited, are refused (counted, logged, connection closed).
//! Malformed lines are counted and logged and the connection goes on; nothing a client sends
//! can stop the agent.

use crate::error::{Error, Result};
use crate::procfs::{is_within, Hierarchy, ProcFs};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::socket::getsockopt;
use nix::sys::socket::sockopt::{PeerCredentials, PeerPidfd};
use serde::Deserialize;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Protocol version this agent speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// Longest accepted line, newline included.
pub const MAX_LINE_BYTES: usize = 512;

/// Most bytes a poll at a 5 ms tick reads over all connections, shared equally between them
/// (each gets at least [`MIN_SHARE_BYTES`]): clients that write without pause must not keep the
/// control loop from ticking, nor take another client's share (a real one sends a few lines per
/// job). A longer tick's poll reads proportionally more ([`PollBudget::for_interval`]), so what
/// the socket takes in a second does not depend on the interval.
pub const MAX_BYTES_PER_POLL: usize = 16 * 1024;
/// Least a poll at a 5 ms tick reads of one connection with data: 256 bytes per tick is about
/// 350 jobs a second (a line split between polls waits in the connection's buffer).
pub const MIN_SHARE_BYTES: usize = 256;
/// The tick [`MAX_BYTES_PER_POLL`] and [`MIN_SHARE_BYTES`] are for.
const BYTES_PER_POLL_TICK_NS: u64 = 5_000_000;
/// Most a poll reads over all connections at any tick (a 1.3 s tick's worth).
const MAX_POLL_BYTES: usize = 256 * MAX_BYTES_PER_POLL;

/// How much one poll of the job socket may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollBudget {
    /// Most time spent accepting and reading, in ns: what a flood costs the control tick. What
    /// a poll leaves waits in the socket buffers for the next one.
    pub time_ns: u64,
    /// Most bytes read over all connections, in equal shares (each at least its proportional
    /// part of [`MIN_SHARE_BYTES`]).
    pub bytes: usize,
}

impl PollBudget {
    /// No time limit, a 5 ms tick's bytes.
    pub const UNTIMED: PollBudget = PollBudget { time_ns: u64::MAX, bytes: MAX_BYTES_PER_POLL };

    /// For a loop ticking every `interval_ns`: a fifth of the interval (a flood of clients then
    /// delays reports, never the tick), and [`MAX_BYTES_PER_POLL`] per 5 ms of it, so what the
    /// socket takes in a second does not depend on the interval.
    pub fn for_interval(interval_ns: u64) -> Self {
        let ticks = usize::try_from(interval_ns / BYTES_PER_POLL_TICK_NS).unwrap_or(usize::MAX).max(1);
        PollBudget { time_ns: interval_ns / 5, bytes: MAX_BYTES_PER_POLL.saturating_mul(ticks).min(MAX_POLL_BYTES) }
    }
}

/// Most connections one poll accepts.
pub const MAX_ACCEPTS_PER_POLL: usize = 32;
/// Longest accepted `group` name.
const MAX_GROUP_NAME_BYTES: usize = 128;

/// What a job message reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobOp {
    /// The job was released; its absolute deadline (CLOCK_MONOTONIC) is `deadline_ns`.
    Release {
        deadline_ns: u64,
    },
    Complete,
    Drop,
}

/// One parsed message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobMessage {
    pub op: JobOp,
    pub job: u64,
    pub at_ns: Option<u64>,
    pub group: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    v: u32,
    op: String,
    job: u64,
    #[serde(default)]
    deadline_ns: Option<u64>,
    #[serde(default)]
    at_ns: Option<u64>,
    #[serde(default)]
    group: Option<String>,
}

/// Parses one line (with or without its trailing newline). Never panics, whatever the bytes.
pub fn parse_message(line: &[u8]) -> Result<JobMessage> {
    let bad = |reason: String| Error::parse("job message", "socket", reason);
    if line.len() > MAX_LINE_BYTES {
        return Err(bad(format!("{} bytes is longer than {MAX_LINE_BYTES}", line.len())));
    }
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let wire: Wire = serde_json::from_slice(line).map_err(|e| bad(e.to_string()))?;
    if wire.v != PROTOCOL_VERSION {
        return Err(bad(format!("version {} is not supported (this agent speaks {PROTOCOL_VERSION})", wire.v)));
    }
    if wire.group.as_ref().is_some_and(|g| g.is_empty() || g.len() > MAX_GROUP_NAME_BYTES) {
        return Err(bad(format!("group must be 1..={MAX_GROUP_NAME_BYTES} bytes")));
    }
    let op = match (wire.op.as_str(), wire.deadline_ns) {
        ("release", Some(deadline_ns)) => JobOp::Release { deadline_ns },
        ("release", None) => return Err(bad("release needs deadline_ns".into())),
        ("complete" | "drop", Some(_)) => return Err(bad(format!("{} takes no deadline_ns", wire.op))),
        ("complete", None) => JobOp::Complete,
        ("drop", None) => JobOp::Drop,
        (other, _) => return Err(bad(format!("unknown op {other:?} (expected release, complete or drop)"))),
    };
    Ok(JobMessage { op, job: wire.job, at_ns: wire.at_ns, group: wire.group })
}

/// Formats a message as its line (for clients and tests).
pub fn format_message(message: &JobMessage) -> String {
    let mut object = serde_json::Map::new();
    object.insert("v".into(), PROTOCOL_VERSION.into());
    let (op, deadline) = match message.op {
        JobOp::Release { deadline_ns } => ("release", Some(deadline_ns)),
        JobOp::Complete => ("complete", None),
        JobOp::Drop => ("drop", None),
    };
    object.insert("op".into(), op.into());
    object.insert("job".into(), message.job.into());
    if let Some(d) = deadline {
        object.insert("deadline_ns".into(), d.into());
    }
    if let Some(at) = message.at_ns {
        object.insert("at_ns".into(), at.into());
    }
    if let Some(g) = &message.group {
        object.insert("group".into(), g.clone().into());
    }
    let mut line = serde_json::Value::Object(object).to_string();
    line.push('\n');
    line
}

/// A group that may report jobs: its name in the configuration and its cgroup path in the
/// deciding hierarchy (e.g. `/critmem/rt`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportingGroup {
    pub name: String,
    pub cgroup: String,
}

/// A message accepted from a process in a managed group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportedJob {
    /// Index into the server's groups.
    pub group: usize,
    pub pid: u32,
    pub uid: u32,
    pub job: u64,
    pub op: JobOp,
    pub at_ns: Option<u64>,
}

/// Counters for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProtocolStats {
    pub connections: u64,
    pub accepted_messages: u64,
    pub malformed_messages: u64,
    /// Connections or messages from a process outside the group it reported for, or after the
    /// process that connected has exited.
    pub refused: u64,
    /// Connections turned away because too many were open.
    pub over_limit: u64,
    /// Drop requests written to a client.
    pub drops_delivered: u64,
    /// Drop requests that found no connection of the group, or a full socket buffer.
    pub drops_undelivered: u64,
    /// Polls that spent their time budget before reading every connection (the rest were
    /// read first at the next poll).
    pub polls_cut_short: u64,
}

/// Server settings.
#[derive(Clone, Debug)]
pub struct JobServerConfig {
    /// The socket's path; its directory must be owned by the agent's user and writable by no
    /// one else (it is created 0755 if missing).
    pub socket_path: PathBuf,
    /// Group that may connect (socket owner group, mode 0660); `None` leaves it the agent's.
    pub socket_gid: Option<u32>,
    pub groups: Vec<ReportingGroup>,
    /// The hierarchy whose membership counts (memory's: v1 on hybrid, cgroup2 on v2).
    pub hierarchy: Hierarchy,
    pub proc: ProcFs,
    /// Most connections open at once; each group may hold its share of them
    /// ([`JobServer::group_quota`]), each process at most [`MAX_CONNECTIONS_PER_PROCESS`].
    pub max_connections: usize,
    /// What one poll may take.
    pub poll_budget: PollBudget,
}

/// Most bytes read from a connection whose sender has exited before it is closed: a full
/// socket buffer's worth, and more than any client's outbox.
const EXITED_DRAIN_BYTES: usize = 1 << 20;

/// Most connections one process may hold: a client needs one, so processes of one group
/// cannot take every place of their group, and no group can take another's.
pub const MAX_CONNECTIONS_PER_PROCESS: usize = 4;

struct Connection {
    stream: UnixStream,
    pid: u32,
    uid: u32,
    /// What names the connecting process and no other.
    peer: PeerHandle,
    /// The group the peer was last seen in: at accept, then at every poll with lines from it.
    group: usize,
    /// The peer has exited: what the connection holds now counts for `group`, then it closes.
    exited: bool,
    buffer: Vec<u8>,
    /// Inside an over-long line: drop bytes up to the next newline.
    discarding: bool,
    warned: bool,
}

/// The agent's end of the job socket; non-blocking, driven by [`JobServer::poll`] from the
/// control loop.
pub struct JobServer {
    config: JobServerConfig,
    listener: UnixListener,
    connections: Vec<Connection>,
    stats: ProtocolStats,
    /// When a refused connection or message was last logged at warn.
    last_refusal_warning: Option<std::time::Instant>,
    /// The socket's directories [`JobServer::bind`] made, removed (if empty) after the socket;
    /// held only for its drop.
    _created_dirs: CreatedDirs,
}

/// Directories made for the socket, innermost first; removed on drop where they are empty
/// (nothing but the socket was ever put there by the server).
struct CreatedDirs(Vec<PathBuf>);

impl Drop for CreatedDirs {
    fn drop(&mut self) {
        for dir in &self.0 {
            if std::fs::remove_dir(dir).is_err() {
                break;
            }
        }
    }
}

impl JobServer {
    /// Binds the socket (replacing a stale socket file, never any other kind of file).
    pub fn bind(config: JobServerConfig) -> Result<Self> {
        let path = config.socket_path.clone();
        let socket_err = |reason: String| Error::Socket { path: path.clone(), reason };
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).ok_or_else(|| socket_err("needs a directory".into()))?;
        // The directories made here go again with the server (or with this call, if it fails).
        let created_dirs =
            CreatedDirs(dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !d.exists()).map(Path::to_path_buf).collect());
        if !dir.exists() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("create socket directory", dir, e))?;
            for created in &created_dirs.0 {
                std::fs::set_permissions(created, std::fs::Permissions::from_mode(0o755)).map_err(|e| Error::io("chmod", created, e))?;
            }
        }
        let meta = std::fs::metadata(dir).map_err(|e| Error::io("stat", dir, e))?;
        if meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o022 != 0 {
            return Err(socket_err(format!(
                "directory {} must be owned by the agent's user and not writable by group or others (else another user could replace the socket)",
                dir.display()
            )));
        }
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_socket() => std::fs::remove_file(&path).map_err(|e| Error::io("remove stale socket", &path, e))?,
            Ok(_) => return Err(socket_err("exists and is not a socket; refusing to replace it".into())),
            Err(_) => {}
        }
        let listener = UnixListener::bind(&path).map_err(|e| Error::io("bind", &path, e))?;
        let set_up = || -> Result<()> {
            if let Some(gid) = config.socket_gid {
                nix::unistd::chown(&path, None, Some(nix::unistd::Gid::from_raw(gid))).map_err(|e| Error::io("chown", &path, e.into()))?;
            }
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o660)).map_err(|e| Error::io("chmod", &path, e))?;
            listener.set_nonblocking(true).map_err(|e| Error::io("set non-blocking", &path, e))
        };
        if let Err(e) = set_up() {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        Ok(JobServer {
            config,
            listener,
            connections: Vec::new(),
            stats: ProtocolStats::default(),
            last_refusal_warning: None,
            _created_dirs: created_dirs,
        })
    }

    /// Sets [`JobServerConfig::poll_budget`] (the control interval changed).
    pub fn set_poll_budget(&mut self, budget: PollBudget) {
        self.config.poll_budget = budget;
    }

    pub fn stats(&self) -> ProtocolStats {
        self.stats
    }

    pub fn groups(&self) -> &[ReportingGroup] {
        &self.config.groups
    }

    pub fn socket_path(&self) -> &Path {
        &self.config.socket_path
    }

    /// Reports for `groups` from now on (the managed groups changed): a connection keeps its
    /// group if it is still among them (by name), and is closed otherwise.
    pub fn set_groups(&mut self, groups: Vec<ReportingGroup>) {
        let old = std::mem::replace(&mut self.config.groups, groups);
        let new = &self.config.groups;
        self.connections.retain_mut(|c| match new.iter().position(|g| g.name == old[c.group].name) {
            Some(index) => {
                c.group = index;
                true
            }
            None => false,
        });
    }

    /// The listening socket and every open connection: one of them readable means a
    /// connection or a report is waiting for [`JobServer::poll`].
    pub fn wake_fds(&self) -> Vec<BorrowedFd<'_>> {
        std::iter::once(self.listener.as_fd()).chain(self.connections.iter().map(|c| c.stream.as_fd())).collect()
    }

    /// Whether a connection or a report is waiting now (one of [`JobServer::wake_fds`] is
    /// readable).
    pub fn has_input(&self) -> bool {
        let mut fds: Vec<PollFd> = self.wake_fds().into_iter().map(|fd| PollFd::new(fd, PollFlags::POLLIN)).collect();
        matches!(nix::poll::poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
    }

    /// Open connections.
    pub fn connections(&self) -> usize {
        self.connections.len()
    }

    /// Accepts waiting connections and reads the complete lines available, without blocking
    /// (at most [`PollBudget::bytes`] over all connections, in equal shares).
    pub fn poll(&mut self) -> Vec<ReportedJob> {
        // At most an hour: a budget meant as unlimited must not overflow the instant.
        let until = std::time::Instant::now() + std::time::Duration::from_nanos(self.config.poll_budget.time_ns.min(3_600_000_000_000));
        self.accept_all(until);
        let mut jobs = Vec::new();
        let poll_bytes = self.config.poll_budget.bytes.max(1);
        let min_share = (MIN_SHARE_BYTES.saturating_mul(poll_bytes) / MAX_BYTES_PER_POLL).max(MIN_SHARE_BYTES);
        let share = (poll_bytes / self.connections.len().max(1)).max(min_share);
        let mut index = 0;
        while index < self.connections.len() {
            if std::time::Instant::now() >= until {
                // The connections not reached are read first next time.
                self.stats.polls_cut_short += 1;
                self.connections.rotate_left(index);
                break;
            }
            if self.service(index, share, &mut jobs) {
                index += 1;
            } else {
                self.connections.swap_remove(index);
            }
        }
        jobs
    }

    /// Asks the processes of `group` (every connection from it) to abort `job`; returns how
    /// many connections the request was written to. Never blocks: a client whose socket buffer
    /// is full misses the request (counted in `drops_undelivered`).
    pub fn deliver_drop(&mut self, group: usize, job: u64) -> usize {
        use std::io::Write;
        let line = format!("{{\"v\":{PROTOCOL_VERSION},\"op\":\"drop\",\"job\":{job}}}\n");
        let mut delivered = 0;
        for conn in self.connections.iter_mut().filter(|c| c.group == group) {
            // A short write (buffer almost full) leaves a torn line the client rejects as
            // malformed; it is counted as not delivered.
            match conn.stream.write(line.as_bytes()) {
                Ok(n) if n == line.len() => delivered += 1,
                Ok(_) | Err(_) => tracing::debug!(pid = conn.pid, job, "drop request not delivered"),
            }
        }
        if delivered == 0 {
            self.stats.drops_undelivered += 1;
        } else {
            self.stats.drops_delivered += 1;
        }
        delivered
    }

    /// Accepts at most [`MAX_ACCEPTS_PER_POLL`] waiting connections, and none after `until`;
    /// the rest wait in the listen backlog (a client reconnecting without pause must not
    /// stretch the tick).
    fn accept_all(&mut self, until: std::time::Instant) {
        for _ in 0..MAX_ACCEPTS_PER_POLL {
            if std::time::Instant::now() >= until {
                return;
            }
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and friends: leave the connection queued for a later tick.
                    tracing::warn!(socket = %self.config.socket_path.display(), error = %e, "accept failed");
                    return;
                }
            };
            self.stats.connections += 1;
            if self.connections.len() >= self.config.max_connections {
                self.stats.over_limit += 1;
                let limit = self.config.max_connections;
                self.warn_limited(|| tracing::warn!(limit, "job socket connection refused: too many open"));
                continue;
            }
            let credentials = match getsockopt(&stream, PeerCredentials) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "SO_PEERCRED failed; connection dropped");
                    continue;
                }
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let (pid, uid) = (credentials.pid() as u32, credentials.uid());
            // Checked before the pidfd and /proc reads: a flooding process holds its places
            // already, and turning it away must cost little.
            let of_process = self.connections.iter().filter(|c| c.pid == pid).count();
            if of_process >= MAX_CONNECTIONS_PER_PROCESS {
                self.over_quota(pid, uid, None, of_process);
                continue;
            }
            let peer = match getsockopt(&stream, PeerPidfd) {
                Ok(pidfd) => PeerHandle::Pidfd(pidfd),
                Err(Errno::ENOPROTOOPT) => match self.config.proc.open_process(pid) {
                    Ok(dir) => PeerHandle::ProcDir(dir),
                    Err(e) => {
                        self.stats.refused += 1;
                        self.warn_limited(
                            || tracing::warn!(pid, uid, error = %e, "job socket connection refused: no /proc entry for the connecting process (it has exited, or the agent is out of file descriptors)"),
                        );
                        continue;
                    }
                },
                Err(e) => {
                    // Kernels before 6.16 give no pidfd for a process already reaped.
                    self.stats.refused += 1;
                    tracing::warn!(pid, uid, error = %e, "job socket connection refused: no pidfd for the connecting process (it has exited, or the agent is out of file descriptors)");
                    continue;
                }
            };
            let group = match self.group_of(pid, &peer) {
                PeerGroup::In(group) => group,
                PeerGroup::Outside => {
                    self.stats.refused += 1;
                    self.warn_limited(|| tracing::warn!(pid, uid, "job socket connection refused: the process is in no managed group"));
                    continue;
                }
                PeerGroup::Exited => {
                    self.stats.refused += 1;
                    self.warn_limited(|| tracing::warn!(pid, uid, "job socket connection refused: the connecting process has exited"));
                    continue;
                }
            };
            let of_group = self.connections.iter().filter(|c| c.group == group).count();
            if of_group >= self.group_quota() {
                self.over_quota(pid, uid, Some((group, of_group)), of_process);
                continue;
            }
            self.connections.push(Connection {
                stream,
                pid,
                uid,
                peer,
                group,
                exited: false,
                buffer: Vec::new(),
                discarding: false,
                warned: false,
            });
        }
    }

    /// Counts and (rate-limited) logs a connection turned away because its process, or its
    /// group if known (with the connections it holds), holds its share of connections.
    fn over_quota(&mut self, pid: u32, uid: u32, group: Option<(usize, usize)>, of_process: usize) {
        self.stats.over_limit += 1;
        let group_name = group.map_or_else(|| "(not read)".to_owned(), |(g, _)| self.config.groups[g].name.clone());
        let of_group = group.map(|(_, held)| held);
        let quota = self.group_quota();
        self.warn_limited(|| tracing::warn!(pid, uid, group = %group_name, ?of_group, of_process, quota, per_process = MAX_CONNECTIONS_PER_PROCESS, "job socket connection refused: its group or process holds its share of connections"));
    }

    /// Connections one group may hold at once: an equal share of `max_connections`.
    pub fn group_quota(&self) -> usize {
        (self.config.max_connections / self.config.groups.len().max(1)).max(1)
    }

    /// Runs `warn` unless a refusal was logged in the last second (a flood of connections
    /// must not flood the log too); the refusals are counted in [`ProtocolStats`] either way.
    fn warn_limited(&mut self, warn: impl FnOnce()) {
        let now = std::time::Instant::now();
        if self.last_refusal_warning.is_none_or(|at| now.duration_since(at) >= std::time::Duration::from_secs(1)) {
            self.last_refusal_warning = Some(now);
            warn();
        }
    }

    /// The managed group (index) the process that connected as `pid` is in now: the deepest
    /// whose cgroup contains the process's cgroup.
    fn group_of(&self, pid: u32, peer: &PeerHandle) -> PeerGroup {
        let cgroup = self.config.proc.cgroup_of(pid, &self.config.hierarchy);
        // Checked after the read: a process that has still not exited cannot have lost its pid
        // before or during it, so the file read was its own.
        if peer.has_exited() {
            return PeerGroup::Exited;
        }
        let cgroup = match cgroup {
            Ok(Some(path)) => path,
            Ok(None) => return PeerGroup::Outside,
            Err(e) => {
                tracing::debug!(pid, error = %e, "cannot read the peer's cgroup");
                return PeerGroup::Outside;
            }
        };
        self.config
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| is_within(&cgroup, &g.cgroup))
            .max_by_key(|(_, g)| g.cgroup.len())
            .map_or(PeerGroup::Outside, |(i, _)| PeerGroup::In(i))
    }

    /// Reads what connection `index` has, at most `share` bytes of it (the rest waits for the
    /// next poll); returns false when it is to be closed.
    fn service(&mut self, index: usize, share: usize, jobs: &mut Vec<ReportedJob>) -> bool {
        let mut chunk = [0u8; 4096];
        let mut budget = share;
        // The sender's group, read once for the lines of this poll.
        let mut group = None;
        let mut draining = false;
        while budget > 0 {
            if self.connections[index].exited && !draining {
                // What an exited sender left is read now, whatever the share: the connection
                // closes after it, so nothing written later is counted.
                draining = true;
                budget = budget.max(EXITED_DRAIN_BYTES);
            }
            let want = budget.min(chunk.len());
            let read = match self.connections[index].stream.read(&mut chunk[..want]) {
                Ok(0) => return false,
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return !self.connections[index].exited,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return false,
            };
            budget -= read;
            for &byte in &chunk[..read] {
                let conn = &mut self.connections[index];
                if byte != b'\n' {
                    if conn.discarding {
                        continue;
                    }
                    conn.buffer.push(byte);
                    if conn.buffer.len() >= MAX_LINE_BYTES {
                        conn.buffer.clear();
                        conn.discarding = true;
                        self.malformed(index, &format!("line longer than {MAX_LINE_BYTES} bytes"));
                    }
                    continue;
                }
                if std::mem::take(&mut conn.discarding) {
                    continue;
                }
                let line = std::mem::take(&mut conn.buffer);
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                if !self.handle_line(index, &line, &mut group, jobs) {
                    return false;
                }
            }
        }
        !self.connections[index].exited
    }

    /// Returns false when the sender is refused (the connection is then closed). `checked` is
    /// the sender's group if already read in this poll.
    fn handle_line(&mut self, index: usize, line: &[u8], checked: &mut Option<usize>, jobs: &mut Vec<ReportedJob>) -> bool {
        let message = match parse_message(line) {
            Ok(m) => m,
            Err(e) => {
                self.malformed(index, &e.to_string());
                return true;
            }
        };
        let (pid, uid) = (self.connections[index].pid, self.connections[index].uid);
        let peer = match *checked {
            Some(group) => PeerGroup::In(group),
            None => self.group_of(pid, &self.connections[index].peer),
        };
        let group = match peer {
            PeerGroup::In(group) => {
                *checked = Some(group);
                self.connections[index].group = group;
                group
            }
            PeerGroup::Outside => {
                self.stats.refused += 1;
                self.warn_limited(|| tracing::warn!(pid, uid, "job message refused: the sender has left its managed group"));
                return false;
            }
            PeerGroup::Exited => {
                // A client that reports and exits at once is common: its last lines are its
                // own, for the group it was last seen in (never the one its pid may name now).
                let conn = &mut self.connections[index];
                conn.exited = true;
                *checked = Some(conn.group);
                tracing::debug!(pid, uid, "the process that connected has exited: reading what it left, then closing");
                conn.group
            }
        };
        if let Some(claimed) = &message.group {
            if *claimed != self.config.groups[group].name {
                self.stats.refused += 1;
                let (claimed, actual) = (claimed.clone(), self.config.groups[group].name.clone());
                self.warn_limited(|| tracing::warn!(pid, uid, claimed = %claimed, actual = %actual, "job message refused: the sender reported for a group it is not in"));
                return false;
            }
        }
        self.stats.accepted_messages += 1;
        jobs.push(ReportedJob { group, pid, uid, job: message.job, op: message.op, at_ns: message.at_ns });
        true
    }

    /// Counts a malformed line; logs the first per connection at warn (at most one a second
    /// over all connections), the rest at debug, so broken clients cannot flood the log.
    fn malformed(&mut self, index: usize, reason: &str) {
        self.stats.malformed_messages += 1;
        let conn = &mut self.connections[index];
        let pid = conn.pid;
        if std::mem::replace(&mut conn.warned, true) {
            tracing::debug!(pid, reason, "malformed job message");
        } else {
            self.warn_limited(|| {
                tracing::warn!(pid, reason, "malformed job message (further ones from this connection are logged at debug)")
            });
        }
    }
}

/// Where the process that connected is, as far as the agent can tell.
enum PeerGroup {
    In(usize),
    /// In no managed group, or its cgroup cannot be read.
    Outside,
    /// The process has exited: its pid no longer names it.
    Exited,
}

/// A handle on the process that connected, which a later process given the same pid does not
/// share.
enum PeerHandle {
    /// SO_PEERPIDFD (Linux 6.5 and later).
    Pidfd(OwnedFd),
    /// `/proc/<pid>` opened at accept: it stays that process's directory.
    ProcDir(OwnedFd),
}

impl PeerHandle {
    fn has_exited(&self) -> bool {
        match self {
            PeerHandle::Pidfd(fd) => pidfd_has_exited(fd.as_fd()),
            PeerHandle::ProcDir(dir) => crate::procfs::process_dir_has_exited(dir.as_fd()),
        }
    }
}

/// Whether the process behind `pidfd` has exited: a pidfd polls readable once it has.
fn pidfd_has_exited(pidfd: BorrowedFd) -> bool {
    let mut fds = [PollFd::new(pidfd, PollFlags::POLLIN)];
    loop {
        match nix::poll::poll(&mut fds, PollTimeout::ZERO) {
            Ok(ready) => return ready > 0,
            Err(Errno::EINTR) => continue,
            // Cannot tell: nothing is attributed on a guess.
            Err(_) => return true,
        }
    }
}

impl Drop for JobServer {
    fn drop(&mut self) {
        // Only our own socket: bind refused to replace anything else. The directories it made
        // go after it (field drop order), if nothing else was put there.
        let _ = std::fs::remove_file(&self.config.socket_path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;
    use std::time::{Duration, Instant};

    #[test]
    fn messages_parse() {
        assert_eq!(
            parse_message(br#"{"v":1,"op":"release","job":12,"deadline_ns":1700}"#).unwrap(),
            JobMessage { op: JobOp::Release { deadline_ns: 1700 }, job: 12, at_ns: None, group: None }
        );
        assert_eq!(
            parse_message(b"{\"v\":1,\"op\":\"complete\",\"job\":12,\"at_ns\":5,\"group\":\"rt\"}\r\n").unwrap(),
            JobMessage { op: JobOp::Complete, job: 12, at_ns: Some(5), group: Some("rt".into()) }
        );
        assert_eq!(parse_message(br#"{"v":1,"op":"drop","job":0}"#).unwrap().op, JobOp::Drop);
    }

    #[test]
    fn bad_messages_are_rejected_with_a_reason() {
        for (line, reason) in [
            (&br#"{"v":2,"op":"release","job":1,"deadline_ns":1}"#[..], "version"),
            (br#"{"v":1,"op":"release","job":1}"#, "needs deadline_ns"),
            (br#"{"v":1,"op":"complete","job":1,"deadline_ns":1}"#, "takes no deadline_ns"),
            (br#"{"v":1,"op":"finish","job":1}"#, "unknown op"),
            (br#"{"v":1,"op":"drop","job":-1}"#, "invalid value"),
            (br#"{"v":1,"op":"drop","job":1,"extra":true}"#, "unknown field"),
            (br#"{"v":1,"op":"drop","job":1,"group":""}"#, "group must be"),
            (b"\xff\xfe", "expected value"),
            (b"", "EOF"),
        ] {
            let err = parse_message(line).unwrap_err().to_string();
            assert!(err.contains(reason), "{line:?}: {err}");
        }
        assert!(parse_message(&[b' '; MAX_LINE_BYTES + 1]).is_err());
    }

    proptest! {
        #[test]
        fn parser_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..700)) {
            let _ = parse_message(&bytes);
        }

        #[test]
        fn parser_never_panics_on_json_like_text(text in r#"\{("[a-z_]{0,12}":(-?[0-9]{0,25}|"[a-z]{0,8}"|null|true|\[\]|\{\}),?){0,8}\}"#) {
            let _ = parse_message(text.as_bytes());
        }

        #[test]
        fn formatted_messages_parse_back(job in any::<u64>(), deadline in any::<u64>(), at in proptest::option::of(any::<u64>()), kind in 0..3u8, group in proptest::option::of("[a-z]{1,10}")) {
            let op = match kind { 0 => JobOp::Release { deadline_ns: deadline }, 1 => JobOp::Complete, _ => JobOp::Drop };
            let message = JobMessage { op, job, at_ns: at, group };
            prop_assert_eq!(parse_message(format_message(&message).as_bytes()).unwrap(), message);
        }
    }

    fn self_pid() -> u32 {
        std::process::id()
    }

    fn server(dir: &Path, proc: ProcFs, groups: Vec<ReportingGroup>, hierarchy: Hierarchy) -> JobServer {
        JobServer::bind(JobServerConfig {
            socket_path: dir.join("run/critmem.sock"),
            socket_gid: None,
            groups,
            hierarchy,
            proc,
            max_connections: 4,
            poll_budget: PollBudget::UNTIMED,
        })
        .unwrap()
    }

    /// Polls until `n` jobs arrived, or a refusal closed the last connection.
    fn poll_for(server: &mut JobServer, n: usize) -> Vec<ReportedJob> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut jobs = Vec::new();
        while jobs.len() < n && Instant::now() < deadline && !(server.stats().refused > 0 && server.connections() == 0) {
            jobs.extend(server.poll());
            std::thread::sleep(Duration::from_millis(2));
        }
        jobs
    }

    fn fake_proc(dir: &Path, cgroup_file: &str) -> ProcFs {
        let root = dir.join("proc");
        fake_cgroup(&root, self_pid(), cgroup_file);
        ProcFs::new(root)
    }

    fn groups() -> Vec<ReportingGroup> {
        vec![
            ReportingGroup { name: "rt".into(), cgroup: "/critmem/rt".into() },
            ReportingGroup { name: "batch".into(), cgroup: "/critmem/batch".into() },
        ]
    }

    #[test]
    fn a_process_in_no_managed_group_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let proc = fake_proc(dir.path(), "4:memory:/elsewhere\n0::/elsewhere\n");
        let mut server = server(dir.path(), proc, groups(), Hierarchy::V1("memory".into()));
        let mut client = UnixStream::connect(server.socket_path()).unwrap();
        client.write_all(br#"{"v":1,"op":"release","job":1,"deadline_ns":10}"#).unwrap();
        client.write_all(b"\n").unwrap();
        assert!(poll_for(&mut server, 1).is_empty());
        assert_eq!(server.stats().refused, 1);
        assert_eq!(server.connections(), 0);
    }

    #[test]
    fn a_process_cannot_report_for_a_group_it_is_not_in() {
        let dir = tempfile::tempdir().unwrap();
        // The sender is in batch (in the memory hierarchy; the unified line would say rt).
        let proc = fake_proc(dir.path(), "4:memory:/critmem/batch/worker\n0::/critmem/rt\n");
        let mut server = server(dir.path(), proc, groups(), Hierarchy::V1("memory".into()));
        let mut client = UnixStream::connect(server.socket_path()).unwrap();
        client.write_all(b"{\"v\":1,\"op\":\"complete\",\"job\":1,\"group\":\"batch\"}\n").unwrap();
        client.write_all(b"{\"v\":1,\"op\":\"complete\",\"job\":2,\"group\":\"rt\"}\n").unwrap();
        client.write_all(b"{\"v\":1,\"op\":\"complete\",\"job\":3,\"group\":\"batch\"}\n").unwrap();
        let jobs = poll_for(&mut server, 2);
        assert_eq!(
            jobs.iter().map(|j| (j.group, j.job)).collect::<Vec<_>>(),
            [(1, 1)],
            "only the honest message, then the connection is closed"
        );
        assert_eq!(server.stats().refused, 1);
        assert_eq!(server.connections(), 0);
    }

    #[test]
    fn a_flooding_client_is_read_a_bounded_amount_per_poll() {
        let dir = tempfile::tempdir().unwrap();
        let proc = fake_proc(dir.path(), "4:memory:/critmem/rt\n0::/critmem/rt\n");
        let mut server = server(dir.path(), proc, groups(), Hierarchy::V1("memory".into()));
        let lines: Vec<u8> = (0..8000u64).flat_map(|job| format!("{{\"v\":1,\"op\":\"complete\",\"job\":{job}}}\n").into_bytes()).collect();
        let total = lines.len();
        assert!(total > 4 * MAX_BYTES_PER_POLL);
        let mut client = UnixStream::connect(server.socket_path()).unwrap();
        // A writer thread: the socket buffer holds less than all of it.
        let writer = std::thread::spawn(move || client.write_all(&lines).map(|()| client));
        let mut polls = 0;
        let mut jobs = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while jobs.len() < 8000 && Instant::now() < deadline {
            let got = server.poll();
            // Lines are at least 32 bytes; a partial line (< 512 bytes) may carry over.
            assert!(got.len() * 32 <= MAX_BYTES_PER_POLL + MAX_LINE_BYTES, "one poll read {} lines", got.len());
            jobs.extend(got);
            polls += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        let _client = writer.join().unwrap().unwrap();
        assert_eq!(jobs.iter().map(|j| j.job).collect::<Vec<_>>(), (0..8000).collect::<Vec<_>>(), "every line arrives, in order");
        assert!(polls >= total / MAX_BYTES_PER_POLL, "{polls} polls for {total} bytes");
        assert_eq!(server.connections(), 1);
    }

    #[test]
    fn a_poll_reads_in_proportion_to_the_interval_so_the_socket_takes_as_much_per_second() {
        let bytes = |interval_ns| PollBudget::for_interval(interval_ns).bytes;
        assert_eq!(bytes(0), MAX_BYTES_PER_POLL);
        assert_eq!(bytes(5_000_000), MAX_BYTES_PER_POLL);
        assert_eq!(bytes(105_000_000), 21 * MAX_BYTES_PER_POLL);
        assert_eq!(bytes(u64::MAX), MAX_POLL_BYTES);
    }

    /// A poll out of time leaves the connections and their lines for the next one: reports
    /// wait, none is lost.
    #[test]
    fn a_poll_out_of_time_leaves_everything_for_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let proc = fake_proc(dir.path(), "4:memory:/critmem/rt\n0::/critmem/rt\n");
        let mut server = server(dir.path(), proc, groups(), Hierarchy::V1("memory".into()));
        let mut clients: Vec<UnixStream> = (0..2).map(|_| UnixStream::connect(server.socket_path()).unwrap()).collect();
        server.set_poll_budget(PollBudget { time_ns: 0, ..PollBudget::UNTIMED });
        assert!(server.poll().is_empty());
        assert_eq!(server.connections(), 0, "no time to accept: the connections wait in the backlog");
        server.set_poll_budget(PollBudget::UNTIMED);
        assert!(server.poll().is_empty());
        assert_eq!(server.connections(), 2);
        for (job, client) in clients.iter_mut().enumerate() {
            client.write_all(format!("{{\"v\":1,\"op\":\"complete\",\"job\":{job}}}\n").as_bytes()).unwrap();
        }
        server.set_poll_budget(PollBudget { time_ns: 0, ..PollBudget::UNTIMED });
        assert!(server.poll().is_empty());
        assert_eq!(server.stats().polls_cut_short, 1);
        server.set_poll_budget(PollBudget::UNTIMED);
        let mut jobs: Vec<u64> = poll_for(&mut server, 2).iter().map(|j| j.job).collect();
        jobs.sort_unstable();
        assert_eq!(jobs, [0, 1]);
    }

    #[test]
    fn a_process_in_its_real_group_reports_and_garbage_is_survived() {
        // The real /proc: the managed group is whatever cgroup this test runs in.
        let proc = ProcFs::new("/proc".into());
        let hierarchy = [Hierarchy::V1("memory".into()), Hierarchy::Unified]
            .into_iter()
            .find(|h| proc.cgroup_of(self_pid(), h).ok().flatten().is_some())
            .expect("this process is in some cgroup hierarchy");
        let own = proc.cgroup_of(self_pid(), &hierarchy).unwrap().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut server = server(dir.path(), proc, vec![ReportingGroup { name: "self".into(), cgroup: own }], hierarchy);
        let mode = std::fs::metadata(server.socket_path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);

        let mut client = UnixStream::connect(server.socket_path()).unwrap();
        let mut stream = Vec::new();
        stream.extend(
            format_message(&JobMessage { op: JobOp::Release { deadline_ns: 99 }, job: 7, at_ns: Some(1), group: Some("self".into()) })
                .bytes(),
        );
        stream.extend(b"not json\n");
        stream.extend(vec![b'x'; 2000]);
        stream.extend(b"\n\n");
        stream.extend(b"{\"v\":1,\"op\":\"comp");
        client.write_all(&stream).unwrap();
        let mut jobs = poll_for(&mut server, 1);
        // The rest of a line split across writes.
        client.write_all(b"lete\",\"job\":7}\n{\"v\":1,\"op\":\"drop\",\"job\":8}\n").unwrap();
        jobs.extend(poll_for(&mut server, 2));
        assert_eq!(
            jobs.iter().map(|j| (j.job, j.op, j.pid)).collect::<Vec<_>>(),
            [(7, JobOp::Release { deadline_ns: 99 }, self_pid()), (7, JobOp::Complete, self_pid()), (8, JobOp::Drop, self_pid())]
        );
        let stats = server.stats();
        assert_eq!((stats.accepted_messages, stats.malformed_messages, stats.refused), (3, 2, 0));
        assert_eq!(server.connections(), 1);
        drop(client);
        // Another test of this binary forking a child in this instant holds a copy of the
        // client's socket until the child execs, so the hangup may take a few polls to show.
        let deadline = Instant::now() + Duration::from_secs(5);
        while server.connections() > 0 && Instant::now() < deadline {
            server.poll();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(server.connections(), 0);
    }

    /// Connects to the job socket at `argv[1]` and forks a child that keeps the socket,
    /// answering each drop request with its report as a client does, until the agent closes
    /// it. The connecting process prints `connected`, then exits at the first line on stdin.
    const CONNECT_THEN_EXIT: &str = r#"
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
if os.fork() == 0:
    try:
        s.settimeout(30)
        for line in s.makefile("rb"):
            s.sendall(b'{"v":1,"op":"drop","job":%d}\n' % json.loads(line)["job"])
    finally:
        os._exit(0)
print("connected", flush=True)
sys.stdin.readline()
"#;

    /// Runs [`CONNECT_THEN_EXIT`]; returns the connecting process once it has connected.
    fn connect_from_child(socket: &Path) -> std::process::Child {
        use std::io::BufRead;
        let python = if Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
        let mut child = std::process::Command::new(python)
            .arg("-c")
            .arg(CONNECT_THEN_EXIT)
            .arg(socket)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 is needed for this test (scripts/setup.sh installs the project's Python)");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "connected");
        child
    }

    /// Ends the connecting process (its forked child keeps the socket) and reaps it, so its
    /// pid is free for the kernel to reuse.
    fn exit_and_reap(mut child: std::process::Child) {
        child.stdin.take().unwrap().write_all(b"exit\n").unwrap();
        assert!(child.wait().unwrap().success());
    }

    fn fake_cgroup(proc_root: &Path, pid: u32, cgroup_file: &str) {
        std::fs::create_dir_all(proc_root.join(pid.to_string())).unwrap();
        std::fs::write(proc_root.join(pid.to_string()).join("cgroup"), cgroup_file).unwrap();
    }

    /// A job server over the fake /proc at `proc_root`, and a [`CONNECT_THEN_EXIT`] client
    /// connected to it.
    fn server_and_child_client(dir: &Path, proc_root: &Path) -> (JobServer, std::process::Child) {
        let server = server(dir, ProcFs::new(proc_root.to_owned()), groups(), Hierarchy::Unified);
        let connecting = connect_from_child(server.socket_path());
        (server, connecting)
    }

    /// [`server_and_child_client`] with the client in rt, once the server has accepted it;
    /// and the client's pid.
    fn accepted_rt_client(dir: &Path, proc_root: &Path) -> (JobServer, std::process::Child, u32) {
        let (mut server, connecting) = server_and_child_client(dir, proc_root);
        let pid = connecting.id();
        fake_cgroup(proc_root, pid, "0::/critmem/rt\n");
        wait_accepted(&mut server);
        (server, connecting, pid)
    }

    /// Polls until the server holds a connection (at most 5 s).
    fn wait_accepted(server: &mut JobServer) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while server.connections() == 0 && Instant::now() < deadline {
            server.poll();
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The connecting process exits while a child it forked keeps the socket, and its pid goes
    /// to a process in another managed group (the fake /proc says so): what the connection
    /// holds when the agent notices counts for the group the process was last seen in, never
    /// for the one its pid now names, and the connection is closed, so nothing written later
    /// counts.
    #[test]
    fn after_the_process_that_connected_exits_its_connection_counts_for_its_last_group_then_closes() {
        let dir = tempfile::tempdir().unwrap();
        let proc_root = dir.path().join("proc");
        let (mut server, connecting, pid) = accepted_rt_client(dir.path(), &proc_root);
        // While it lives, its connection reports for rt.
        assert_eq!(server.deliver_drop(0, 1), 1);
        let jobs = poll_for(&mut server, 1);
        assert_eq!(jobs.iter().map(|j| (j.group, j.job, j.pid)).collect::<Vec<_>>(), [(0, 1, pid)]);

        exit_and_reap(connecting);
        fake_cgroup(&proc_root, pid, "0::/critmem/batch\n");
        assert_eq!(server.deliver_drop(0, 2), 1);
        let jobs = poll_for(&mut server, 1);
        assert_eq!(jobs.iter().map(|j| (j.group, j.job)).collect::<Vec<_>>(), [(0, 2)], "counted for rt, not for the pid's batch");
        assert_eq!(server.stats().refused, 0);
        assert_eq!(server.connections(), 0, "the connection is closed");
    }

    /// A client that sends its reports and exits before the agent read them: every report counts.
    #[test]
    fn reports_left_by_a_client_that_exited_are_counted_for_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let proc_root = dir.path().join("proc");
        let (mut server, connecting, _) = accepted_rt_client(dir.path(), &proc_root);
        // Three drops delivered: the client answers each with its report, then the parent
        // that connected is gone before the agent reads any of them.
        for job in 1..=3 {
            assert_eq!(server.deliver_drop(0, job), 1);
        }
        std::thread::sleep(Duration::from_millis(200));
        exit_and_reap(connecting);
        let jobs = poll_for(&mut server, 3);
        assert_eq!(jobs.iter().map(|j| (j.group, j.job)).collect::<Vec<_>>(), [(0, 1), (0, 2), (0, 3)]);
        assert_eq!(server.connections(), 0);
    }

    /// Same, with the connecting process gone before the agent even accepted the connection.
    #[test]
    fn a_connection_whose_process_exited_before_it_was_accepted_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let proc_root = dir.path().join("proc");
        let (mut server, connecting) = server_and_child_client(dir.path(), &proc_root);
        let pid = connecting.id();
        exit_and_reap(connecting);
        fake_cgroup(&proc_root, pid, "0::/critmem/batch\n");
        assert!(server.poll().is_empty());
        assert_eq!(server.stats().connections, 1);
        assert_eq!(server.stats().refused, 1);
        assert_eq!(server.connections(), 0);
    }

    #[test]
    fn bind_refuses_to_replace_a_regular_file_and_cleans_up_its_socket() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("run")).unwrap();
        std::fs::write(dir.path().join("run/critmem.sock"), "precious").unwrap();
        let config = JobServerConfig {
            socket_path: dir.path().join("run/critmem.sock"),
            socket_gid: None,
            groups: groups(),
            hierarchy: Hierarchy::Unified,
            proc: ProcFs::new("/proc".into()),
            max_connections: 4,
            poll_budget: PollBudget::UNTIMED,
        };
        assert!(JobServer::bind(config.clone()).is_err());
        std::fs::remove_file(&config.socket_path).unwrap();
        let server = JobServer::bind(config.clone()).unwrap();
        drop(server);
        assert!(!config.socket_path.exists());
    }

    /// Found by the audit: the directories bind made for the socket stayed after the server.
    #[test]
    fn the_directories_made_for_the_socket_go_with_it_unless_something_else_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let config = |path: PathBuf| JobServerConfig {
            socket_path: path,
            socket_gid: None,
            groups: groups(),
            hierarchy: Hierarchy::Unified,
            proc: ProcFs::new("/proc".into()),
            max_connections: 4,
            poll_budget: PollBudget::UNTIMED,
        };
        let server = JobServer::bind(config(dir.path().join("a/b/jobs.sock"))).unwrap();
        assert!(dir.path().join("a/b/jobs.sock").exists());
        drop(server);
        assert!(!dir.path().join("a").exists(), "both directories it made are removed");
        // A directory that held something else stays, with its parent.
        let server = JobServer::bind(config(dir.path().join("c/d/jobs.sock"))).unwrap();
        std::fs::write(dir.path().join("c/d/other"), "someone's").unwrap();
        drop(server);
        assert!(dir.path().join("c/d/other").exists());
        // And one that existed before is left.
        std::fs::create_dir(dir.path().join("e")).unwrap();
        drop(JobServer::bind(config(dir.path().join("e/jobs.sock"))).unwrap());
        assert!(dir.path().join("e").is_dir());
        // A bind that fails removes what it made.
        std::fs::create_dir_all(dir.path().join("f")).unwrap();
        let long = dir.path().join("f/g").join("x".repeat(120)).join("jobs.sock");
        assert!(JobServer::bind(config(long)).is_err(), "a socket path longer than sun_path cannot be bound");
        assert!(!dir.path().join("f/g").exists());
    }
}
