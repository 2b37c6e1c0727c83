//! One job program: compute, memory accesses, locks, calls and suspensions in any order, and
//! what they do to each other (a page fault inside a critical section is blocking for every
//! waiter).

use critmem_core::mem::{DeviceSpec, FaultCosts, IoOp};
use critmem_core::resources::WaitRecord;
use critmem_core::{load_toml_str, simulate, Nanos, SimOptions, SimResult};

const OPTS: SimOptions = SimOptions { record_jobs: true, record_segments: true, check_invariants: true };

fn run(text: &str) -> SimResult {
    let scenario = load_toml_str(text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
    simulate(&scenario, OPTS)
}

fn response(r: &SimResult, task: &str, index: u64) -> Nanos {
    let t = r.tasks.iter().position(|t| t.name == task).expect("task") as u32;
    let job = r.jobs.iter().find(|j| j.task == t && j.index == index).expect("job");
    job.response().expect("completed")
}

fn waits_of<'r>(r: &'r SimResult, task: &str) -> Vec<&'r WaitRecord> {
    let t = r.tasks.iter().position(|t| t.name == task).expect("task") as u32;
    r.resources().expect("resources").waits.iter().filter(|w| w.task == t).collect()
}

/// The inversion of `examples/resources-inversion.toml` with memory in the holder's section:
/// lo locks the bus at 1 ms, computes 2 ms, reads `k` pages of a file it has never touched
/// (a major fault each: the device reads one page while lo waits), computes 1 ms and unlocks.
/// hi (1 ms under the bus) arrives at 1.5 ms and asks for the bus at once; med (10 ms, no
/// bus) arrives at 2 ms.
fn inversion(protocol: &str, k: usize) -> String {
    let pages: Vec<String> = (0..k).map(|p| p.to_string()).collect();
    format!(
        r#"
[machine]
cpus = 1
[scheduler]
kind = "fp"
[run]
horizon_ms = 60
seed = 1
[memory]
total_mb = 64
readahead_pages = 1
swap = {{ name = "disk", read_latency_us = 3000, write_latency_us = 3000, read_mb_per_s = 100, write_mb_per_s = 100 }}
[[region]]
name = "model"
size_mb = 1
kind = "file"
[[resource]]
name = "bus"
protocol = "{protocol}"
[[task]]
name = "hi"
priority = 1
period_ms = 60
offset_ms = 1.5
program = [{{ lock = "bus" }}, {{ compute_ms = 1 }}, {{ unlock = "bus" }}]
[[task]]
name = "med"
priority = 2
period_ms = 60
offset_ms = 2
wcet_ms = 10
[[task]]
name = "lo"
priority = 3
period_ms = 60
program = [
  {{ compute_ms = 1 }},
  {{ lock = "bus" }},
  {{ compute_ms = 2 }},
  {{ access = [{{ pattern = "trace", region = "model", pages = [{}] }}] }},
  {{ compute_ms = 1 }},
  {{ unlock = "bus" }},
]
"#,
        pages.join(", ")
    )
}

/// One page read from the scenario's device: its latency and one page's transfer.
fn page_read() -> Nanos {
    let device = DeviceSpec {
        name: "disk".into(),
        read_latency: Nanos::from_us(3000),
        write_latency: Nanos::from_us(3000),
        read_bytes_per_s: 100_000_000,
        write_bytes_per_s: 100_000_000,
    };
    device.service_time(IoOp::Read, 4096)
}

#[test]
fn a_fault_inside_a_critical_section_blocks_the_waiter_for_the_section_and_the_reads_under_pip() {
    let d = page_read();
    for k in [1u64, 3] {
        let r = run(&inversion("pip", k as usize));
        let lo = r.memory().expect("memory").tasks[2].stats;
        assert_eq!(lo.major_faults, k, "one read per page never touched");
        // hi waits from 1.5 ms to lo's unlock: what is left of lo's section when hi asks
        // (1.5 ms of its 2 ms, then 1 ms) plus k reads; lo runs in hi's place throughout, so
        // med never gets the CPU in between.
        let section_left = Nanos::from_us(1500) + Nanos::from_ms(1);
        let waits = waits_of(&r, "hi");
        assert_eq!(waits.len(), 1, "{waits:?}");
        assert_eq!(waits[0].end - waits[0].start, section_left + Nanos(d.0 * k), "k = {k}");
        assert_eq!(response(&r, "hi", 0), section_left + Nanos(d.0 * k) + Nanos::from_ms(1));
    }
}

#[test]
fn without_inheritance_the_medium_task_preempts_the_faulting_holder_and_the_waiter_pays_its_demand() {
    let (pip, none) = (run(&inversion("pip", 3)), run(&inversion("none", 3)));
    assert_eq!(response(&none, "hi", 0), response(&pip, "hi", 0) + Nanos::from_ms(10));
    // Under inheritance med runs only once hi is done.
    assert!(response(&pip, "med", 0) > response(&none, "med", 0));
}

#[test]
fn access_streams_are_shorthand_for_a_program_of_one_access_step() {
    let memory = r#"
[machine]
cpus = 1
[scheduler]
kind = "rm"
[run]
horizon_ms = 400
seed = 3
[memory]
total_mb = 64
swap = "slow-ssd"
[[reservation]]
name = "r"
size_mb = 1
"#;
    let task = |body: &str| {
        format!(
            "{memory}[[task]]\nname = \"t\"\nperiod_ms = 20\nreservation = \"r\"\nprivate_mb = 2\n{body}\n[[task]]\nname = \"u\"\nperiod_ms = 50\nwcet_ms = 5\n"
        )
    };
    let streams = r#"{ pattern = "sweep", mb = 1.5 }, { pattern = "random", refs = 300, writes = 0.5 }"#;
    let shorthand = run(&task(&format!("wcet_ms = 4\naccess_order = \"interleave\"\naccess = [{streams}]")));
    let program = run(&task(&format!("program = [{{ access = [{streams}], access_order = \"interleave\", compute_ms = 4 }}]")));
    let (a, b) = (shorthand.memory().unwrap(), program.memory().unwrap());
    assert!(a.tasks[0].stats.major_faults > 0, "the sweep outgrows the reservation");
    assert_eq!(a.tasks[0].stats, b.tasks[0].stats);
    assert_eq!(a.tasks[0].fault_wait, b.tasks[0].fault_wait);
    assert_eq!(shorthand.tasks, program.tasks);
    assert_eq!(shorthand.segments, program.segments);
}

#[test]
fn a_task_with_access_streams_suspends_after_the_demand_its_suspension_names() {
    let text = r#"
[machine]
cpus = 1
[scheduler]
kind = "fp"
[run]
horizon_ms = 30
[memory]
total_mb = 64
swap = "fast-ssd"
[[task]]
name = "t"
priority = 1
period_ms = 30
wcet_ms = 4
private_mb = 1
access = [{ pattern = "sweep", mb = 1 }]
suspend = [{ after_ms = 1, for_ms = 5 }]
"#;
    let r = run(text);
    let stats = r.memory().unwrap().tasks[0].stats;
    // 256 first touches: zero-fill minor faults, CPU only.
    assert_eq!((stats.minor_faults, stats.major_faults), (256, 0));
    let segs: Vec<_> = r.segments.iter().filter(|s| s.task == 0).collect();
    assert_eq!(segs.len(), 2, "one stretch before the suspension, one after: {segs:?}");
    let gap = segs[1].start - segs[0].end;
    assert_eq!(gap, Nanos::from_ms(5));
    // The first stretch is 1 ms of demand plus the faults' kernel work of the pages it
    // touched; the job's whole CPU time is its 4 ms plus every fault's.
    let ran = |s: &&critmem_core::ExecSegment| s.end - s.start;
    let total: Nanos = segs.iter().map(ran).fold(Nanos::ZERO, |a, b| a + b);
    assert!(ran(&segs[0]) >= Nanos::from_ms(1) && ran(&segs[0]) < Nanos::from_ms(2), "{segs:?}");
    assert!(total > Nanos::from_ms(4), "fault handling adds to the demand");
    assert_eq!(response(&r, "t", 0), total + Nanos::from_ms(5));
}

#[test]
fn a_component_invocation_touches_the_component_memory_and_its_faults_stall_the_caller() {
    let text = r#"
[machine]
cpus = 1
[scheduler]
kind = "fp"
[run]
horizon_ms = 100
[memory]
total_mb = 64
readahead_pages = 1
swap = { read_latency_us = 1000, write_latency_us = 1000, read_mb_per_s = 100, write_mb_per_s = 100 }
[[region]]
name = "index"
size_mb = 1
kind = "file"
[[component]]
name = "db"
stacks = 1
private_mb = 0.5
program = [
  { compute_ms = 1 },
  { access = [{ pattern = "trace", region = "index", pages = [0, 1] }, { pattern = "sweep", mb = 0.5 }], compute_ms = 1 },
]
[[task]]
name = "client"
priority = 1
period_ms = 50
program = [{ compute_ms = 1 }, { call = "db" }]
"#;
    let r = run(text);
    let m = r.memory().unwrap();
    assert_eq!(m.components.len(), 1);
    let db = &m.components[0];
    assert_eq!(db.name, "db");
    // First job: two file pages read, 128 private pages zero-filled; second job: all resident.
    assert_eq!((db.stats.major_faults, db.stats.minor_faults), (2, 128));
    assert_eq!(db.stats.resident_pages, 130);
    assert_eq!(m.tasks[0].stats.major_faults, 0, "the faults are the component's, not the caller's space");
    // The caller waited for both reads, less the fault's kernel work that overlaps each: a
    // read is 1 ms plus 4096 B at 100 MB/s.
    let read = Nanos::from_us(1000) + Nanos(40_960);
    assert_eq!(m.tasks[0].fault_wait, Nanos(2 * (read - FaultCosts::default().major).0));
    assert!(response(&r, "client", 0) > response(&r, "client", 1));
    let json = r.to_json();
    assert!(json.contains(r#""components":[{"name":"db","reservation":null,"minor_faults":128,"major_faults":2"#), "{json}");
}

#[test]
fn a_program_access_needs_memory_and_names_known_regions() {
    let base = r#"
[machine]
cpus = 1
[scheduler]
kind = "fp"
[[task]]
name = "t"
priority = 1
period_ms = 10
"#;
    let no_memory = format!("{base}program = [{{ access = [{{ pattern = \"sweep\", mb = 1 }}], compute_ms = 1 }}]\n");
    let e = load_toml_str(&no_memory, "t.toml").unwrap_err().to_string();
    assert_eq!(e, "t.toml: task[0].program[0].access: touches memory, which needs a [memory] section");
    let unknown = format!(
        "{base}program = [{{ compute_ms = 1 }}, {{ access = [{{ pattern = \"sweep\", region = \"nope\", mb = 1 }}] }}]\n[memory]\ntotal_mb = 64\n"
    );
    let e = load_toml_str(&unknown, "t.toml").unwrap_err().to_string();
    assert_eq!(e, "t.toml: task[0].program[1].access[0].region: no region named \"nope\"");
}
