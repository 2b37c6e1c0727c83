//! `[[group]]`: the memory-limited groups a controller manages, with their roles and sizes.

use super::error::{Ctx, ScenarioError};
use super::raw::RawScenario;
use crate::model::memory::{GroupDecl, MemorySpec};
use crate::model::task::TaskSpec;
use critmem_policy::{BandwidthKnobs, GroupRole, RoleName};

/// The groups, checked against the memory and the tasks' memory declarations.
pub(super) fn validate_groups(cx: &Ctx, raw: &RawScenario, m: &MemorySpec, tasks: &[TaskSpec]) -> Result<Vec<GroupDecl>, ScenarioError> {
    let mut groups: Vec<GroupDecl> = Vec::new();
    let total = u64::from(m.total_frames);
    check_task_groups(cx, raw, m)?;
    for (i, g) in raw.group.iter().enumerate() {
        let k = |f: &str| format!("group[{i}].{f}");
        if g.name.is_empty() || groups.iter().any(|x| x.name == g.name) || m.reservations.iter().any(|r| r.name == g.name) {
            return Err(cx.err(k("name"), format!("must be unique, non-empty and not a reservation's name (got {:?})", g.name)));
        }
        // A member may also name a reservation: the reservation holds its pages (SPC and SPEL
        // per reservation) and the group's limit bounds them on top.
        let members: Vec<usize> = (0..tasks.len()).filter(|&t| tasks[t].memory.as_ref().is_some_and(|tm| tm.group == g.name)).collect();
        let role = match g.role.unwrap_or_default() {
            RoleName::NonRealTime => {
                if g.bcet_ms.is_some() {
                    return Err(cx.err(k("bcet_ms"), "only applies to role = \"soft-rt\""));
                }
                GroupRole::NonRealTime
            }
            RoleName::SoftRealTime => {
                let bcet = g.bcet_ms.ok_or_else(|| cx.err(k("bcet_ms"), "missing: a soft-rt group needs its best-case execution time"))?;
                let Some(&first) = members.first() else {
                    return Err(
                        cx.err(k("name"), format!("soft-rt group {:?} has no tasks (set group = {:?} on its task)", g.name, g.name))
                    );
                };
                // The group's jobs are its first task's.
                GroupRole::SoftRealTime { deadline_ns: tasks[first].deadline.0, bcet_ns: cx.time(&k("bcet_ms"), bcet)?.0 }
            }
        };
        let size = |f: &str, mb: Option<f64>, min: u64| -> Result<Option<u64>, ScenarioError> {
            let Some(mb) = mb else { return Ok(None) };
            let p = cx.pages(&k(f), mb, m.page_bytes, min)?;
            if p > total {
                return Err(cx.err(k(f), format!("exceeds the machine's memory ({} MiB)", total * m.page_bytes / 1_048_576)));
            }
            Ok(Some(p))
        };
        let floor_pages = size("floor_mb", g.floor_mb, 1)?.unwrap_or(1);
        let max_pages = size("max_mb", g.max_mb, 1)?;
        if max_pages.is_some_and(|x| x < floor_pages) {
            return Err(cx.err(k("max_mb"), "must be at least floor_mb"));
        }
        let high_pages = size("high_mb", g.high_mb, 1)?;
        if high_pages.is_some_and(|x| x < floor_pages) {
            return Err(cx.err(k("high_mb"), "must be at least floor_mb"));
        }
        let bandwidth = BandwidthKnobs::declared(g.cpu_millicpus, g.io_read_mb_per_s, g.io_write_mb_per_s)
            .map_err(|(key, reason)| cx.err(k(key), reason))?;
        groups.push(GroupDecl {
            name: g.name.clone(),
            role,
            floor_pages,
            max_pages,
            high_pages,
            min_pages: size("min_mb", g.min_mb, 0)?,
            low_pages: size("low_mb", g.low_mb, 0)?,
            bandwidth,
        });
    }
    Ok(groups)
}

/// With groups declared, a task's explicit `group` must name one of them (or a reservation):
/// a misspelt name would otherwise make a group of its own, outside the controller's view.
fn check_task_groups(cx: &Ctx, raw: &RawScenario, m: &MemorySpec) -> Result<(), ScenarioError> {
    let groups = &raw.group;
    if groups.is_empty() {
        return Ok(());
    }
    for (i, t) in raw.task.iter().enumerate() {
        let Some(name) = &t.group else { continue };
        if groups.iter().any(|g| &g.name == name) || m.reservations.iter().any(|r| &r.name == name) {
            continue;
        }
        let declared: Vec<String> = groups.iter().map(|g| format!("{:?}", g.name)).collect();
        let nearest = groups
            .iter()
            .map(|g| (strsim::damerau_levenshtein(name, &g.name), &g.name))
            .min()
            .filter(|(d, g)| *d * 3 <= g.chars().count().max(3))
            .map(|(_, g)| format!("; did you mean {g:?}?"))
            .unwrap_or_default();
        return Err(cx.err(
            format!("task[{i}].group"),
            format!("{name:?} is not a declared [[group]] (declared: {}){nearest}", declared.join(", ")),
        ));
    }
    Ok(())
}
