//! Fake cgroup trees: directories of plain files that look like cgroupfs.
use super::*;
use std::fs;

pub const V2_FILES: &[(&str, &str)] = &[
    ("cgroup.procs", ""),
    ("cgroup.subtree_control", ""),
    ("memory.current", "4096\n"),
    ("memory.max", "max\n"),
    ("memory.high", "max\n"),
    ("memory.min", "0\n"),
    ("memory.low", "0\n"),
    ("memory.reclaim", ""),
    ("memory.stat", "anon 1000\nfile 2000\npgmajfault 3\nworkingset_refault_anon 4\nworkingset_refault_file 5\n"),
    ("memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"),
    ("memory.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=100\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=40\n"),
    ("io.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=7\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=3\n"),
    ("cpu.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=19\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
    ("cpu.stat", "usage_usec 5000\nuser_usec 4000\nsystem_usec 1000\n"),
    ("cpu.max", "max 100000\n"),
    ("io.max", ""),
];

pub const V1_MEMORY_FILES: &[(&str, &str)] = &[
    ("cgroup.procs", ""),
    ("memory.usage_in_bytes", "8192\n"),
    ("memory.limit_in_bytes", "9223372036854771712\n"),
    ("memory.soft_limit_in_bytes", "9223372036854771712\n"),
    ("memory.stat", "cache 1\nrss 2\ntotal_cache 3000\ntotal_rss 4000\ntotal_pgmajfault 9\ntotal_workingset_refault_file 6\n"),
    ("memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"),
];

pub const UNIFIED_FILES: &[(&str, &str)] = &[
    ("cgroup.procs", ""),
    ("memory.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=11\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=2\n"),
    ("io.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=13\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"),
    ("cpu.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=17\n"),
    ("cpu.stat", "usage_usec 3000\nuser_usec 2000\nsystem_usec 1000\n"),
];

pub const V1_CPU_FILES: &[(&str, &str)] =
    &[("cgroup.procs", ""), ("cpu.cfs_period_us", "100000\n"), ("cpu.cfs_quota_us", "-1\n"), ("cpu.shares", "1024\n")];

pub const V1_CPUACCT_FILES: &[(&str, &str)] = &[("cgroup.procs", ""), ("cpuacct.usage", "7000000\n")];

pub const V1_BLKIO_FILES: &[(&str, &str)] =
    &[("cgroup.procs", ""), ("blkio.throttle.read_bps_device", ""), ("blkio.throttle.write_bps_device", "")];

/// The files a new directory of the fake hybrid trees made by [`hybrid_roots`] and
/// [`v1_bandwidth_roots`] has, by the tree it is in.
pub fn hybrid_files(dir: &Path) -> &'static [(&'static str, &'static str)] {
    let tree = |name: &str| dir.components().any(|c| c.as_os_str() == name);
    if tree("memory") {
        V1_MEMORY_FILES
    } else if tree("cpu") {
        V1_CPU_FILES
    } else if tree("cpuacct") {
        V1_CPUACCT_FILES
    } else if tree("blkio") {
        V1_BLKIO_FILES
    } else {
        UNIFIED_FILES
    }
}

/// The v1 `cpu`, `cpuacct` and `blkio` roots beside [`hybrid_roots`]'s.
pub fn v1_bandwidth_roots(base: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (cpu, cpuacct, blkio) = (base.join("cpu"), base.join("cpuacct"), base.join("blkio"));
    populate(&cpu, &[("cgroup.procs", "1\n"), ("cpu.cfs_period_us", "100000\n"), ("cpu.cfs_quota_us", "-1\n")]);
    populate(&cpuacct, &[("cgroup.procs", "1\n"), ("cpuacct.usage", "1\n")]);
    populate(&blkio, &[("cgroup.procs", "1\n"), ("blkio.throttle.read_bps_device", "")]);
    (cpu, cpuacct, blkio)
}

/// Writes the files a new cgroup directory would have (what the kernel does on mkdir).
pub fn populate(dir: &Path, files: &[(&str, &str)]) {
    fs::create_dir_all(dir).unwrap();
    for (name, contents) in files {
        fs::write(dir.join(name), contents).unwrap();
    }
}

/// A v2 tree whose root has the memory controller available.
pub fn v2_root(root: &Path) {
    populate(root, &[("cgroup.procs", "1\n"), ("cgroup.controllers", "cpu io memory pids\n"), ("cgroup.subtree_control", "cpu memory\n")]);
}

pub fn hybrid_roots(base: &Path) -> (PathBuf, PathBuf) {
    let (memory, unified) = (base.join("memory"), base.join("unified"));
    populate(&memory, &[("cgroup.procs", "1\n"), ("memory.limit_in_bytes", "9223372036854771712\n")]);
    populate(&unified, &[("cgroup.procs", "1\n"), ("cgroup.controllers", "")]);
    (memory, unified)
}

/// Performs planned changes and fills each new directory like the kernel would.
pub fn create(backend: &dyn CgroupBackend, group: &GroupPath, files_for: impl Fn(&Path) -> &'static [(&'static str, &'static str)]) {
    for change in backend.plan_create(group).unwrap() {
        change.perform().unwrap();
        if let Change::Mkdir { dir, .. } = change {
            populate(&dir, files_for(&dir));
        }
    }
}

pub fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap()
}
