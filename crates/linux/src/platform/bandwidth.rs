//! CPU and I/O bandwidth limits of the managed groups: which files a group has for them, what
//! is in force, and applying `SetCpuMax` and `SetIoMax` as [`Platform::apply`]'s contract says.

use super::*;
use critmem_policy::{applied_cpu_millicpus, applied_io_bytes_per_s, CPU_PERIOD_US};

impl Managed {
    /// Whether `path` is one of the files this group's bandwidth limits are written to.
    pub(super) fn writes_bandwidth_to(&self, path: &Path) -> bool {
        self.cpu_paths.iter().flatten().chain(self.io.iter().flat_map(|(_, paths)| paths)).any(|p| p == path)
    }
}

/// Gives a group critmem created the CPU and I/O controllers (journaled, so restore takes them
/// back), enabling them only in cgroups critmem created (`created_dirs`): enabling one in a
/// cgroup it did not create would change the cgroups beside the group (and once others use
/// the controller the kernel refuses to take it back). Where a parent critmem did not create
/// lacks them, the group goes without those limits; so does it after a refusal (a warning).
pub(super) fn enable_controllers(backend: &dyn CgroupBackend, spec: &GroupSpec, created_dirs: &[PathBuf], journal: Option<&mut Journal>) {
    let planned = match backend.plan_bandwidth_controllers(&spec.path) {
        Ok(changes) => changes,
        Err(e) => {
            tracing::warn!(group = %spec.name, error = %e, "cannot tell which CPU and I/O controllers the group's parents enable; it may get no bandwidth limits");
            return;
        }
    };
    // Parents come root first: what one critmem may not change does not enable, the levels
    // below it cannot enable either.
    let mut withheld: Vec<String> = Vec::new();
    let mut changes = Vec::new();
    for change in planned {
        let Change::Write(mut write) = change else { continue };
        let ours = write.path.parent().is_some_and(|d| created_dirs.iter().any(|c| c == d));
        let tokens: Vec<String> = write.contents.split_whitespace().map(str::to_owned).collect();
        if !ours {
            withheld.extend(tokens);
            continue;
        }
        let kept: Vec<String> = tokens.into_iter().filter(|t| !withheld.contains(t)).collect();
        if !kept.is_empty() {
            write.contents = kept.join(" ");
            changes.push(Change::Write(write));
        }
    }
    let Some(journal) = journal else {
        for change in &changes {
            tracing::info!(group = %spec.name, change = %change, "dry run: would enable");
        }
        return;
    };
    for change in &changes {
        if let Err(e) = journal.perform(change) {
            tracing::warn!(group = %spec.name, change = %change, error = %e, "cannot enable a bandwidth controller for the group; it goes without those limits");
        }
    }
}

/// The files a CPU limit of `group` is written to, where they all exist.
pub(super) fn cpu_paths(backend: &dyn CgroupBackend, group: &GroupPath) -> Option<Vec<PathBuf>> {
    let paths: Vec<PathBuf> = backend.plan_cpu_max(group, None).ok()?.into_iter().map(|w| w.path).collect();
    paths.iter().all(|p| p.exists()).then_some(paths)
}

/// `device` and the files an I/O limit of `group` on it is written to, where they all exist.
pub(super) fn io_paths(backend: &dyn CgroupBackend, group: &GroupPath, device: BlockDevice) -> Option<(BlockDevice, Vec<PathBuf>)> {
    let paths: Vec<PathBuf> = backend.plan_io_max(group, device, None, None).ok()?.into_iter().map(|w| w.path).collect();
    paths.iter().all(|p| p.exists()).then_some((device, paths))
}

/// Finds the files of `g`'s bandwidth limits where not found yet (a kernel makes a new
/// group's files at once; a fake tree, or a v2 parent enabling a controller later, after).
pub(super) fn probe(backend: &dyn CgroupBackend, g: &mut Managed, swap_device: Option<BlockDevice>) {
    if g.cpu_paths.is_none() {
        g.cpu_paths = cpu_paths(backend, &g.spec.path);
    }
    if g.io.is_none() {
        g.io = swap_device.and_then(|device| io_paths(backend, &g.spec.path, device));
    }
}

/// The bandwidth limits in force in `g`'s files; a limit whose files cannot be read keeps its
/// last value (a vanished group is found by the memory reads).
pub(super) fn read(backend: &dyn CgroupBackend, g: &Managed) -> BandwidthKnobs {
    let mut knobs = g.bandwidth;
    if g.cpu_paths.is_some() {
        match backend.cpu_max_millicpus(&g.spec.path) {
            Ok(millicpus) => knobs.cpu_millicpus = millicpus,
            Err(e) => tracing::debug!(group = %g.spec.name, error = %e, "cannot read the CPU limit"),
        }
    }
    if let Some((device, _)) = g.io {
        match backend.io_max(&g.spec.path, device) {
            Ok((read, write)) => (knobs.io_read_bytes_per_s, knobs.io_write_bytes_per_s) = (read, write),
            Err(e) => tracing::debug!(group = %g.spec.name, error = %e, "cannot read the I/O limits"),
        }
    }
    knobs
}

impl LinuxPlatform {
    /// A `SetCpuMax` or `SetIoMax` of a group that exists: the limit clamped as the contract
    /// says, written unless already in force, and returned as applied. I/O limits without a
    /// swap disk the group can be limited on, and CPU limits of a group without the CPU
    /// controller's files, are left out.
    pub(super) fn apply_bandwidth(&mut self, action: &Action) -> Result<Option<Action>> {
        let g = &mut self.groups[action.group()];
        probe(self.backend.as_ref(), g, self.swap_device);
        let mut wanted = g.bandwidth;
        let (writes, applied) = match *action {
            Action::SetCpuMax { group, millicpus } => {
                if g.cpu_paths.is_none() {
                    self.stats.cpu_limits_unsupported += 1;
                    if !std::mem::replace(&mut g.warned_no_cpu_limits, true) {
                        tracing::warn!(group = %g.spec.name, "the group has no CPU controller files (an adopted group with no cpu cgroup of its own, or a v2 parent that does not enable cpu); its CPU limits are not applied");
                    }
                    return Ok(None);
                }
                let limit = applied_cpu_millicpus(millicpus, self.cpus);
                wanted.cpu_millicpus = limit;
                let writes = self.backend.plan_cpu_max(&g.spec.path, limit.map(|m| m * CPU_PERIOD_US / 1000))?;
                (writes, Action::SetCpuMax { group, millicpus: limit })
            }
            Action::SetIoMax { group, read_bytes_per_s, write_bytes_per_s } => {
                let Some((device, _)) = g.io else { return Ok(None) };
                let (read, write) = (applied_io_bytes_per_s(read_bytes_per_s), applied_io_bytes_per_s(write_bytes_per_s));
                (wanted.io_read_bytes_per_s, wanted.io_write_bytes_per_s) = (read, write);
                let writes = self.backend.plan_io_max(&g.spec.path, device, read, write)?;
                (writes, Action::SetIoMax { group, read_bytes_per_s: read, write_bytes_per_s: write })
            }
            _ => return Ok(None),
        };
        let group = action.group();
        if self.dry_run {
            // Nothing changes on the machine, so the controller asks again every tick; log
            // each intended value once.
            let g = &mut self.groups[group];
            if g.dry_run_bandwidth != wanted {
                g.dry_run_bandwidth = wanted;
                for write in &writes {
                    self.stats.dry_run_writes += 1;
                    tracing::info!(group = %g.spec.name, path = %write.path.display(), value = %write.contents, "dry run: would write");
                }
            }
            return Ok(Some(applied));
        }
        // The common case: the controller asks again for what is in force.
        if self.groups[group].bandwidth == wanted && !writes.iter().any(|w| self.writer.is_outstanding(&w.path)) {
            return Ok(Some(applied));
        }
        for write in writes {
            if let Some(journal) = self.journal.as_mut() {
                journal.record(&Change::Write(write.clone()))?;
            }
            match self.writer.submit(write) {
                Ok(_) => self.stats.writes_submitted += 1,
                Err(e @ Error::WriterQueueFull { .. }) => {
                    self.stats.writes_dropped += 1;
                    tracing::warn!(error = %e, "write skipped this tick");
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Some(applied))
    }
}
