//! [`HybridBackend`]: the cgroup v1 memory controller for limits, cgroup2 for PSI.

use super::*;

/// v1 reports "no limit" as the largest page-aligned value that fits a signed long
/// (9223372036854771712 with 4 KiB pages); anything this large is no limit.
const V1_UNLIMITED_FROM_BYTES: u64 = 1 << 62;

/// The hybrid layout: v1 memory controller for limits and usage, cgroup2 for PSI. A group is
/// a directory in each tree with the same relative path; processes are moved into both.
#[derive(Clone, Debug)]
pub struct HybridBackend {
    memory_root: PathBuf,
    unified_root: PathBuf,
    /// Registers OOM notifiers on an ordinary filesystem too (tests signal them by hand).
    notify_on_plain_fs: bool,
}

impl HybridBackend {
    pub fn new(memory_root: PathBuf, unified_root: PathBuf) -> Self {
        HybridBackend { memory_root, unified_root, notify_on_plain_fs: false }
    }

    /// For fake trees: [`CgroupBackend::oom_notifier`] registers there too, so a test can
    /// signal the eventfd in the kernel's place.
    #[cfg(test)]
    pub(crate) fn notifying_on_plain_fs(mut self) -> Self {
        self.notify_on_plain_fs = true;
        self
    }

    pub fn memory_root(&self) -> &Path {
        &self.memory_root
    }

    pub fn unified_root(&self) -> &Path {
        &self.unified_root
    }

    fn memory_file(&self, group: &GroupPath, name: &str) -> PathBuf {
        group.dir_in(&self.memory_root).join(name)
    }

    fn unsupported(knob: Knob) -> Error {
        let hint = match knob {
            Knob::High => {
                "cgroup v1 has no throttling limit (memory.soft_limit_in_bytes only steers global reclaim); use max, or run on cgroup v2"
            }
            Knob::Min | Knob::Low => "cgroup v1 has no reclaim protection; keep protected groups' limits high instead, or run on cgroup v2",
            Knob::Max => "unreachable",
        };
        Error::Unsupported { knob: knob.name(), backend: "hybrid (v1 memory + v2 PSI)", hint }
    }
}

impl CgroupBackend for HybridBackend {
    fn name(&self) -> &'static str {
        "hybrid (v1 memory + v2 PSI)"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { throttle_limit: false, protection: false, proactive_reclaim: false, limit_below_usage: LimitBelowUsage::Refused }
    }

    fn group_dirs(&self, group: &GroupPath) -> Vec<PathBuf> {
        vec![group.dir_in(&self.memory_root), group.dir_in(&self.unified_root)]
    }

    /// Missing directories in both trees; v1 needs no controller enabling, and cgroup2
    /// accounts PSI for every group without any controller.
    fn plan_create(&self, group: &GroupPath) -> Result<Vec<Change>> {
        let mut changes = Vec::new();
        for root in [&self.memory_root, &self.unified_root] {
            for dir in missing_dirs(group, root) {
                changes.push(Change::Mkdir { dir, evacuate_to: root.clone() });
            }
        }
        Ok(changes)
    }

    fn plan_knob(&self, group: &GroupPath, knob: Knob, bytes: Option<u64>) -> Result<Option<FileWrite>> {
        match (knob, bytes) {
            (Knob::Max, Some(b)) => Ok(Some(FileWrite::new(self.memory_file(group, "memory.limit_in_bytes"), b.to_string(), true))),
            (Knob::Max, None) => Ok(Some(FileWrite::new(self.memory_file(group, "memory.limit_in_bytes"), "-1", true))),
            // Clearing a knob v1 does not have leaves the group exactly as asked.
            (_, None) => Ok(None),
            (_, Some(_)) => Err(Self::unsupported(knob)),
        }
    }

    fn plan_reclaim(&self, _group: &GroupPath, _bytes: u64) -> Result<FileWrite> {
        Err(Error::Unsupported {
            knob: "memory.reclaim",
            backend: "hybrid (v1 memory + v2 PSI)",
            hint: "cgroup v1 has no proactive reclaim file; lower memory.limit_in_bytes temporarily instead",
        })
    }

    fn knob(&self, group: &GroupPath, knob: Knob) -> Result<Option<u64>> {
        if knob != Knob::Max {
            return Ok(None);
        }
        let path = self.memory_file(group, "memory.limit_in_bytes");
        let bytes = parse_bytes(group, &path, &read_trimmed(group, &path)?)?;
        Ok((bytes < V1_UNLIMITED_FROM_BYTES).then_some(bytes))
    }

    fn usage_bytes(&self, group: &GroupPath) -> Result<u64> {
        let path = self.memory_file(group, "memory.usage_in_bytes");
        parse_bytes(group, &path, &read_trimmed(group, &path)?)
    }

    /// Uses the hierarchical `total_*` fields so a group with children counts them, as v2 does.
    fn memory_stat(&self, group: &GroupPath) -> Result<MemoryStat> {
        let path = self.memory_file(group, "memory.stat");
        let origin = path.display().to_string();
        let fields = parse_memory_stat(&read_trimmed(group, &path)?, &origin)?;
        let required =
            |key: &str| fields.get(key).copied().ok_or_else(|| Error::parse("memory.stat", origin.clone(), format!("no `{key}` field")));
        Ok(MemoryStat {
            anon_bytes: required("total_rss")?,
            file_bytes: required("total_cache")?,
            pgmajfault: fields.get("total_pgmajfault").copied().unwrap_or(0),
            workingset_refault: refaults(&fields, "total_"),
            fields,
        })
    }

    fn pressure_file(&self, group: &GroupPath, resource: PsiResource) -> PathBuf {
        group.dir_in(&self.unified_root).join(resource.file_name())
    }

    /// Into the unified group first (PSI), then the memory group (limits): a failure of the
    /// second leaves the process unlimited rather than limited without being observed.
    fn move_pid(&self, group: &GroupPath, pid: u32) -> Result<()> {
        move_pid_into(group, &group.dir_in(&self.unified_root), pid)?;
        move_pid_into(group, &group.dir_in(&self.memory_root), pid)
    }

    fn pids(&self, group: &GroupPath) -> Result<Vec<u32>> {
        read_pids(group, &group.dir_in(&self.memory_root))
    }

    fn remove(&self, group: &GroupPath) -> Result<()> {
        remove_dirs(group, &self.group_dirs(group))
    }

    fn plan_oom_guard(&self, group: &GroupPath) -> Option<FileWrite> {
        Some(FileWrite::new(self.memory_file(group, "memory.oom_control"), "1", true))
    }

    fn plan_oom_release(&self, group: &GroupPath) -> Option<FileWrite> {
        Some(FileWrite::new(self.memory_file(group, "memory.oom_control"), "0", true))
    }

    /// Writes `<eventfd> <fd of memory.oom_control>` to `cgroup.event_control`; the kernel
    /// signals the eventfd when a task starts waiting in `under_oom` (and at once if one
    /// already is). The `memory.oom_control` descriptor is only needed for the write.
    fn oom_notifier(&self, group: &GroupPath) -> Result<Option<nix::sys::eventfd::EventFd>> {
        use nix::sys::eventfd::{EfdFlags, EventFd};
        use std::os::fd::AsRawFd;
        let dir = group.dir_in(&self.memory_root);
        if is_plain_fs(&dir) && !self.notify_on_plain_fs {
            return Ok(None);
        }
        let control = dir.join("cgroup.event_control");
        let eventfd = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| Error::io("create eventfd for", &control, e.into()))?;
        let oom_path = dir.join("memory.oom_control");
        let oom = std::fs::File::open(&oom_path).map_err(|e| Error::group_io("open", &group.to_string(), &oom_path, e))?;
        write_value(&control, &format!("{} {}", eventfd.as_raw_fd(), oom.as_raw_fd()))?;
        Ok(Some(eventfd))
    }

    /// `memory.memsw.limit_in_bytes` and `memory.memsw.usage_in_bytes`, present when the kernel
    /// accounts swap (`swapaccount`); unlimited reads as the same huge value as the memory limit.
    fn combined_limit(&self, group: &GroupPath) -> Result<Option<CombinedLimit>> {
        let path = self.memory_file(group, "memory.memsw.limit_in_bytes");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.parent().is_some_and(Path::is_dir) => return Ok(None),
            Err(e) => return Err(Error::group_io("read", &group.to_string(), &path, e)),
        };
        let limit_bytes = parse_bytes(group, &path, text.trim())?;
        if limit_bytes >= V1_UNLIMITED_FROM_BYTES {
            return Ok(None);
        }
        let usage = self.memory_file(group, "memory.memsw.usage_in_bytes");
        Ok(Some(CombinedLimit { limit_bytes, usage_bytes: parse_bytes(group, &usage, &read_trimmed(group, &usage)?)? }))
    }

    fn oom_file(&self, group: &GroupPath) -> PathBuf {
        self.memory_file(group, "memory.oom_control")
    }
}
