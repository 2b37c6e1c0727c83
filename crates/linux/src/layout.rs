//! Which cgroup layout this machine has, from the text of `/proc/self/mounts` and
//! `/proc/cgroups`.
//!
//! Two layouts are supported:
//! - **v2**: one cgroup2 hierarchy with the memory controller; limits and PSI in the same
//!   directory.
//! - **hybrid**: the memory controller mounted as cgroup v1 (limits) and a cgroup2 hierarchy
//!   without controllers beside it (per-group PSI). A critmem group is a pair of directories
//!   with the same relative path in both trees.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// One line of `/proc/self/mounts`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub source: String,
    pub mount_point: PathBuf,
    pub fs_type: String,
    pub options: Vec<String>,
}

/// Parses `/proc/self/mounts` (fstab format, see proc(5)):
///
/// ```text
/// cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
/// cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
/// ```
///
/// Fields are separated by spaces; spaces, tabs, newlines and backslashes inside a field are
/// written as octal escapes (`\040`, `\011`, `\012`, `\134`).
pub fn parse_mounts(text: &str) -> Result<Vec<Mount>> {
    let mut mounts = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        // Only space and tab separate: the kernel escapes those, but not \r, \x0b or Unicode
        // spaces, which may appear raw inside a field.
        let fields: Vec<&str> = line.split([' ', '\t']).filter(|f| !f.is_empty()).collect();
        if fields.len() < 4 {
            return Err(Error::parse("mounts", format!("line {}", index + 1), format!("expected at least 4 fields in {line:?}")));
        }
        mounts.push(Mount {
            source: unescape_octal(fields[0]),
            mount_point: PathBuf::from(unescape_octal(fields[1])),
            fs_type: fields[2].to_owned(),
            options: fields[3].split(',').map(str::to_owned).collect(),
        });
    }
    Ok(mounts)
}

/// Undoes the kernel's `\ooo` escapes of mount fields; anything that is not a valid escape is
/// kept as it is.
pub(crate) fn unescape_octal(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b)) {
            let value = (bytes[i + 1] - b'0') as u32 * 64 + (bytes[i + 2] - b'0') as u32 * 8 + (bytes[i + 3] - b'0') as u32;
            if let Ok(byte) = u8::try_from(value) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line of `/proc/cgroups`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerInfo {
    pub name: String,
    /// v1 hierarchy ID; 0 when the controller is bound to cgroup2 or not mounted.
    pub hierarchy: u32,
    pub num_cgroups: u64,
    pub enabled: bool,
}

/// Parses `/proc/cgroups` (tab-separated):
///
/// ```text
/// #subsys_name    hierarchy    num_cgroups    enabled
/// memory    4    35    1
/// ```
///
/// Newer kernels list only controllers usable on v1 here, so a controller missing from this
/// file is not proof that it is missing from cgroup2.
pub fn parse_proc_cgroups(text: &str) -> Result<Vec<ControllerInfo>> {
    let mut controllers = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |reason: &str| Error::parse("/proc/cgroups", format!("line {}", index + 1), format!("{reason} in {line:?}"));
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() != 4 {
            return Err(bad("expected 4 fields"));
        }
        let number = |s: &str| s.parse::<u64>().map_err(|_| bad("expected a number"));
        controllers.push(ControllerInfo {
            name: fields[0].to_owned(),
            hierarchy: u32::try_from(number(fields[1])?).map_err(|_| bad("hierarchy ID out of range"))?,
            num_cgroups: number(fields[2])?,
            enabled: match fields[3] {
                "1" => true,
                "0" => false,
                _ => return Err(bad("enabled must be 0 or 1")),
            },
        });
    }
    Ok(controllers)
}

/// Where the memory controller and PSI live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One cgroup2 tree holds limits and PSI.
    V2 { root: PathBuf },
    /// Limits in the cgroup v1 memory tree, PSI in the cgroup2 tree; CPU and I/O bandwidth and
    /// CPU time in the v1 `cpu`, `cpuacct` and `blkio` trees where mounted.
    Hybrid { memory_root: PathBuf, unified_root: PathBuf, bandwidth: V1BandwidthRoots },
}

/// The v1 hierarchies of CPU and I/O bandwidth and CPU time, where the machine mounts them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct V1BandwidthRoots {
    pub cpu: Option<PathBuf>,
    pub cpuacct: Option<PathBuf>,
    pub blkio: Option<PathBuf>,
}

impl V1BandwidthRoots {
    /// The v1 mounts carrying each controller.
    pub fn from_mounts(mounts: &[Mount]) -> Self {
        let v1 = |controller: &str| {
            mounts.iter().find(|m| m.fs_type == "cgroup" && m.options.iter().any(|o| o == controller)).map(|m| m.mount_point.clone())
        };
        V1BandwidthRoots { cpu: v1("cpu"), cpuacct: v1("cpuacct"), blkio: v1("blkio") }
    }
}

impl Layout {
    /// Name for logs and error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Layout::V2 { .. } => "cgroup v2",
            Layout::Hybrid { .. } => "hybrid (v1 memory + v2 PSI)",
        }
    }

    /// The root of the tree that holds the memory limits.
    pub fn memory_root(&self) -> &Path {
        match self {
            Layout::V2 { root } => root,
            Layout::Hybrid { memory_root, .. } => memory_root,
        }
    }
}

/// Decides the layout from the two files' text.
///
/// A v1 mount carrying the `memory` option wins (the controller can be bound to only one
/// hierarchy, so cgroup2 then has no memory controller); it needs a cgroup2 mount beside it
/// for PSI. Otherwise the first cgroup2 mount is the v2 root; whether its memory controller is
/// really available is checked against the tree when the backend is opened.
pub fn detect_layout(mounts_text: &str, proc_cgroups_text: &str) -> Result<Layout> {
    let mounts = parse_mounts(mounts_text)?;
    let controllers = parse_proc_cgroups(proc_cgroups_text)?;
    if let Some(memory) = controllers.iter().find(|c| c.name == "memory") {
        if !memory.enabled {
            return Err(Error::NoMemoryController {
                detail: "/proc/cgroups lists memory as disabled (cgroup_disable=memory on the kernel command line?)".into(),
            });
        }
    }
    let unified = mounts.iter().find(|m| m.fs_type == "cgroup2").map(|m| m.mount_point.clone());
    let v1_memory = mounts.iter().find(|m| m.fs_type == "cgroup" && m.options.iter().any(|o| o == "memory")).map(|m| m.mount_point.clone());
    match (v1_memory, unified) {
        (Some(memory_root), Some(unified_root)) => {
            Ok(Layout::Hybrid { memory_root, unified_root, bandwidth: V1BandwidthRoots::from_mounts(&mounts) })
        }
        (Some(_), None) => Err(Error::PsiMissing { path: PathBuf::from("cgroup2 mount (none in /proc/self/mounts)") }),
        (None, Some(root)) => Ok(Layout::V2 { root }),
        (None, None) => {
            if mounts.iter().any(|m| m.fs_type == "cgroup") {
                Err(Error::NoMemoryController {
                    detail: "cgroup v1 is mounted but no hierarchy carries the memory controller, and there is no cgroup2 mount".into(),
                })
            } else {
                Err(Error::NoCgroupFs { mounts: PathBuf::from("/proc/self/mounts") })
            }
        }
    }
}

/// Reads `<proc_root>/self/mounts` and `<proc_root>/cgroups` and detects the layout.
pub fn detect_layout_in(proc_root: &Path) -> Result<Layout> {
    let read = |name: &str| {
        let path = proc_root.join(name);
        std::fs::read_to_string(&path).map_err(|e| Error::io("read", &path, e))
    };
    detect_layout(&read("self/mounts")?, &read("cgroups")?).map_err(|e| match e {
        Error::NoCgroupFs { .. } => Error::NoCgroupFs { mounts: proc_root.join("self/mounts") },
        other => other,
    })
}

#[cfg(test)]
pub(crate) mod fixtures {
    /// This project's machines (captured from one of them).
    pub const HYBRID_MOUNTS: &str = "\
proc /proc proc rw,relatime 0 0
sysfs /sys sysfs rw,relatime 0 0
/dev/vda / ext4 rw,relatime,discard 0 0
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/devices cgroup rw,relatime,devices 0 0
cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
";
    pub const HYBRID_CGROUPS: &str = "\
#subsys_name\thierarchy\tnum_cgroups\tenabled
cpuset\t3\t1\t1
cpu\t1\t1\t1
cpuacct\t2\t1\t1
blkio\t7\t1\t1
memory\t4\t35\t1
devices\t5\t1\t1
net_cls\t0\t1\t1
pids\t8\t1\t1
";
    /// A systemd machine with only cgroup2.
    pub const V2_MOUNTS: &str = "\
sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot 0 0
/dev/nvme0n1p2 /mnt/my\\040disk ext4 rw,relatime 0 0
";
    pub const V2_CGROUPS: &str = "\
#subsys_name\thierarchy\tnum_cgroups\tenabled
cpuset\t0\t83\t1
cpu\t0\t83\t1
memory\t0\t83\t1
";
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use proptest::prelude::*;

    /// The kernel's escaping of mount fields (`mangle` in fs/proc_namespace.c): space, tab,
    /// newline and backslash as `\ooo`; every other character as it is.
    fn escape_field(field: &str) -> String {
        field.chars().map(|c| if matches!(c, ' ' | '\t' | '\n' | '\\') { format!("\\{:03o}", c as u32) } else { c.to_string() }).collect()
    }

    /// A mount source or mount point: any text, weighted towards what needs escaping.
    fn mount_field() -> impl Strategy<Value = String> {
        prop_oneof![any::<String>(), r"[/a-z \t\n\\0-7\r\x0b\x0c\u{a0}\u{2028}\u{3000}]{0,12}"]
            .prop_filter("fields are not empty", |f| !f.is_empty())
    }

    #[test]
    fn hybrid_layout_is_detected_from_this_machines_files() {
        let layout = detect_layout(HYBRID_MOUNTS, HYBRID_CGROUPS).unwrap();
        let bandwidth = V1BandwidthRoots {
            cpu: Some("/sys/fs/cgroup/cpu".into()),
            cpuacct: Some("/sys/fs/cgroup/cpuacct".into()),
            blkio: Some("/sys/fs/cgroup/blkio".into()),
        };
        assert_eq!(
            layout,
            Layout::Hybrid { memory_root: "/sys/fs/cgroup/memory".into(), unified_root: "/sys/fs/cgroup/unified".into(), bandwidth }
        );
    }

    #[test]
    fn v2_layout_is_detected_on_a_pure_cgroup2_machine() {
        assert_eq!(detect_layout(V2_MOUNTS, V2_CGROUPS).unwrap(), Layout::V2 { root: "/sys/fs/cgroup".into() });
    }

    #[test]
    fn co_mounted_v1_memory_controller_is_found() {
        let mounts = "cgroup /cg/cpu,memory cgroup rw,cpu,memory 0 0\ncgroup2 /cg/unified cgroup2 rw 0 0\n";
        let layout = detect_layout(mounts, "").unwrap();
        let bandwidth = V1BandwidthRoots { cpu: Some("/cg/cpu,memory".into()), ..V1BandwidthRoots::default() };
        assert_eq!(layout, Layout::Hybrid { memory_root: "/cg/cpu,memory".into(), unified_root: "/cg/unified".into(), bandwidth });
    }

    #[test]
    fn v1_memory_without_cgroup2_is_psi_missing() {
        let mounts = "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n";
        let err = detect_layout(mounts, HYBRID_CGROUPS).unwrap_err();
        assert!(err.to_string().starts_with("PSI missing"), "{err}");
    }

    #[test]
    fn disabled_memory_controller_is_reported() {
        let err = detect_layout(V2_MOUNTS, "memory\t0\t1\t0\n").unwrap_err();
        assert!(err.to_string().contains("memory controller missing"), "{err}");
    }

    #[test]
    fn no_cgroup_mount_at_all_is_reported() {
        let err = detect_layout("proc /proc proc rw 0 0\n", "").unwrap_err();
        assert!(matches!(err, Error::NoCgroupFs { .. }), "{err}");
    }

    #[test]
    fn mount_escapes_are_undone() {
        let mounts = parse_mounts(V2_MOUNTS).unwrap();
        assert_eq!(mounts[3].mount_point, PathBuf::from("/mnt/my disk"));
        assert_eq!(unescape_octal(r"a\134b\011"), "a\\b\t");
        assert_eq!(unescape_octal(r"trailing\04"), r"trailing\04");
    }

    proptest! {
        #[test]
        fn layout_parsers_never_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_mounts(&text);
            let _ = parse_proc_cgroups(&text);
            let _ = detect_layout(&text, &text);
        }

        /// Mount-shaped lines: too few or many fields, bad and truncated escapes, odd spacing.
        #[test]
        fn mounts_never_panic_on_mount_like_text(text in r"(([ \t]{0,2}([a-z/,=]|\\[0-9]{0,4}){0,8}){0,7}[ \t]{0,2}\r?\n){0,5}") {
            let _ = parse_mounts(&text);
        }

        /// Numbers that overflow u64 and u32, signs, missing and extra fields.
        #[test]
        fn proc_cgroups_never_panics_on_cgroups_like_text(text in r"(#?([ \t]{0,2}([a-z_]{0,8}|(-|\+)?[0-9]{0,22})){0,5}[ \t]{0,2}\r?\n){0,5}") {
            let _ = parse_proc_cgroups(&text);
        }

        /// `source mount_point fs_type options 0 0`, fields escaped like the kernel does.
        #[test]
        fn mounts_parse_back(mounts in proptest::collection::vec((mount_field(), mount_field(), r"[a-z0-9_.]{1,10}", proptest::collection::vec(r"[a-z0-9_=.]{1,10}", 1..5)), 0..8)) {
            let text: String = mounts
                .iter()
                .map(|(source, point, fs_type, options)| format!("{} {} {fs_type} {} 0 0\n", escape_field(source), escape_field(point), options.join(",")))
                .collect();
            let want: Vec<Mount> = mounts
                .into_iter()
                .map(|(source, point, fs_type, options)| Mount { source, mount_point: PathBuf::from(point), fs_type, options })
                .collect();
            prop_assert_eq!(parse_mounts(&text).unwrap(), want);
        }

        /// `%s\t%d\t%d\t%d\n` under the header, as kernel/cgroup/cgroup-v1.c prints it.
        #[test]
        fn proc_cgroups_parse_back(controllers in proptest::collection::vec((r"[a-z_]{1,12}", any::<u32>(), any::<u64>(), any::<bool>()), 0..16)) {
            let mut text = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n".to_owned();
            for (name, hierarchy, num, enabled) in &controllers {
                text.push_str(&format!("{name}\t{hierarchy}\t{num}\t{}\n", u8::from(*enabled)));
            }
            let want: Vec<ControllerInfo> = controllers
                .into_iter()
                .map(|(name, hierarchy, num_cgroups, enabled)| ControllerInfo { name, hierarchy, num_cgroups, enabled })
                .collect();
            prop_assert_eq!(parse_proc_cgroups(&text).unwrap(), want);
        }
    }

    /// Found by `mounts_parse_back`: a mount point with a raw non-ASCII space (the kernel
    /// escapes only space, tab, newline, backslash) was split into two fields.
    #[test]
    fn unescaped_unicode_and_control_spaces_stay_inside_a_field() {
        let mounts = parse_mounts("\u{3000} ก . a 0 0\n/dev/x /mnt/a\u{a0}b\rc\x0bd ext4 rw 0 0\n").unwrap();
        assert_eq!(mounts[0], Mount { source: "\u{3000}".into(), mount_point: "ก".into(), fs_type: ".".into(), options: vec!["a".into()] });
        assert_eq!(mounts[1].mount_point, PathBuf::from("/mnt/a\u{a0}b\rc\x0bd"));
        assert_eq!(mounts[1].fs_type, "ext4");
    }

    #[test]
    fn garbage_is_rejected_with_the_line() {
        assert!(parse_mounts("justone\n").unwrap_err().to_string().contains("line 1"));
        assert!(parse_proc_cgroups("memory x 1 1\n").is_err());
        assert!(parse_proc_cgroups("memory 1 1 2\n").is_err());
        assert!(parse_proc_cgroups("memory 1 1\n").is_err());
    }
}
