//! critmem's own swapfile.

use super::*;

#[test]
fn a_swapfile_of_our_own_is_set_up_and_torn_down_leaving_other_swap_alone() {
    let test = "a_swapfile_of_our_own_is_set_up_and_torn_down_leaving_other_swap_alone";
    if !nix::unistd::geteuid().is_root() {
        skip(test, "not root (swapon needs root)");
        return;
    }
    let _exclusive = SWAP_SENSITIVE.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let manager = SwapManager::new(dir.path().join("state/swap.json"), PathBuf::from(PROC_ROOT));
    let others_before = manager.active().unwrap();
    let path = dir.path().join("critmem.swap");
    let guard = SwapGuard(manager.clone());
    let state = match manager.setup(&path, 64 * MIB) {
        Ok(state) => state,
        Err(Error::SwapUnsupported { stderr, .. }) => {
            skip(test, &format!("swapon refused a file in {}: {stderr}", dir.path().display()));
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let active = manager.active().unwrap();
    let ours = active.iter().find(|e| e.path == state.path).expect("/proc/swaps lists our swapfile");
    let _ = writeln!(std::io::stderr(), "swap active: {ours:?}");
    assert_eq!(ours.kind, "file");
    assert!(ours.size_bytes >= 60 * MIB && ours.size_bytes <= 64 * MIB, "{}", ours.size_bytes);
    let header = read_swap_header(&state.path).unwrap().unwrap();
    assert_eq!((header.label.as_str(), header.uuid.as_str()), (SWAP_LABEL, state.uuid.as_str()));
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&state.path).unwrap().permissions()) & 0o777;
    assert_eq!(mode, 0o600);
    // A second setup is refused while ours exists.
    assert!(manager.setup(&dir.path().join("second.swap"), 64 * MIB).is_err());

    assert_eq!(manager.teardown().unwrap(), Some(state.path.clone()));
    assert!(!state.path.exists());
    assert_eq!(manager.active().unwrap(), others_before, "other swap must be exactly as it was");
    assert_eq!(manager.teardown().unwrap(), None);
    drop(guard);
}
