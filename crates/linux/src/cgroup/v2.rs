//! [`V2Backend`]: pure cgroup v2.

use super::*;

/// Pure cgroup v2: limits, protections and PSI in one directory.
#[derive(Clone, Debug)]
pub struct V2Backend {
    root: PathBuf,
}

impl V2Backend {
    /// `root` is the cgroup2 mount point (or a fake tree); nothing is checked here, see
    /// [`open_backend`].
    pub fn new(root: PathBuf) -> Self {
        V2Backend { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn file(&self, group: &GroupPath, name: &str) -> PathBuf {
        group.dir_in(&self.root).join(name)
    }
}

impl CgroupBackend for V2Backend {
    fn name(&self) -> &'static str {
        "cgroup v2"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { throttle_limit: true, protection: true, proactive_reclaim: true, limit_below_usage: LimitBelowUsage::OomKills }
    }

    fn group_dirs(&self, group: &GroupPath) -> Vec<PathBuf> {
        vec![group.dir_in(&self.root)]
    }

    /// Creates missing directories and enables the memory controller in every ancestor's
    /// `cgroup.subtree_control` (root included) so the group gets `memory.*` files.
    fn plan_create(&self, group: &GroupPath) -> Result<Vec<Change>> {
        let mut changes = Vec::new();
        let mut parent = self.root.clone();
        for prefix in group.prefixes() {
            let subtree_control = parent.join("cgroup.subtree_control");
            let parent_is_new = changes.iter().any(|c| matches!(c, Change::Mkdir { dir, .. } if *dir == parent));
            let enabled = !parent_is_new
                && std::fs::read_to_string(&subtree_control)
                    .map_err(|e| Error::io("read", &subtree_control, e))?
                    .split_whitespace()
                    .any(|c| c == "memory");
            if !enabled {
                changes.push(Change::Write(FileWrite::new(subtree_control, "+memory", true)));
            }
            let dir = self.root.join(prefix);
            if !dir.is_dir() {
                changes.push(Change::Mkdir { dir: dir.clone(), evacuate_to: self.root.clone() });
            }
            parent = dir;
        }
        Ok(changes)
    }

    fn plan_knob(&self, group: &GroupPath, knob: Knob, bytes: Option<u64>) -> Result<Option<FileWrite>> {
        let value = match (bytes, knob.is_protection()) {
            (Some(b), _) => b.to_string(),
            (None, false) => "max".to_owned(),
            (None, true) => "0".to_owned(),
        };
        let mut write = FileWrite::new(self.file(group, knob.name()), value, true);
        if let (Some(target_bytes), false) = (bytes, knob.is_protection()) {
            write.reclaim_first = Some(ReclaimFirst {
                current: self.file(group, "memory.current"),
                reclaim: self.file(group, "memory.reclaim"),
                target_bytes,
            });
        }
        Ok(Some(write))
    }

    fn plan_reclaim(&self, group: &GroupPath, bytes: u64) -> Result<FileWrite> {
        Ok(FileWrite::new(self.file(group, "memory.reclaim"), bytes.to_string(), false))
    }

    /// Files hold `max` (no limit) or a byte count; a protection of 0 is no protection.
    fn knob(&self, group: &GroupPath, knob: Knob) -> Result<Option<u64>> {
        let path = self.file(group, knob.name());
        let text = read_trimmed(group, &path)?;
        if text == "max" {
            return Ok(None);
        }
        let bytes = parse_bytes(group, &path, &text)?;
        Ok(if knob.is_protection() && bytes == 0 { None } else { Some(bytes) })
    }

    fn usage_bytes(&self, group: &GroupPath) -> Result<u64> {
        let path = self.file(group, "memory.current");
        parse_bytes(group, &path, &read_trimmed(group, &path)?)
    }

    fn memory_stat(&self, group: &GroupPath) -> Result<MemoryStat> {
        let path = self.file(group, "memory.stat");
        let origin = path.display().to_string();
        let fields = parse_memory_stat(&read_trimmed(group, &path)?, &origin)?;
        let required =
            |key: &str| fields.get(key).copied().ok_or_else(|| Error::parse("memory.stat", origin.clone(), format!("no `{key}` field")));
        Ok(MemoryStat {
            anon_bytes: required("anon")?,
            file_bytes: required("file")?,
            pgmajfault: fields.get("pgmajfault").copied().unwrap_or(0),
            workingset_refault: refaults(&fields, ""),
            fields,
        })
    }

    fn pressure_file(&self, group: &GroupPath, resource: PsiResource) -> PathBuf {
        self.file(group, resource.file_name())
    }

    fn move_pid(&self, group: &GroupPath, pid: u32) -> Result<()> {
        move_pid_into(group, &group.dir_in(&self.root), pid)
    }

    fn pids(&self, group: &GroupPath) -> Result<Vec<u32>> {
        read_pids(group, &group.dir_in(&self.root))
    }

    fn remove(&self, group: &GroupPath) -> Result<()> {
        remove_dirs(group, &self.group_dirs(group))
    }

    fn oom_file(&self, group: &GroupPath) -> PathBuf {
        self.file(group, "memory.events")
    }

    fn plan_cpu_max(&self, group: &GroupPath, quota_us: Option<u64>) -> Result<Vec<FileWrite>> {
        let value = bandwidth::v2_cpu_max(quota_us, critmem_policy::CPU_PERIOD_US);
        Ok(vec![FileWrite::new(self.file(group, bandwidth::V2_CPU_MAX), value, true)])
    }

    fn plan_io_max(
        &self,
        group: &GroupPath,
        device: BlockDevice,
        read_bytes_per_s: Option<u64>,
        write_bytes_per_s: Option<u64>,
    ) -> Result<Vec<FileWrite>> {
        let value = bandwidth::v2_io_max(device, read_bytes_per_s, write_bytes_per_s);
        Ok(vec![FileWrite::new(self.file(group, bandwidth::V2_IO_MAX), value, true)])
    }

    fn cpu_max_millicpus(&self, group: &GroupPath) -> Result<Option<u64>> {
        let path = self.file(group, bandwidth::V2_CPU_MAX);
        let text = read_trimmed(group, &path)?;
        bandwidth::parse_v2_cpu_max(&text).ok_or_else(|| Error::parse("cpu.max", path.display().to_string(), format!("{text:?}")))
    }

    fn io_max(&self, group: &GroupPath, device: BlockDevice) -> Result<(Option<u64>, Option<u64>)> {
        Ok(bandwidth::parse_v2_io_max(&read_trimmed(group, &self.file(group, bandwidth::V2_IO_MAX))?, device))
    }

    fn cpu_usage_file(&self, group: &GroupPath) -> CpuUsageFile {
        CpuUsageFile::Stat(self.file(group, "cpu.stat"))
    }

    /// `+cpu` and `+io` in the `cgroup.subtree_control` of the root and every ancestor that
    /// lacks them, where its `cgroup.controllers` offers them.
    fn plan_bandwidth_controllers(&self, group: &GroupPath) -> Result<Vec<Change>> {
        let mut changes = Vec::new();
        let parents = std::iter::once(self.root.clone()).chain(group.prefixes().map(|p| self.root.join(p))).take(group.prefixes().count());
        // What a parent enables here reaches the next level even before the kernel says so.
        let mut enabled_above: Vec<&str> = Vec::new();
        for parent in parents {
            let read = |name: &str| std::fs::read_to_string(parent.join(name)).unwrap_or_default();
            let (offered, enabled) = (read("cgroup.controllers"), read("cgroup.subtree_control"));
            let has = |list: &str, c: &str| list.split_whitespace().any(|w| w == c);
            let wanted: Vec<&str> = ["cpu", "io"].into_iter().filter(|c| has(&offered, c) || enabled_above.contains(c)).collect();
            let missing: Vec<String> = wanted.iter().filter(|c| !has(&enabled, c)).map(|c| format!("+{c}")).collect();
            if !missing.is_empty() {
                changes.push(Change::Write(FileWrite::new(parent.join("cgroup.subtree_control"), missing.join(" "), true)));
            }
            enabled_above = wanted;
        }
        Ok(changes)
    }

    fn swap_usage_file(&self, group: &GroupPath) -> Option<PathBuf> {
        Some(self.file(group, "memory.swap.current"))
    }
}
