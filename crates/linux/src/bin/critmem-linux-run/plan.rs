//! What runs for each task: a shipped worker's arguments from the task's memory behaviour,
//! or the scenario's command.

use critmem_core::model::memory::{Pattern as StreamPattern, Target};
use critmem_core::Scenario;
use critmem_linux::cgroup::GroupPath;
use critmem_linux::platform::GroupSpec;
use critmem_policy::GroupRole;
use std::path::{Path, PathBuf};

/// What runs for one task.
pub(crate) enum Launch {
    /// A shipped worker (`critmem-srt-worker` or `critmem-nrt-worker`) beside this program.
    Worker { exe: &'static str, args: Vec<String> },
    /// The scenario's `command`; `program` is resolved before anything is set up.
    Command { argv: Vec<String>, program: PathBuf, reports_jobs: bool },
}

/// A process to start for one task.
pub(crate) struct TaskPlan {
    pub(crate) name: String,
    pub(crate) criticality: &'static str,
    pub(crate) group: usize,
    pub(crate) launch: Launch,
    pub(crate) period_ns: u64,
    pub(crate) deadline_ns: u64,
    pub(crate) wcet_ns: u64,
    pub(crate) seed: u64,
}

impl TaskPlan {
    pub(crate) fn label(&self) -> &str {
        match &self.launch {
            Launch::Worker { exe, .. } => exe,
            Launch::Command { argv, .. } => &argv[0],
        }
    }
    pub(crate) fn reports_jobs(&self) -> bool {
        match self.launch {
            Launch::Worker { exe, .. } => exe == "critmem-srt-worker",
            Launch::Command { reports_jobs, .. } => reports_jobs,
        }
    }
}

/// A program as `execvp` would find it: a path with a `/` as given, else the first executable
/// file of that name on `PATH`.
pub(crate) fn resolve_program(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| p.is_file() && p.metadata().is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let path = PathBuf::from(program);
        return executable(&path).then_some(path);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(program)).find(|p| executable(p))
}

pub(crate) fn ms_arg(ns: u64) -> String {
    // The workers take whole milliseconds; at least 1.
    (ns.div_ceil(1_000_000).max(1)).to_string()
}

/// Groups and workers from the scenario; every error names the key.
pub(crate) fn plan(scenario: &Scenario, run_dir: &str) -> Result<(Vec<GroupSpec>, Vec<TaskPlan>), String> {
    let source = &scenario.source_name;
    let Some(memory) = scenario.memory.as_ref().filter(|m| !m.groups.is_empty()) else {
        return Err(format!(
            "{source}: the Linux platform needs [memory] and at least one [[group]] (each task runs in its group's cgroup)"
        ));
    };
    let page_bytes = memory.page_bytes;
    let mut groups = Vec::new();
    for g in &memory.groups {
        let role = g.role.clone();
        let path = GroupPath::new(&format!("{run_dir}/{}", g.name)).map_err(|e| format!("{source}: group {:?}: {e}", g.name))?;
        groups.push(GroupSpec { name: g.name.clone(), path, role, floor_bytes: g.floor_pages * page_bytes, create: true });
    }
    let mut tasks = Vec::new();
    for (i, task) in scenario.tasks.iter().enumerate() {
        let Some(mem) = &task.memory else { return Err(format!("{source}: task[{i}]: no memory declaration")) };
        let Some(group) = memory.groups.iter().position(|g| g.name == mem.group) else {
            return Err(format!(
                "{source}: task[{i}].group: {:?} is not a [[group]]; on Linux every task runs in a managed group",
                mem.group
            ));
        };
        // Streams over part of the private memory make that part the hot working set; the
        // rest is cold data the worker writes once and verifies at exit.
        let private_pages = u64::from(mem.private_pages);
        let hot_pages = mem
            .streams
            .iter()
            .filter(|s| s.target == Target::Private)
            .map(|s| match &s.pattern {
                StreamPattern::Sweep { offset, span, .. }
                | StreamPattern::Random { offset, span, .. }
                | StreamPattern::HotCold { offset, span, .. } => u64::from(*offset) + u64::from(*span),
                StreamPattern::Trace { pages } => pages.iter().max().map_or(0, |&p| u64::from(p) + 1),
                StreamPattern::Discard { .. } => 0,
            })
            .max()
            .map_or(private_pages, |hot| hot.clamp(1, private_pages.max(1)));
        let to_mib = |pages: u64| (pages * page_bytes).div_ceil(1 << 20);
        let wss_mib = to_mib(hot_pages).max(1);
        let cold_mib = to_mib(private_pages.saturating_sub(hot_pages));
        let random = mem.streams.iter().any(|s| matches!(s.pattern, StreamPattern::Random { .. } | StreamPattern::HotCold { .. }));
        let pattern = if random { "random" } else { "sequential" };
        let seed = scenario.seed ^ (i as u64 + 1);
        let mut plan = TaskPlan {
            name: task.name.clone(),
            criticality: task.criticality.as_str(),
            group,
            launch: Launch::Worker { exe: "", args: Vec::new() },
            period_ns: task.period.0,
            deadline_ns: task.deadline.0,
            wcet_ns: task.exec.wcet().0,
            seed,
        };
        if let Some(command) = &task.command {
            let program = resolve_program(&command.argv[0]).ok_or_else(|| {
                format!(
                    "{source}: task[{i}].command: cannot run {:?}: no such executable file{}",
                    command.argv[0],
                    if command.argv[0].contains('/') { "" } else { " on PATH" }
                )
            })?;
            plan.launch = Launch::Command { argv: command.argv.clone(), program, reports_jobs: command.reports_jobs };
            tasks.push(plan);
            continue;
        }
        let seed = seed.to_string();
        let (exe, args) = match groups[group].role {
            GroupRole::SoftRealTime { .. } => {
                let refs: u64 = mem
                    .streams
                    .iter()
                    .map(|s| match &s.pattern {
                        StreamPattern::Sweep { pages, .. } => u64::from(*pages),
                        StreamPattern::Random { refs, .. } | StreamPattern::HotCold { refs, .. } => u64::from(*refs),
                        StreamPattern::Trace { pages } => pages.len() as u64,
                        StreamPattern::Discard { .. } => 0,
                    } * u64::from(s.passes.max(1)))
                    .sum();
                let mut args = vec![
                    "--period-ms".into(),
                    ms_arg(task.period.0),
                    "--deadline-ms".into(),
                    ms_arg(task.deadline.0),
                    "--compute-us".into(),
                    (task.exec.wcet().0 / 1000).to_string(),
                    "--wss-mib".into(),
                    wss_mib.to_string(),
                    "--pattern".into(),
                    pattern.into(),
                    "--seed".into(),
                    seed,
                ];
                if cold_mib > 0 {
                    args.extend(["--cold-mib".into(), cold_mib.to_string()]);
                }
                if refs > 0 {
                    args.extend(["--pages-per-job".into(), refs.to_string()]);
                }
                ("critmem-srt-worker", args)
            }
            GroupRole::NonRealTime => (
                "critmem-nrt-worker",
                vec![
                    "--wss-mib".into(),
                    to_mib(private_pages).max(1).to_string(),
                    "--pattern".into(),
                    pattern.into(),
                    "--seed".into(),
                    seed,
                    "--report-ms".into(),
                    "3600000".into(),
                ],
            ),
        };
        plan.launch = Launch::Worker { exe, args };
        tasks.push(plan);
    }
    for (g, spec) in groups.iter().enumerate() {
        if matches!(spec.role, GroupRole::SoftRealTime { .. }) && !tasks.iter().any(|t| t.group == g && t.reports_jobs()) {
            tracing::warn!(group = %spec.name, "soft real-time group has no task that reports jobs (set reports_jobs = true on its command): its controller sees no job releases or deadlines");
        }
    }
    Ok((groups, tasks))
}
