//! Power-cut style: `kill -9` of the agent at random instants across its set-up, steady state
//! and teardown, each followed by a restart that must put everything back.

use super::*;
use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Setup,
    Steady,
    Teardown,
}

#[test]
fn kill_9_at_random_instants_then_a_restart_restores_everything_every_time() {
    let case = "kill9_sweep";
    let Some((_lock, machine)) = chaos_machine(case) else { return };
    let mut record = Record::new(case);
    let mut rig = Rig::new(&machine);
    rig.start_workers();
    let instants = if long() { 200 } else { 50 };
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[9; 32]);
    let mut below = |max_us: u64| Duration::from_micros(rng.next_u64() % max_us.max(1));
    // How long a start takes here (journal, groups, socket, first tick): the set-up instants
    // fall inside it.
    let started = Instant::now();
    rig.start_agent();
    let startup = started.elapsed();
    let exit = rig.agent.take().unwrap().stop();
    assert_eq!(exit.code, Some(0), "{}", exit.stderr);
    rig.check_restored();
    let mut unrestored = Vec::new();
    let mut exited_before_kill = 0u64;
    let mut recovered = 0u64;
    let mut phases = [0u64; 3];
    for i in 0..instants {
        let phase = [Phase::Setup, Phase::Steady, Phase::Teardown][i % 3];
        phases[i % 3] += 1;
        let mut agent = rig.spawn_agent(&[]);
        match phase {
            Phase::Setup => std::thread::sleep(below(startup.as_micros() as u64 + 1)),
            Phase::Steady => {
                rig.agent = Some(agent);
                rig.wait_for_control();
                agent = rig.agent.take().unwrap();
                std::thread::sleep(below(500_000));
            }
            Phase::Teardown => {
                rig.agent = Some(agent);
                rig.wait_for_control();
                agent = rig.agent.take().unwrap();
                agent.signal(Signal::SIGTERM);
                std::thread::sleep(below(20_000));
            }
        }
        if agent.child.try_wait().unwrap().is_some() {
            exited_before_kill += 1;
        }
        agent.signal(Signal::SIGKILL);
        agent.wait();
        let restart = rig.spawn_agent(&["--duration-s", "0.2"]).wait();
        assert_eq!(restart.code, Some(0), "restart after kill {i} ({phase:?}): {}", restart.stderr);
        if restart.summary()["recovered_from_crash"] == true {
            recovered += 1;
        }
        let changed = rig.changed_knobs();
        if !changed.is_empty() || rig.journal.exists() || rig.socket.exists() {
            unrestored.push(format!("kill {i} ({phase:?}): {changed:?}, journal {}, socket {}", rig.journal.exists(), rig.socket.exists()));
        }
    }
    record.set("kills", instants as u64);
    record.set("kills_setup_steady_teardown", phases.to_vec());
    record.set("startup_ms", startup.as_secs_f64() * 1e3);
    record.set("exited_before_kill", exited_before_kill);
    record.set("restarts_that_recovered_a_journal", recovered);
    record.set("unrestored", unrestored.len() as u64);
    assert!(unrestored.is_empty(), "{unrestored:#?}");
    rig.start_agent();
    rig.finish(&mut record);
    record.write(instants as u64);
}
