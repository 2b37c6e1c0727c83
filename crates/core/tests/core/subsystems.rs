//! The engine's extension seam as a subsystem author sees it: taking over a job's steps,
//! blocking on a resource until woken, invoking a component another subsystem owns, priority
//! inheritance, and events of a subsystem's own.

use critmem_core::program::{ComponentId, ResourceId, Step};
use critmem_core::{load_toml_str, Context, JobInfo, Nanos, Outcome, SimOptions, SimResult, Simulation, Subsystem};
use std::cell::RefCell;
use std::rc::Rc;

const OPTS: SimOptions = SimOptions { record_jobs: true, record_segments: true, check_invariants: true };

fn ms(x: u64) -> Nanos {
    Nanos::from_ms(x)
}

fn run(text: &str, subsystems: Vec<Box<dyn Subsystem>>) -> SimResult {
    let s = load_toml_str(text, "seam.toml").unwrap_or_else(|e| panic!("{e}"));
    Simulation::new(&s, s.seed, OPTS, subsystems).run()
}

/// Completion times of each task's jobs, in ms.
fn completions_ms(r: &SimResult, task: u32) -> Vec<f64> {
    r.jobs.iter().filter(|j| j.task == task).filter_map(|j| j.completion.map(Nanos::as_ms_f64)).collect()
}

const LOCK: ResourceId = ResourceId(7);

/// Takes over task 0's first job: 1 ms of compute, a wait on [`LOCK`] until its own event at
/// 3 ms wakes the job, 1 ms more.
#[derive(Default)]
struct BlockOnce {
    job: Option<critmem_core::sched::JobKey>,
    steps: u32,
}

impl Subsystem for BlockOnce {
    fn name(&self) -> &'static str {
        "block-once"
    }
    fn on_release(&mut self, cx: &mut Context<'_>, job: &JobInfo) -> bool {
        if job.task != 0 || job.index != 0 {
            return false;
        }
        self.job = Some(job.key);
        cx.schedule(ms(3), 0);
        true
    }
    fn next_step(&mut self, _cx: &mut Context<'_>, _job: &JobInfo) -> Step {
        self.steps += 1;
        match self.steps {
            1 => Step::Compute(ms(1)),
            2 => Step::Block(LOCK),
            3 => Step::Compute(ms(1)),
            _ => Step::Done,
        }
    }
    fn on_event(&mut self, cx: &mut Context<'_>, _tag: u64) {
        cx.wake(self.job.expect("released before its wake-up"));
    }
    fn finish(self: Box<Self>, _horizon: Nanos, _result: &mut SimResult) {}
}

const TWO_FP_TASKS: &str = r#"
[scheduler]
kind = "fp"
[run]
horizon_ms = 10
[[task]]
name = "high"
priority = 1
wcet_ms = 2
period_ms = 10
[[task]]
name = "low"
priority = 2
wcet_ms = 5
period_ms = 10
"#;

#[test]
fn a_blocked_job_leaves_the_cpu_to_lower_priority_work_until_it_is_woken() {
    let r = run(TWO_FP_TASKS, vec![Box::new(BlockOnce::default())]);
    // high: 0–1, blocked 1–3 (low runs), woken at 3: 3–4. low: 1–3 and 4–7.
    assert_eq!(completions_ms(&r, 0), vec![4.0]);
    assert_eq!(completions_ms(&r, 1), vec![7.0]);
    let high: Vec<(f64, f64)> = r.segments.iter().filter(|s| s.task == 0).map(|s| (s.start.as_ms_f64(), s.end.as_ms_f64())).collect();
    assert_eq!(high, vec![(0.0, 1.0), (3.0, 4.0)]);
}

/// What the component's owner saw of each call.
type Calls = Rc<RefCell<Vec<(u64, Option<ComponentId>)>>>;

/// Owns one component: a job inside it computes 2 ms, then returns.
struct Server {
    component: Rc<RefCell<Option<ComponentId>>>,
    calls: Calls,
    inside: u32,
}

impl Subsystem for Server {
    fn name(&self) -> &'static str {
        "server"
    }
    fn start(&mut self, cx: &mut Context<'_>) {
        *self.component.borrow_mut() = Some(cx.add_component());
    }
    fn next_step(&mut self, _cx: &mut Context<'_>, job: &JobInfo) -> Step {
        self.calls.borrow_mut().push((job.seq, job.component));
        self.inside += 1;
        if self.inside % 2 == 1 {
            Step::Compute(ms(2))
        } else {
            Step::Return
        }
    }
    fn finish(self: Box<Self>, _horizon: Nanos, _result: &mut SimResult) {}
}

/// Takes over every job of task 0: 1 ms, an invocation of the server's component, 1 ms.
struct Client {
    component: Rc<RefCell<Option<ComponentId>>>,
    steps: Vec<u32>,
}

impl Subsystem for Client {
    fn name(&self) -> &'static str {
        "client"
    }
    fn on_release(&mut self, _cx: &mut Context<'_>, job: &JobInfo) -> bool {
        if job.task == 0 {
            self.steps.resize(job.key as usize + 1, 0);
            self.steps[job.key as usize] = 0;
        }
        job.task == 0
    }
    fn next_step(&mut self, _cx: &mut Context<'_>, job: &JobInfo) -> Step {
        assert_eq!(job.component, None, "the client gives steps only outside the component");
        let n = &mut self.steps[job.key as usize];
        *n += 1;
        match *n {
            1 | 3 => Step::Compute(ms(1)),
            2 => Step::Invoke(self.component.borrow().expect("added at start")),
            _ => Step::Done,
        }
    }
    fn finish(self: Box<Self>, _horizon: Nanos, _result: &mut SimResult) {}
}

#[test]
fn an_invoked_component_gives_the_jobs_steps_until_it_returns() {
    let component = Rc::new(RefCell::new(None));
    let calls: Calls = Rc::default();
    let text = "[scheduler]\nkind = \"edf\"\n[run]\nhorizon_ms = 20\n[[task]]\nname = \"c\"\nwcet_ms = 1\nperiod_ms = 10\n";
    let r = run(
        text,
        vec![
            Box::new(Server { component: component.clone(), calls: calls.clone(), inside: 0 }),
            Box::new(Client { component: component.clone(), steps: Vec::new() }),
        ],
    );
    // 1 ms before, 2 ms inside, 1 ms after: each job ends 4 ms after its release.
    assert_eq!(completions_ms(&r, 0), vec![4.0, 14.0]);
    let c = component.borrow().expect("added");
    // Each job's call and return are both seen inside the component.
    assert_eq!(*calls.borrow(), vec![(0, Some(c)), (0, Some(c)), (1, Some(c)), (1, Some(c))]);
    assert!(r.jobs.iter().all(|j| j.executed == ms(4)), "{:?}", r.jobs);
}

/// A lock held by task "low": "high" blocks on it at its release until "low" ends; with
/// `inherit`, "low" runs at "high"'s priority meanwhile.
struct Inversion {
    inherit: bool,
    low: Option<critmem_core::sched::JobKey>,
    high: Option<critmem_core::sched::JobKey>,
    high_steps: u32,
}

impl Subsystem for Inversion {
    fn name(&self) -> &'static str {
        "inversion"
    }
    fn on_release(&mut self, cx: &mut Context<'_>, job: &JobInfo) -> bool {
        match job.task {
            0 => {
                self.high = Some(job.key);
                if self.inherit {
                    cx.inherit(self.low.expect("low is released first"), Some(job.key));
                }
                true
            }
            2 => {
                self.low = Some(job.key);
                false
            }
            _ => false,
        }
    }
    fn next_step(&mut self, _cx: &mut Context<'_>, _job: &JobInfo) -> Step {
        self.high_steps += 1;
        match self.high_steps {
            1 => Step::Block(LOCK),
            2 => Step::Compute(ms(1)),
            _ => Step::Done,
        }
    }
    fn on_end(&mut self, cx: &mut Context<'_>, job: &JobInfo, outcome: Outcome, _idle: bool) {
        if job.task == 2 && outcome == Outcome::Completed {
            cx.inherit(job.key, None);
            cx.wake(self.high.expect("high waits for the lock"));
        }
    }
    fn finish(self: Box<Self>, _horizon: Nanos, _result: &mut SimResult) {}
}

const INVERSION: &str = r#"
[scheduler]
kind = "fp"
[run]
horizon_ms = 20
[[task]]
name = "high"
priority = 1
wcet_ms = 1
period_ms = 20
offset_ms = 1
[[task]]
name = "medium"
priority = 2
wcet_ms = 5
period_ms = 20
offset_ms = 2
[[task]]
name = "low"
priority = 3
wcet_ms = 3
period_ms = 20
"#;

#[test]
fn priority_inheritance_lets_the_lock_holder_run_ahead_of_medium_priority_work() {
    let run_with = |inherit| run(INVERSION, vec![Box::new(Inversion { inherit, low: None, high: None, high_steps: 0 })]);
    let without = run_with(false);
    // medium preempts low at 2 and runs to 7; low finishes at 8; high then runs 8–9.
    assert_eq!([completions_ms(&without, 0), completions_ms(&without, 1), completions_ms(&without, 2)], [[9.0], [7.0], [8.0]]);
    let with = run_with(true);
    // low runs at high's priority from 1: done at 3; high 3–4; medium 4–9.
    assert_eq!([completions_ms(&with, 0), completions_ms(&with, 1), completions_ms(&with, 2)], [[4.0], [9.0], [3.0]]);
}

/// Schedules its own events and records when and in which order they came.
struct Ticker {
    seen: Rc<RefCell<Vec<(Nanos, u64)>>>,
}

impl Subsystem for Ticker {
    fn name(&self) -> &'static str {
        "ticker"
    }
    fn start(&mut self, cx: &mut Context<'_>) {
        cx.schedule(ms(5), 2);
        cx.schedule(ms(5), 1);
        cx.schedule(ms(0), 0);
    }
    fn on_event(&mut self, cx: &mut Context<'_>, tag: u64) {
        self.seen.borrow_mut().push((cx.now(), tag));
    }
    fn finish(self: Box<Self>, _horizon: Nanos, result: &mut SimResult) {
        // A section of its own: here, a marker in a field the engine leaves at its default.
        result.jobs_left_out += 1000;
    }
}

#[test]
fn a_subsystems_events_come_in_time_order_fifo_at_equal_times_and_it_writes_its_section() {
    let seen = Rc::default();
    let text = "[scheduler]\nkind = \"edf\"\n[run]\nhorizon_ms = 10\n[[task]]\nname = \"t\"\nwcet_ms = 1\nperiod_ms = 10\n";
    let r = run(text, vec![Box::new(Ticker { seen: Rc::clone(&seen) })]);
    assert_eq!(*seen.borrow(), vec![(ms(0), 0), (ms(5), 2), (ms(5), 1)]);
    assert_eq!(r.jobs_left_out, 1000);
}

/// The engine plugs models in only through the subsystem interface: its source names no model.
#[test]
fn the_engine_names_neither_the_memory_model_nor_the_controller_loop() {
    let sources = [include_str!("../../src/engine/mod.rs"), include_str!("../../src/engine/subsystem.rs")];
    for (i, text) in sources.iter().enumerate() {
        for word in ["memsim", "MemSim", "memory", "Memory", "control", "Control", "PsiState", "crate::mem"] {
            assert!(!text.contains(word), "engine source {i} mentions {word:?}");
        }
    }
}
