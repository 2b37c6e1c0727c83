//! [`HybridBackend`]: the cgroup v1 memory controller for limits, cgroup2 for PSI.

use super::*;

/// v1 reports "no limit" as the largest page-aligned value that fits a signed long
/// (9223372036854771712 with 4 KiB pages); anything this large is no limit.
const V1_UNLIMITED_FROM_BYTES: u64 = 1 << 62;

/// The hybrid layout: v1 memory controller for limits and usage, cgroup2 for PSI. A group is
/// a directory in each tree with the same relative path; processes are moved into both, and
/// into the group's directories in the v1 `cpu`, `cpuacct` and `blkio` hierarchies where the
/// machine mounts them (CPU and I/O bandwidth, CPU time).
#[derive(Clone, Debug)]
pub struct HybridBackend {
    memory_root: PathBuf,
    unified_root: PathBuf,
    /// The v1 `cpu`, `cpuacct` and `blkio` hierarchies, where mounted.
    cpu_root: Option<PathBuf>,
    cpuacct_root: Option<PathBuf>,
    blkio_root: Option<PathBuf>,
    /// Registers OOM notifiers on an ordinary filesystem too (tests signal them by hand).
    notify_on_plain_fs: bool,
}

impl HybridBackend {
    pub fn new(memory_root: PathBuf, unified_root: PathBuf) -> Self {
        HybridBackend { memory_root, unified_root, cpu_root: None, cpuacct_root: None, blkio_root: None, notify_on_plain_fs: false }
    }

    /// With the v1 `cpu`, `cpuacct` and `blkio` hierarchies (one root may hold several).
    pub fn with_bandwidth_roots(mut self, cpu: Option<PathBuf>, cpuacct: Option<PathBuf>, blkio: Option<PathBuf>) -> Self {
        (self.cpu_root, self.cpuacct_root, self.blkio_root) = (cpu, cpuacct, blkio);
        self
    }

    /// The bandwidth and CPU-time hierarchies' roots, each once (`cpu,cpuacct` is often one).
    fn bandwidth_roots(&self) -> Vec<&PathBuf> {
        let mut roots: Vec<&PathBuf> = Vec::new();
        for root in [&self.cpu_root, &self.cpuacct_root, &self.blkio_root].into_iter().flatten() {
            if !roots.contains(&root) && *root != self.memory_root && *root != self.unified_root {
                roots.push(root);
            }
        }
        roots
    }

    fn cpu_file(&self, group: &GroupPath, name: &str) -> Result<PathBuf> {
        match &self.cpu_root {
            Some(root) => Ok(group.dir_in(root).join(name)),
            None => Err(Error::Unsupported {
                knob: "cpu.cfs_quota_us",
                backend: "hybrid (v1 memory + v2 PSI)",
                hint: "the machine mounts no cgroup v1 cpu hierarchy; mount one (mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu)",
            }),
        }
    }

    fn blkio_file(&self, group: &GroupPath, name: &str) -> Result<PathBuf> {
        match &self.blkio_root {
            Some(root) => Ok(group.dir_in(root).join(name)),
            None => Err(Error::Unsupported {
                knob: "blkio.throttle",
                backend: "hybrid (v1 memory + v2 PSI)",
                hint: "the machine mounts no cgroup v1 blkio hierarchy; mount one (mount -t cgroup -o blkio cgroup /sys/fs/cgroup/blkio)",
            }),
        }
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

    /// The memory and unified directories, then those in the bandwidth hierarchies.
    fn group_dirs(&self, group: &GroupPath) -> Vec<PathBuf> {
        let mut dirs = vec![group.dir_in(&self.memory_root), group.dir_in(&self.unified_root)];
        dirs.extend(self.bandwidth_roots().into_iter().map(|root| group.dir_in(root)));
        dirs
    }

    /// Whether the memory and unified directories exist: a group critmem adopts may have no
    /// directory of its own in the bandwidth hierarchies (then it gets no such limits).
    fn exists(&self, group: &GroupPath) -> bool {
        group.dir_in(&self.memory_root).is_dir() && group.dir_in(&self.unified_root).is_dir()
    }

    /// Missing directories in every tree; v1 needs no controller enabling, and cgroup2
    /// accounts PSI for every group without any controller.
    fn plan_create(&self, group: &GroupPath) -> Result<Vec<Change>> {
        let mut changes = Vec::new();
        for root in [&self.memory_root, &self.unified_root].into_iter().chain(self.bandwidth_roots()) {
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
    /// second leaves the process unlimited rather than limited without being observed. Then
    /// into the group's bandwidth directories, where it has them.
    fn move_pid(&self, group: &GroupPath, pid: u32) -> Result<()> {
        move_pid_into(group, &group.dir_in(&self.unified_root), pid)?;
        move_pid_into(group, &group.dir_in(&self.memory_root), pid)?;
        for dir in self.bandwidth_roots().into_iter().map(|root| group.dir_in(root)).filter(|d| d.is_dir()) {
            move_pid_into(group, &dir, pid)?;
        }
        Ok(())
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

    /// The period first: a quota is a share of it.
    fn plan_cpu_max(&self, group: &GroupPath, quota_us: Option<u64>) -> Result<Vec<FileWrite>> {
        Ok(vec![
            FileWrite::new(self.cpu_file(group, bandwidth::V1_CFS_PERIOD)?, critmem_policy::CPU_PERIOD_US.to_string(), true),
            FileWrite::new(self.cpu_file(group, bandwidth::V1_CFS_QUOTA)?, bandwidth::v1_cfs_quota(quota_us), true),
        ])
    }

    fn plan_io_max(
        &self,
        group: &GroupPath,
        device: BlockDevice,
        read_bytes_per_s: Option<u64>,
        write_bytes_per_s: Option<u64>,
    ) -> Result<Vec<FileWrite>> {
        Ok(vec![
            FileWrite::new(self.blkio_file(group, bandwidth::V1_READ_BPS)?, bandwidth::v1_bps(device, read_bytes_per_s), true),
            FileWrite::new(self.blkio_file(group, bandwidth::V1_WRITE_BPS)?, bandwidth::v1_bps(device, write_bytes_per_s), true),
        ])
    }

    fn cpu_max_millicpus(&self, group: &GroupPath) -> Result<Option<u64>> {
        let (quota, period) = (self.cpu_file(group, bandwidth::V1_CFS_QUOTA)?, self.cpu_file(group, bandwidth::V1_CFS_PERIOD)?);
        let (quota_text, period_text) = (read_trimmed(group, &quota)?, read_trimmed(group, &period)?);
        bandwidth::parse_v1_cfs(&quota_text, &period_text).ok_or_else(|| {
            Error::parse("CFS bandwidth", quota.display().to_string(), format!("quota {quota_text:?}, period {period_text:?}"))
        })
    }

    fn io_max(&self, group: &GroupPath, device: BlockDevice) -> Result<(Option<u64>, Option<u64>)> {
        let read =
            |name| -> Result<Option<u64>> { Ok(bandwidth::parse_v1_bps(&read_trimmed(group, &self.blkio_file(group, name)?)?, device)) };
        Ok((read(bandwidth::V1_READ_BPS)?, read(bandwidth::V1_WRITE_BPS)?))
    }

    /// `cpuacct.usage` where the group has a directory in the v1 cpuacct hierarchy; otherwise
    /// `cpu.stat` of its unified directory (which cgroup2 keeps for every group).
    fn cpu_usage_file(&self, group: &GroupPath) -> CpuUsageFile {
        match self.cpuacct_root.as_ref().map(|root| group.dir_in(root)).filter(|d| d.is_dir()) {
            Some(dir) => CpuUsageFile::Nanoseconds(dir.join("cpuacct.usage")),
            None => CpuUsageFile::Stat(group.dir_in(&self.unified_root).join("cpu.stat")),
        }
    }
}
