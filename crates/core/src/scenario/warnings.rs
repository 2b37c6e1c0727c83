//! Things a scenario allows but a user rarely means: each is one line naming the key, kept in
//! [`super::Scenario::warnings`] for the front end to show (the CLI prints them on stderr).

use super::error::ScenarioError;
use crate::model::scheduler::{PriorityOrder, SchedulerSpec};
use crate::model::task::TaskSpec;
use crate::time::Nanos;

/// The warnings of a loaded scenario, in a fixed order (by check, then by task).
pub(super) fn collect(
    source_name: &str,
    scheduler: &SchedulerSpec,
    tasks: &[TaskSpec],
    task_server: Option<&[usize]>,
    horizon: Nanos,
    horizon_defaulted: bool,
) -> Vec<String> {
    let line = |key: String, reason: String| ScenarioError { source_name: source_name.to_string(), key, reason }.to_string();
    let mut out = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        if t.offset >= horizon {
            out.push(line(
                format!("task[{i}].offset_ms"),
                format!(
                    "{} ms is not before the horizon ({} ms): task {:?} releases no job",
                    t.offset.as_ms_f64(),
                    horizon.as_ms_f64(),
                    t.name
                ),
            ));
        }
    }
    if horizon_defaulted && !tasks.is_empty() && tasks.iter().all(|t| t.offset + t.period >= horizon) {
        out.push(line(
            "run.horizon_ms".to_string(),
            format!(
                "not set, so the run lasts one hyperperiod ({} ms), in which each task releases a single job: set [run] horizon_ms for more",
                horizon.as_ms_f64()
            ),
        ));
    }
    // Equal explicit priorities on one CPU (in one leaf server, under servers) are ordered by
    // file position, which is rarely meant.
    let shared_cpu = match scheduler {
        SchedulerSpec::Fp | SchedulerSpec::Gfp { priorities: PriorityOrder::Explicit } => Some(false),
        SchedulerSpec::Pfp { priorities: PriorityOrder::Explicit } => Some(true),
        _ => None,
    };
    if let Some(per_cpu) = shared_cpu {
        for (i, t) in tasks.iter().enumerate() {
            let Some(p) = t.priority else { continue };
            let same_server = |j: usize| task_server.is_none_or(|s| s[j] == s[i]);
            let same =
                |(j, u): &(usize, &TaskSpec)| u.priority == Some(p) && (!per_cpu || (u.cpu.is_some() && u.cpu == t.cpu)) && same_server(*j);
            if let Some((j, _)) = tasks[..i].iter().enumerate().find(same) {
                out.push(line(
                    format!("task[{i}].priority"),
                    format!(
                        "{p} is also task[{j}]'s ({:?}); ties go to the task listed first, so {:?} runs below {:?}",
                        tasks[j].name, t.name, tasks[j].name
                    ),
                ));
            }
        }
    }
    out
}
