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
    // The state directory did not exist: setup made it, owner-only.
    let state_dir = dir.path().join("state");
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&state_dir).unwrap().permissions()) & 0o777, 0o700);
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
    assert!(!state_dir.exists(), "teardown removes the state directory setup made");
    assert_eq!(swap_identities(&manager.active().unwrap()), swap_identities(&others_before), "other swap must be exactly as it was");
    assert_eq!(manager.teardown().unwrap(), None);
    drop(guard);
}

/// The default layout on a fresh machine: state and swapfile in one directory that does not
/// exist yet (`/var/lib/critmem`), here under a temporary root.
#[test]
fn setup_makes_a_missing_state_directory_and_teardown_removes_only_what_it_made() {
    let test = "setup_makes_a_missing_state_directory_and_teardown_removes_only_what_it_made";
    if !nix::unistd::geteuid().is_root() {
        skip(test, "not root (swapon needs root)");
        return;
    }
    let _exclusive = SWAP_SENSITIVE.lock().unwrap_or_else(|p| p.into_inner());
    let root = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    std::fs::create_dir(root.path().join("var")).unwrap();
    let state_dir = root.path().join("var/lib/critmem");
    let manager = SwapManager::new(state_dir.join("swap.json"), PathBuf::from(PROC_ROOT));
    let guard = SwapGuard(manager.clone());
    let state = match manager.setup(&state_dir.join("critmem.swap"), 64 * MIB) {
        Ok(state) => state,
        Err(Error::SwapUnsupported { stderr, .. }) => {
            skip(test, &format!("swapon refused a file in {}: {stderr}", state_dir.display()));
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert_eq!(state.created_dirs, vec![root.path().join("var/lib"), state_dir.clone()], "only the missing directories are recorded");
    assert_eq!(manager.teardown().unwrap(), Some(state.path.clone()));
    assert!(!root.path().join("var/lib").exists(), "both directories setup made are gone");
    assert!(root.path().join("var").is_dir(), "the directory that was there stays");

    // A file someone else put beside the state keeps the directory.
    let state = manager.setup(&state_dir.join("critmem.swap"), 64 * MIB).unwrap();
    std::fs::write(state_dir.join("notes.txt"), "theirs").unwrap();
    assert_eq!(manager.teardown().unwrap(), Some(state.path));
    assert!(state_dir.join("notes.txt").is_file(), "a directory holding another file stays");
    drop(guard);
}

/// A setup that fails before creating anything leaves no directory behind (no root needed:
/// it fails resolving the swapfile's directory, before any swap command).
#[test]
fn a_failed_setup_removes_the_state_directory_it_made() {
    let root = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let manager = SwapManager::new(root.path().join("state/critmem/swap.json"), PathBuf::from(PROC_ROOT));
    let err = manager.setup(&root.path().join("missing/critmem.swap"), 64 * MIB).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    assert!(!root.path().join("state").exists(), "the state directories setup made are removed");
}
