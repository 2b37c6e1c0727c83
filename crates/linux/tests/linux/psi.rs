//! Pressure stall information and PSI triggers on real groups.

use super::*;

#[test]
fn psi_trigger_times_out_quietly_and_reports_a_removed_group() {
    let Some(machine) = machine("psi_trigger_times_out_quietly_and_reports_a_removed_group") else { return };
    let guard = GroupGuard::create(&machine);
    let pressure = machine.backend.pressure_file(&guard.group, PsiResource::Memory);
    // Sub-2 s windows need CAP_SYS_RESOURCE, which root in a container may lack.
    let window_us = if has_cap_sys_resource(Path::new(PROC_ROOT)) {
        1_000_000
    } else {
        let err = PsiTrigger::new(&pressure, StallKind::Some, 100_000, 1_000_000, Path::new(PROC_ROOT)).unwrap_err();
        assert!(err.to_string().contains("multiple of 2 s"), "{err}");
        UNPRIVILEGED_WINDOW_STEP_US
    };
    let trigger = PsiTrigger::new(&pressure, StallKind::Some, 100_000, window_us, Path::new(PROC_ROOT)).unwrap();
    assert_eq!(trigger.wait(Duration::from_millis(20)).unwrap(), TriggerEvent::Timeout);
    machine.backend.remove(&guard.group).unwrap();
    let started = Instant::now();
    let event = trigger.wait(Duration::from_secs(2)).unwrap();
    let _ = writeln!(std::io::stderr(), "trigger after rmdir: {event:?} in {:?}", started.elapsed());
    assert_eq!(event, TriggerEvent::GroupGone);
}

/// Writes a file from inside the group (so its page cache is charged there), then reads it
/// back again and again: with a limit below its size, every pass refaults.
const THRASH: &str = r#"
read go
head -c "$2" /dev/zero > "$1"
for pass in 1 2 3 4; do cat "$1" > /dev/null; done
echo done
cat > /dev/null
"#;

#[test]
fn reclaim_under_the_memory_limit_shows_as_pressure_and_fires_a_trigger() {
    let Some(machine) = machine("reclaim_under_the_memory_limit_shows_as_pressure_and_fires_a_trigger") else { return };
    let mut guard = GroupGuard::create(&machine);
    let group = guard.group.clone();
    machine.backend.set_knob(&group, Knob::Max, Some(32 * MIB)).unwrap();
    let window_us = if has_cap_sys_resource(Path::new(PROC_ROOT)) { 1_000_000 } else { UNPRIVILEGED_WINDOW_STEP_US };
    let trigger = PsiTrigger::new(
        &machine.backend.pressure_file(&group, PsiResource::Memory),
        StallKind::Some,
        10_000,
        window_us,
        Path::new(PROC_ROOT),
    )
    .unwrap();
    let before = machine.backend.stall_totals(&group).unwrap();
    let stat_before = machine.backend.memory_stat(&group).unwrap();

    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let data = dir.path().join("data");
    let helper = guard.adopt(Helper::shell(THRASH, &[&data.to_string_lossy(), &(128 * MIB).to_string()]));
    let started = Instant::now();
    helper.say("go");
    helper.expect("done");
    let ran = started.elapsed();
    let event = trigger.wait(Duration::from_secs(3 * window_us / 1_000_000 + 2)).unwrap();
    let fired_after = started.elapsed();

    let after = machine.backend.stall_totals(&group).unwrap();
    let stat_after = machine.backend.memory_stat(&group).unwrap();
    let usage = machine.backend.usage_bytes(&group).unwrap();
    let _ = writeln!(
        std::io::stderr(),
        "thrash under 32 MiB: ran {ran:?}, memory some {} us, full {} us, refaults {}, usage {usage} bytes, trigger {event:?} after {fired_after:?}",
        after.memory_some_us - before.memory_some_us,
        after.memory_full_us - before.memory_full_us,
        stat_after.workingset_refault - stat_before.workingset_refault,
    );
    assert!(after.memory_some_us > before.memory_some_us, "no memory stall recorded: {before:?} -> {after:?}");
    assert!(stat_after.workingset_refault > stat_before.workingset_refault);
    assert!(usage <= 32 * MIB);
    assert_eq!(event, TriggerEvent::Fired);
}
