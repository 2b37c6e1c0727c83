//! Blocking terms for tasks that share resources on one CPU.
//!
//! **Model.** Each resource has a number of units (1 for a mutex, k for a k-unit resource).
//! Each task lists its critical sections: the resource, the units it takes there and the
//! longest time it holds them. A section nested inside another is listed with the outer
//! section's duration: the holder may keep running at raised priority or ceiling until the
//! outer section ends, so that is how long it can keep the inner resource from a waiter. It
//! also names the outer section's resource (`within`), so that chains are seen: a job waiting
//! for the outer resource may in effect wait for whoever holds the inner one. A task holds at
//! most one section per resource at a time.
//!
//! **Priority inheritance (PIP)** under fixed priorities, [`pip_blocking`]: a lower-priority job
//! can delay τᵢ only while it is inside a section on a resource whose priority ceiling (the
//! highest priority among the tasks using it, and of those using a resource it is nested in)
//! is at least τᵢ's priority: either τᵢ waits for that resource itself, directly or through a
//! holder waiting inside an outer section, or a holder inherits a priority above τᵢ's and runs
//! ahead of it. Each lower job can do that for at most one of its sections, and each such
//! mutex only through the one section its holder is in, so Bᵢ is the lesser of the sum over
//! lower tasks of their longest such section, and the sum over such resources of their longest
//! lower-priority section (a k-unit resource can have every lower task holding units at once,
//! so it counts the longest section of every lower task). This is the bound of Sha, Rajkumar and
//! Lehoczky (IEEE TC 1990), with "can block" taken transitively through nested sections.
//!
//! **Stack resource policy (SRP)**, [`srp_blocking`]: every task has a preemption level (under
//! FP its priority, [`fp_preemption_levels`]; under EDF shorter relative deadlines give higher
//! levels, [`edf_preemption_levels`]). A resource with `v` units left has the ceiling of
//! Baker's multi-unit rule, [`srp_ceiling`]: the highest level among tasks that can ask for
//! more than `v` units. A job starts only above the system ceiling, so τᵢ is blocked at most
//! once, by one section of one lower-level job, and only by a section that can leave its
//! resource's ceiling at τᵢ's level or above. While a lower job holds `u` units, jobs of still
//! lower levels may hold units too (it preempted them), so the fewest units left is
//! `N − u − Σ` of their largest requests; the section counts if the ceiling at that many
//! units reaches τᵢ's level. Bᵢ is the longest section that counts (Baker, RTS 1991).

use crate::input::InvalidInput;
use crate::model::TaskParams;
use critmem_core::Nanos;

/// One critical section of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CriticalSection {
    /// Index into [`ResourceModel::units`].
    pub resource: usize,
    /// Units taken, 1 ..= the resource's unit count.
    pub units: u32,
    /// Longest time the units are held, ns (for a nested section: the outer one's).
    pub duration: Nanos,
    /// For a section nested inside another section of the same task: that section's resource.
    pub within: Option<usize>,
}

/// The shared resources of one CPU's tasks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceModel {
    /// Unit count per resource (each ≥ 1).
    pub units: Vec<u32>,
    /// Critical sections per task, in task order.
    pub sections: Vec<Vec<CriticalSection>>,
}

impl ResourceModel {
    /// Checks the model against a task count: one section list per task, every section on a
    /// declared resource, taking 1 ..= its unit count.
    pub fn validate(&self, tasks: usize) -> Result<(), InvalidInput> {
        if self.sections.len() != tasks {
            return Err(InvalidInput::new("sections", format!("{} section lists for {tasks} tasks", self.sections.len())));
        }
        for (r, &n) in self.units.iter().enumerate() {
            if n == 0 {
                return Err(InvalidInput::new(format!("resource[{r}].units"), "a resource has at least one unit"));
            }
        }
        for (i, list) in self.sections.iter().enumerate() {
            for (k, s) in list.iter().enumerate() {
                let key = |f: &str| format!("task[{i}].section[{k}].{f}");
                let Some(&n) = self.units.get(s.resource) else {
                    return Err(InvalidInput::new(key("resource"), format!("no resource {} (there are {})", s.resource, self.units.len())));
                };
                if s.units == 0 || s.units > n {
                    return Err(InvalidInput::new(key("units"), format!("takes {} units of a {n}-unit resource", s.units)));
                }
                if let Some(o) = s.within {
                    if o == s.resource || !list.iter().any(|x| x.resource == o) {
                        return Err(InvalidInput::new(key("within"), format!("the task has no other section on resource {o} to nest in")));
                    }
                }
            }
        }
        Ok(())
    }

    /// The most units `task` takes of `resource` at once (0 if it never uses it).
    fn need(&self, task: usize, resource: usize) -> u32 {
        self.sections[task].iter().filter(|s| s.resource == resource).map(|s| s.units).max().unwrap_or(0)
    }

    /// `task`'s longest section on `resource`, ns (0 if none).
    fn longest(&self, task: usize, resource: usize) -> u64 {
        self.sections[task].iter().filter(|s| s.resource == resource).map(|s| s.duration.0).max().unwrap_or(0)
    }
}

/// PIP blocking bound Bᵢ per task under unique fixed-priority ranks (0 = highest); see the
/// module documentation for the rule.
pub fn pip_blocking(model: &ResourceModel, ranks: &[u32]) -> Result<Vec<Nanos>, InvalidInput> {
    let n = ranks.len();
    model.validate(n)?;
    // Priority ceiling of each resource as a rank (lower = higher priority; None if unused),
    // raised to the ceiling of every resource it is nested in.
    let mut ceiling: Vec<Option<u32>> =
        (0..model.units.len()).map(|r| (0..n).filter(|&j| model.need(j, r) > 0).map(|j| ranks[j]).min()).collect();
    let nested: Vec<(usize, usize)> = model.sections.iter().flatten().filter_map(|s| Some((s.resource, s.within?))).collect();
    // Each pass raises at least one ceiling or stops; a ceiling only falls in rank.
    for _ in 0..=model.units.len() {
        let mut changed = false;
        for &(inner, outer) in &nested {
            let raised = match (ceiling[inner], ceiling[outer]) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if raised != ceiling[inner] {
                ceiling[inner] = raised;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let blocking = (0..n)
        .map(|i| {
            let relevant: Vec<usize> = (0..model.units.len()).filter(|&r| ceiling[r].is_some_and(|c| c <= ranks[i])).collect();
            let lower: Vec<usize> = (0..n).filter(|&l| ranks[l] > ranks[i]).collect();
            let by_task: u128 = lower.iter().map(|&l| relevant.iter().map(|&r| u128::from(model.longest(l, r))).max().unwrap_or(0)).sum();
            let by_resource: u128 = relevant
                .iter()
                .map(|&r| {
                    let each = lower.iter().map(|&l| u128::from(model.longest(l, r)));
                    if model.units[r] == 1 {
                        each.max().unwrap_or(0)
                    } else {
                        each.sum()
                    }
                })
                .sum();
            crate::model::nanos(by_task.min(by_resource))
        })
        .collect();
    Ok(blocking)
}

/// Preemption levels under fixed priorities: the priority itself (rank 0 gets the highest
/// level, `ranks.len()`).
pub fn fp_preemption_levels(ranks: &[u32]) -> Vec<u64> {
    ranks.iter().map(|&r| ranks.len() as u64 - u64::from(r)).collect()
}

/// Preemption levels under EDF: shorter relative deadlines give higher levels, equal deadlines
/// equal levels (1 for the longest deadline).
pub fn edf_preemption_levels(tasks: &[TaskParams]) -> Vec<u64> {
    let mut deadlines: Vec<Nanos> = tasks.iter().map(|t| t.deadline).collect();
    deadlines.sort_unstable();
    deadlines.dedup();
    tasks.iter().map(|t| (deadlines.len() - deadlines.partition_point(|&d| d < t.deadline)) as u64).collect()
}

/// Baker's ceiling of `resource` with `units_left` units free: the highest preemption level
/// among tasks that can ask for more than that (`None` if no task can).
pub fn srp_ceiling(model: &ResourceModel, levels: &[u64], resource: usize, units_left: u32) -> Option<u64> {
    (0..levels.len()).filter(|&j| model.need(j, resource) > units_left).map(|j| levels[j]).max()
}

/// The longest section of task `l` that can block task `i` under SRP, ns (0 if none can).
fn srp_pair(model: &ResourceModel, levels: &[u64], i: usize, l: usize) -> u64 {
    if levels[l] >= levels[i] {
        return 0;
    }
    model.sections[l]
        .iter()
        .filter(|s| {
            let held_below: u64 = (0..levels.len()).filter(|&k| levels[k] < levels[l]).map(|k| u64::from(model.need(k, s.resource))).sum();
            let left = u64::from(model.units[s.resource]).saturating_sub(u64::from(s.units) + held_below);
            // `left` is at most the unit count, a u32.
            srp_ceiling(model, levels, s.resource, left as u32).is_some_and(|c| c >= levels[i])
        })
        .map(|s| s.duration.0)
        .max()
        .unwrap_or(0)
}

/// SRP blocking bound Bᵢ per task for the given preemption levels (higher = more urgent);
/// see the module documentation for the rule.
pub fn srp_blocking(model: &ResourceModel, levels: &[u64]) -> Result<Vec<Nanos>, InvalidInput> {
    let n = levels.len();
    model.validate(n)?;
    Ok((0..n).map(|i| Nanos((0..n).map(|l| srp_pair(model, levels, i, l)).max().unwrap_or(0))).collect())
}

/// The blocking term of the EDF processor-demand test with SRP (Baruah, RTSS 2006): in an
/// interval of length t, only a job with a relative deadline beyond t can block the jobs whose
/// deadlines fall inside, so `B(t)` is the longest section of a task with `Dₗ > t` that can
/// block some task with `Dᵢ ≤ t` (levels from [`edf_preemption_levels`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdfSrpBlocking {
    /// (Dᵢ, Dₗ, longest section of l that can block i), ns, for pairs with a section.
    pairs: Vec<(u64, u64, u64)>,
}

impl EdfSrpBlocking {
    pub fn new(tasks: &[TaskParams], model: &ResourceModel) -> Result<Self, InvalidInput> {
        model.validate(tasks.len())?;
        let levels = edf_preemption_levels(tasks);
        let mut pairs = Vec::new();
        for i in 0..tasks.len() {
            for l in 0..tasks.len() {
                let b = srp_pair(model, &levels, i, l);
                if b > 0 {
                    pairs.push((tasks[i].deadline.0, tasks[l].deadline.0, b));
                }
            }
        }
        Ok(EdfSrpBlocking { pairs })
    }

    /// No blocking at all (tasks without shared resources).
    pub fn none() -> Self {
        EdfSrpBlocking { pairs: Vec::new() }
    }

    /// B(t), ns.
    pub fn at(&self, t: Nanos) -> Nanos {
        Nanos(self.pairs.iter().filter(|&&(di, dl, _)| di <= t.0 && t.0 < dl).map(|p| p.2).max().unwrap_or(0))
    }

    /// The largest B(t) over all t.
    pub fn max(&self) -> Nanos {
        Nanos(self.pairs.iter().map(|p| p.2).max().unwrap_or(0))
    }
}

/// Checks that a per-task slice has one entry per task.
pub(crate) fn check_per_task(what: &str, got: usize, tasks: usize) -> Result<(), InvalidInput> {
    if got == tasks {
        Ok(())
    } else {
        Err(InvalidInput::new(what, format!("{got} entries for {tasks} tasks")))
    }
}
