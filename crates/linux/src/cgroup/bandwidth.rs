//! CPU and block I/O bandwidth limits in the kernel's syntax, shared by the platform's groups
//! and HiRes reservation trees:
//!
//! | limit | cgroup v1 | cgroup v2 |
//! |---|---|---|
//! | CPU | `cpu.cfs_period_us`, `cpu.cfs_quota_us` (`-1`: none) | `cpu.max` (`QUOTA PERIOD`, `max PERIOD`) |
//! | reads of a disk | `blkio.throttle.read_bps_device` (`MAJ:MIN BYTES`, `0` removes) | `io.max` `rbps=` (`max`: none) |
//! | writes to a disk | `blkio.throttle.write_bps_device` | `io.max` `wbps=` |
//!
//! The kernel throttles whole disks only, so a limit names the disk holding a file
//! ([`whole_disk_of`]).

use std::fmt;
use std::path::{Path, PathBuf};

/// `cpu.max` of cgroup v2.
pub const V2_CPU_MAX: &str = "cpu.max";
/// `io.max` of cgroup v2.
pub const V2_IO_MAX: &str = "io.max";
pub const V1_CFS_PERIOD: &str = "cpu.cfs_period_us";
pub const V1_CFS_QUOTA: &str = "cpu.cfs_quota_us";
pub const V1_READ_BPS: &str = "blkio.throttle.read_bps_device";
pub const V1_WRITE_BPS: &str = "blkio.throttle.write_bps_device";

/// A block device by number, as the cgroup files name it (`254:0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockDevice {
    pub major: u64,
    pub minor: u64,
}

impl fmt::Display for BlockDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

impl From<(u64, u64)> for BlockDevice {
    fn from((major, minor): (u64, u64)) -> Self {
        BlockDevice { major, minor }
    }
}

/// v2 `cpu.max`: `quota_us` of CPU time per `period_us` over all of the group's tasks.
pub fn v2_cpu_max(quota_us: Option<u64>, period_us: u64) -> String {
    match quota_us {
        Some(quota_us) => format!("{quota_us} {period_us}"),
        None => format!("max {period_us}"),
    }
}

/// v1 `cpu.cfs_quota_us`: `-1` is no limit.
pub fn v1_cfs_quota(quota_us: Option<u64>) -> String {
    quota_us.map_or_else(|| "-1".to_owned(), |q| q.to_string())
}

/// v2 `io.max` for one disk; `max` where a direction has no limit.
pub fn v2_io_max(device: BlockDevice, read_bytes_per_s: Option<u64>, write_bytes_per_s: Option<u64>) -> String {
    let limit = |l: Option<u64>| l.map_or_else(|| "max".to_owned(), |b| b.to_string());
    format!("{device} rbps={} wbps={}", limit(read_bytes_per_s), limit(write_bytes_per_s))
}

/// v1 `blkio.throttle.*_bps_device` for one disk; `0` removes the disk's rule.
pub fn v1_bps(device: BlockDevice, bytes_per_s: Option<u64>) -> String {
    format!("{device} {}", bytes_per_s.unwrap_or(0))
}

/// Thousandths of one CPU that a quota per period is.
pub fn millicpus(quota_us: u64, period_us: u64) -> Option<u64> {
    (period_us > 0).then(|| quota_us.saturating_mul(1000) / period_us)
}

/// The CPU limit in a v2 `cpu.max` (`max 100000`, `50000 100000`), in millicpus; `None` inside
/// when unlimited, outside when unreadable.
pub fn parse_v2_cpu_max(text: &str) -> Option<Option<u64>> {
    let mut words = text.split_whitespace();
    let (quota, period) = (words.next()?, words.next().unwrap_or("100000"));
    let period_us = period.parse::<u64>().ok()?;
    if quota == "max" {
        return Some(None);
    }
    Some(Some(millicpus(quota.parse().ok()?, period_us)?))
}

/// The CPU limit of v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us`, in millicpus, as
/// [`parse_v2_cpu_max`].
pub fn parse_v1_cfs(quota: &str, period: &str) -> Option<Option<u64>> {
    let quota = quota.trim().parse::<i64>().ok()?;
    let period_us = period.trim().parse::<u64>().ok()?;
    match u64::try_from(quota) {
        Ok(quota_us) => Some(Some(millicpus(quota_us, period_us)?)),
        Err(_) => Some(None),
    }
}

/// The read and write limits of `device` in a v2 `io.max` (one line per disk with a limit:
/// `254:0 rbps=1048576 wbps=max riops=max wiops=max`).
pub fn parse_v2_io_max(text: &str, device: BlockDevice) -> (Option<u64>, Option<u64>) {
    let name = device.to_string();
    let Some(line) = text.lines().find(|l| l.split_whitespace().next() == Some(name.as_str())) else { return (None, None) };
    let field = |key: &str| line.split_whitespace().find_map(|w| w.strip_prefix(key)).and_then(|v| v.parse::<u64>().ok());
    (field("rbps="), field("wbps="))
}

/// The limit of `device` in a v1 `blkio.throttle.*_bps_device` (`254:0 1048576` lines).
pub fn parse_v1_bps(text: &str, device: BlockDevice) -> Option<u64> {
    let name = device.to_string();
    text.lines().find_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
        [d, n] if d == name => n.parse::<u64>().ok().filter(|&n| n > 0),
        _ => None,
    })
}

/// The writes that turn a per-disk rule file (`io.max`, v1 `blkio.throttle.*_device`) from
/// `current` back into `original`: each disk's original line, and for a disk with no
/// original line, its rule removed. One rule per write, as the kernel takes them.
pub fn device_rules_restore(file_name: &str, current: &str, original: &str) -> Vec<String> {
    let device_of = |l: &str| l.split_whitespace().next().map(str::to_owned);
    let original_devices: Vec<String> = original.lines().filter_map(device_of).collect();
    let mut writes: Vec<String> = current
        .lines()
        .filter_map(device_of)
        .filter(|d| !original_devices.contains(d))
        .map(|d| if file_name == V2_IO_MAX { format!("{d} rbps=max wbps=max riops=max wiops=max") } else { format!("{d} 0") })
        .collect();
    writes.extend(original.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned));
    writes
}

/// Whether `path` is a per-disk rule file ([`device_rules_restore`]).
pub fn is_device_rules_file(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| [V2_IO_MAX, V1_READ_BPS, V1_WRITE_BPS].contains(&n))
}

/// The disk holding `path`: a block device node's own number, or else the device of the
/// filesystem holding `path`; a partition is taken as its whole disk (by `sys_root`'s
/// `dev/block/MAJ:MIN`, normally `/sys`), which is what the kernel throttles.
pub fn whole_disk_of(path: &Path, sys_root: &Path) -> std::result::Result<BlockDevice, String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let dev = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
    disk_of(BlockDevice { major: nix::sys::stat::major(dev), minor: nix::sys::stat::minor(dev) }, sys_root)
        .map_err(|reason| format!("{}: {reason}", path.display()))
}

/// `device` itself if it is a whole disk, its disk if it is a partition.
pub fn disk_of(device: BlockDevice, sys_root: &Path) -> std::result::Result<BlockDevice, String> {
    let sys: PathBuf = sys_root.join(format!("dev/block/{device}"));
    if !sys.exists() {
        return Err(format!(
            "on device {device}, which is no block device (a tmpfs, overlay or network filesystem has no disk to throttle)"
        ));
    }
    if !sys.join("partition").exists() {
        return Ok(device);
    }
    let disk = std::fs::read_to_string(sys.join("../dev")).map_err(|e| format!("the disk of partition {device}: {e}"))?;
    let unreadable = || format!("unreadable disk number {disk:?} of partition {device}");
    let (major, minor) = disk.trim().split_once(':').ok_or_else(unreadable)?;
    Ok(BlockDevice { major: major.parse().map_err(|_| unreadable())?, minor: minor.parse().map_err(|_| unreadable())? })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VDA: BlockDevice = BlockDevice { major: 254, minor: 0 };

    #[test]
    fn limits_are_written_in_the_kernels_syntax() {
        assert_eq!(v2_cpu_max(Some(50_000), 100_000), "50000 100000");
        assert_eq!(v2_cpu_max(None, 100_000), "max 100000");
        assert_eq!((v1_cfs_quota(Some(1000)), v1_cfs_quota(None)), ("1000".to_owned(), "-1".to_owned()));
        assert_eq!(v2_io_max(VDA, Some(1 << 20), None), "254:0 rbps=1048576 wbps=max");
        assert_eq!((v1_bps(VDA, Some(4096)), v1_bps(VDA, None)), ("254:0 4096".to_owned(), "254:0 0".to_owned()));
    }

    #[test]
    fn limits_read_back_as_written_and_unlimited_as_none() {
        assert_eq!(parse_v2_cpu_max("max 100000\n"), Some(None));
        assert_eq!(parse_v2_cpu_max("25000 50000\n"), Some(Some(500)));
        assert_eq!(parse_v2_cpu_max("garbage"), None);
        assert_eq!(parse_v1_cfs("-1\n", "100000\n"), Some(None));
        assert_eq!(parse_v1_cfs("1000\n", "100000\n"), Some(Some(10)));
        let io = "8:0 rbps=1 wbps=2 riops=max wiops=max\n254:0 rbps=1048576 wbps=max riops=max wiops=max\n";
        assert_eq!(parse_v2_io_max(io, VDA), (Some(1 << 20), None));
        assert_eq!(parse_v2_io_max("", VDA), (None, None));
        assert_eq!(parse_v1_bps("8:0 7\n254:0 4096\n", VDA), Some(4096));
        assert_eq!(parse_v1_bps("8:0 7\n", VDA), None);
    }

    #[test]
    fn rule_files_go_back_to_their_original_lines_disk_by_disk() {
        assert_eq!(device_rules_restore(V1_READ_BPS, "254:0 4096\n8:0 7\n", "8:0 7"), ["254:0 0", "8:0 7"]);
        assert_eq!(
            device_rules_restore(V2_IO_MAX, "254:0 rbps=1 wbps=max riops=max wiops=max\n", ""),
            ["254:0 rbps=max wbps=max riops=max wiops=max"]
        );
        assert!(is_device_rules_file(Path::new("/cg/g/io.max")) && !is_device_rules_file(Path::new("/cg/g/cpu.max")));
    }

    #[test]
    fn a_partition_is_throttled_as_its_disk() {
        let sys = tempfile::tempdir().unwrap();
        let block = sys.path().join("dev/block");
        std::fs::create_dir_all(sys.path().join("devices/vda/vda1")).unwrap();
        std::fs::write(sys.path().join("devices/vda/dev"), "254:0\n").unwrap();
        std::fs::write(sys.path().join("devices/vda/vda1/partition"), "1\n").unwrap();
        std::fs::create_dir_all(&block).unwrap();
        std::os::unix::fs::symlink(sys.path().join("devices/vda/vda1"), block.join("254:1")).unwrap();
        std::os::unix::fs::symlink(sys.path().join("devices/vda"), block.join("254:0")).unwrap();
        assert_eq!(disk_of(BlockDevice { major: 254, minor: 1 }, sys.path()), Ok(VDA));
        assert_eq!(disk_of(VDA, sys.path()), Ok(VDA));
        assert!(disk_of(BlockDevice { major: 0, minor: 42 }, sys.path()).unwrap_err().contains("no block device"));
    }
}
