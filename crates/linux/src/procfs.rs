//! Which cgroup a process is in, from `/proc/<pid>/cgroup` under an injectable /proc root.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// One line of `/proc/<pid>/cgroup`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcCgroupLine {
    /// v1 hierarchy ID; 0 for the cgroup2 hierarchy.
    pub hierarchy: u32,
    /// v1 controllers bound to the hierarchy (`memory`, `cpu,cpuacct`, `name=systemd`); empty
    /// for cgroup2.
    pub controllers: Vec<String>,
    /// Path from the hierarchy root, starting with `/`.
    pub path: String,
}

/// Parses `/proc/<pid>/cgroup` (cgroups(7)): `hierarchy-ID:controller-list:cgroup-path`,
/// both v1 and v2 lines:
///
/// ```text
/// 4:memory:/process_api/1d25077c
/// 1:cpu,cpuacct:/
/// 9:name=systemd:/
/// 0::/user.slice/session-1.scope
/// ```
///
/// The path is everything after the second colon (it may itself contain colons).
pub fn parse_proc_pid_cgroup(text: &str, origin: &str) -> Result<Vec<ProcCgroupLine>> {
    let mut lines = Vec::new();
    // Not `lines()`: that would eat a `\r` ending a cgroup name (paths are printed raw).
    for line in text.split('\n') {
        if line.is_empty() {
            continue;
        }
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(Error::parse("/proc/<pid>/cgroup", origin, format!("expected `id:controllers:path`, got {line:?}")));
        };
        let hierarchy =
            id.parse::<u32>().map_err(|_| Error::parse("/proc/<pid>/cgroup", origin, format!("hierarchy ID {id:?} is not a number")))?;
        if !path.starts_with('/') {
            return Err(Error::parse("/proc/<pid>/cgroup", origin, format!("path {path:?} is not absolute")));
        }
        let controllers = if controllers.is_empty() { Vec::new() } else { controllers.split(',').map(str::to_owned).collect() };
        lines.push(ProcCgroupLine { hierarchy, controllers, path: path.to_owned() });
    }
    Ok(lines)
}

/// The hierarchy whose membership decides a process's group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    /// cgroup2 (the `0::` line).
    Unified,
    /// The v1 hierarchy carrying this controller (e.g. `memory` on the hybrid layout).
    V1(String),
}

impl Hierarchy {
    /// The hierarchy of the memory controller for a layout.
    pub fn for_layout(layout: &crate::layout::Layout) -> Self {
        match layout {
            crate::layout::Layout::V2 { .. } => Hierarchy::Unified,
            crate::layout::Layout::Hybrid { .. } => Hierarchy::V1("memory".into()),
        }
    }

    /// This hierarchy's path among parsed lines.
    pub fn find<'a>(&self, lines: &'a [ProcCgroupLine]) -> Option<&'a str> {
        lines
            .iter()
            .find(|l| match self {
                Hierarchy::Unified => l.hierarchy == 0 && l.controllers.is_empty(),
                Hierarchy::V1(controller) => l.hierarchy != 0 && l.controllers.iter().any(|c| c == controller),
            })
            .map(|l| l.path.as_str())
    }
}

/// /proc, or a fake tree standing in for it.
#[derive(Clone, Debug)]
pub struct ProcFs {
    root: PathBuf,
}

impl ProcFs {
    pub fn new(root: PathBuf) -> Self {
        ProcFs { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The cgroup path of `pid` in `hierarchy` (e.g. `/critmem/rt`); `None` if the process is
    /// not in that hierarchy. Errors when the process is gone or the file is malformed.
    pub fn cgroup_of(&self, pid: u32, hierarchy: &Hierarchy) -> Result<Option<String>> {
        let path = self.root.join(pid.to_string()).join("cgroup");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io("read", &path, e))?;
        let lines = parse_proc_pid_cgroup(&text, &path.display().to_string())?;
        Ok(hierarchy.find(&lines).map(str::to_owned))
    }
}

impl ProcFs {
    /// Opens `<root>/<pid>` as a directory: a handle on that process which a later process
    /// given the same pid does not share (see [`process_dir_has_exited`]).
    pub fn open_process(&self, pid: u32) -> Result<std::os::fd::OwnedFd> {
        use nix::fcntl::{open, OFlag};
        let path = self.root.join(pid.to_string());
        open(&path, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, nix::sys::stat::Mode::empty())
            .map_err(|e| Error::io("open", &path, e.into()))
    }
}

/// Whether the process whose `/proc/<pid>` directory is `dir` has exited: its `stat` can no
/// longer be read (reaped) or says zombie or dead. Unreadable counts as exited: nothing is
/// attributed on a guess.
pub fn process_dir_has_exited(dir: std::os::fd::BorrowedFd) -> bool {
    use nix::fcntl::{openat, OFlag};
    let Ok(fd) = openat(dir, "stat", OFlag::O_RDONLY | OFlag::O_CLOEXEC, nix::sys::stat::Mode::empty()) else { return true };
    let mut text = String::new();
    if std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut text).is_err() {
        return true;
    }
    // `pid (comm) S ...`: the state follows the last `)` (comm may hold any character).
    let state = text.rfind(')').and_then(|at| text[at + 1..].split_whitespace().next());
    !matches!(state, Some(s) if s != "Z" && s != "X")
}

/// Whether cgroup path `inner` is `outer` or below it (`/a/b` is in `/a`, `/ab` is not).
pub fn is_within(inner: &str, outer: &str) -> bool {
    let outer = outer.trim_end_matches('/');
    inner == outer || (inner.starts_with(outer) && inner[outer.len()..].starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HYBRID: &str = "9:name=systemd:/\n8:pids:/\n4:memory:/critmem/rt\n1:cpu,cpuacct:/\n0::/critmem/rt\n";
    const V2: &str = "0::/system.slice/critmem.service\n";

    #[test]
    fn a_process_directory_says_exited_once_the_process_is_a_zombie_and_after_it_is_reaped() {
        use std::os::fd::AsFd;
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let dir = ProcFs::new("/proc".into()).open_process(child.id()).unwrap();
        assert!(!process_dir_has_exited(dir.as_fd()), "a running process");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
        // Not reaped yet: a zombie, whose pid cannot be reused, but which has exited.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !process_dir_has_exited(dir.as_fd()) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(process_dir_has_exited(dir.as_fd()), "a zombie");
        child.wait().unwrap();
        assert!(process_dir_has_exited(dir.as_fd()), "reaped");
    }

    #[test]
    fn v1_and_v2_lines_are_parsed() {
        let lines = parse_proc_pid_cgroup(HYBRID, "t").unwrap();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[3], ProcCgroupLine { hierarchy: 1, controllers: vec!["cpu".into(), "cpuacct".into()], path: "/".into() });
        assert_eq!(Hierarchy::V1("memory".into()).find(&lines), Some("/critmem/rt"));
        assert_eq!(Hierarchy::V1("cpuacct".into()).find(&lines), Some("/"));
        assert_eq!(Hierarchy::Unified.find(&lines), Some("/critmem/rt"));
        let v2 = parse_proc_pid_cgroup(V2, "t").unwrap();
        assert_eq!(Hierarchy::Unified.find(&v2), Some("/system.slice/critmem.service"));
        assert_eq!(Hierarchy::V1("memory".into()).find(&v2), None);
    }

    #[test]
    fn paths_with_colons_survive() {
        let lines = parse_proc_pid_cgroup("0::/a:b\n", "t").unwrap();
        assert_eq!(lines[0].path, "/a:b");
    }

    /// Found by `proc_pid_cgroup_parses_back`: a cgroup name ending in `\r` lost it, so a
    /// process in `/critmem/rt\r` read as being in `/critmem/rt`.
    #[test]
    fn a_carriage_return_ending_a_path_is_kept() {
        assert_eq!(parse_proc_pid_cgroup("0::/\r\n", "t").unwrap()[0].path, "/\r");
        let lines = parse_proc_pid_cgroup("4:memory:/critmem/rt\r\n0::/critmem/rt\n", "t").unwrap();
        assert_eq!(Hierarchy::V1("memory".into()).find(&lines), Some("/critmem/rt\r"));
    }

    #[test]
    fn garbage_is_rejected() {
        for text in ["memory:/x\n", "x:memory:/a\n", "4:memory:relative\n"] {
            assert!(parse_proc_pid_cgroup(text, "t").is_err(), "accepted {text:?}");
        }
    }

    /// One line as the kernel prints it, and what it should parse to.
    fn cgroup_line() -> impl Strategy<Value = (String, ProcCgroupLine)> {
        // cgroup names are anything but `/` and newline (cgroup_mkdir refuses `\n`).
        let component = prop_oneof![r"[^/\n]{1,12}", r"[a-z:\r \t]{1,6}"];
        let path = proptest::collection::vec(component, 0..4).prop_map(|c| format!("/{}", c.join("/")));
        let v1 = (1..=u32::MAX, proptest::collection::vec(r"[a-z_]{1,10}|name=[a-z0-9_.-]{1,10}", 1..4), path.clone()).prop_map(
            |(hierarchy, controllers, path)| {
                (format!("{hierarchy}:{}:{path}\n", controllers.join(",")), ProcCgroupLine { hierarchy, controllers, path })
            },
        );
        let v2 = path.prop_map(|path| (format!("0::{path}\n"), ProcCgroupLine { hierarchy: 0, controllers: Vec::new(), path }));
        prop_oneof![v1, v2]
    }

    proptest! {
        #[test]
        fn proc_pid_cgroup_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse_proc_pid_cgroup(&String::from_utf8_lossy(&bytes), "fuzz");
        }

        /// Missing colons, IDs that overflow u32, signs, relative paths, odd spacing.
        #[test]
        fn proc_pid_cgroup_never_panics_on_cgroup_like_text(text in r"([ \t]?(-|\+)?[0-9]{0,12}(:[a-z,=]{0,10}){0,3}(:/?[a-z/:]{0,10})?[ \t]?\r?\n){0,5}") {
            let _ = parse_proc_pid_cgroup(&text, "fuzz");
        }

        #[test]
        fn proc_pid_cgroup_parses_back(lines in proptest::collection::vec(cgroup_line(), 0..8)) {
            let text: String = lines.iter().map(|(line, _)| line.as_str()).collect();
            let want: Vec<ProcCgroupLine> = lines.into_iter().map(|(_, parsed)| parsed).collect();
            prop_assert_eq!(parse_proc_pid_cgroup(&text, "gen").unwrap(), want);
        }
    }

    #[test]
    fn containment_respects_path_components() {
        assert!(is_within("/a/b", "/a"));
        assert!(is_within("/a", "/a"));
        assert!(is_within("/a", "/a/"));
        assert!(!is_within("/ab", "/a"));
        assert!(is_within("/anything", "/"));
    }

    #[test]
    fn fake_proc_root_is_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("77")).unwrap();
        std::fs::write(dir.path().join("77/cgroup"), HYBRID).unwrap();
        let proc = ProcFs::new(dir.path().to_owned());
        assert_eq!(proc.cgroup_of(77, &Hierarchy::V1("memory".into())).unwrap().as_deref(), Some("/critmem/rt"));
        assert!(proc.cgroup_of(78, &Hierarchy::Unified).is_err());
    }
}
