//! Deferrable and periodic servers: interference, guarantees and HiRes's Fig. 6 shares.

use critmem_analysis::{fp_server_analysis, Rta, Server, ServerKind};
use critmem_core::Nanos;

fn ms(x: u64) -> Nanos {
    Nanos::from_ms(x)
}

fn server(budget: u64, period: u64, kind: ServerKind) -> Server {
    Server::new(ms(budget), ms(period), kind).unwrap()
}

#[test]
fn a_deferrable_server_can_spend_two_budgets_back_to_back() {
    // Θ = 2, Π = 5, jitter 3: ⌈(t + 3)/5⌉·2. At t = 2 one budget; from t = 3 on two (the end
    // of one period and the start of the next); at t = 8 three.
    let d = server(2, 5, ServerKind::Deferrable);
    assert_eq!(d.jitter(), ms(3));
    assert_eq!(d.interference(ms(2)), ms(2));
    assert_eq!(d.interference(ms(3)), ms(4));
    assert_eq!(d.interference(ms(8)), ms(6));
    // A polling server: ⌈t/5⌉·2.
    let p = server(2, 5, ServerKind::Periodic);
    assert_eq!(p.interference(ms(3)), ms(2));
    assert_eq!(p.interference(ms(6)), ms(4));
    assert_eq!(Server::new(ms(6), ms(5), ServerKind::Periodic).unwrap_err().key, "budget");
}

/// HiRes Fig. 6: the web server (4 per `top_ms`, deferrable, highest priority) above the three
/// CPU-bound threads' servers 1/10, 3/20, 4/25 (rate-monotonic; their threads never idle, so
/// they are modelled as periodic servers).
fn fig6(top_ms: u64) -> Vec<Server> {
    vec![
        server(4, top_ms, ServerKind::Deferrable),
        server(1, 10, ServerKind::Periodic),
        server(3, 20, ServerKind::Periodic),
        server(4, 25, ServerKind::Periodic),
    ]
}

#[test]
fn fig6_with_the_web_server_at_4_per_16_gives_every_server_its_reservation() {
    // Responses as tasks (deferrable top: jitter 12):
    //   1/10: 1 + ⌈(R + 12)/16⌉·4: 5 → 9 → 9.
    //   3/20: 3 + ⌈(R + 12)/16⌉·4 + ⌈R/10⌉: 8 → 12 → 13 → 13.
    //   4/25: 4 + ⌈(R + 12)/16⌉·4 + ⌈R/10⌉ + ⌈R/20⌉·3: 12 → 17 → 17.
    // All within their periods, so each gets Θ/Π: over the 400 ms hyperperiod 100, 40, 60, 64.
    let g = fp_server_analysis(&fig6(16), &[0, 1, 2, 3]).unwrap();
    let responses: Vec<_> = g.iter().map(|x| x.response.clone()).collect();
    assert_eq!(responses, [4, 9, 13, 17].map(|r| Rta::Meets { response: ms(r) }));
    assert_eq!(g.iter().map(|x| x.guaranteed_budget).collect::<Vec<_>>(), [4, 1, 3, 4].map(ms));
    assert!(g.iter().all(|x| x.hyperperiod == Some(ms(400))));
    assert_eq!(g.iter().map(|x| x.backlogged_served.unwrap()).collect::<Vec<_>>(), [100, 40, 60, 64].map(ms));
    assert_eq!(g.iter().map(|x| x.backlogged_share().unwrap()).collect::<Vec<_>>(), vec![0.25, 0.1, 0.15, 0.16]);
}

#[test]
fn fig6_with_the_web_server_at_4_per_32_gives_every_server_its_reservation() {
    // Jitter 28: 1/10: 5 → 1 + ⌈37/32⌉·4 = 9; 3/20: 8 → 12 → 13; 4/25: 12 → 17 → 17.
    // Hyperperiod 800 ms: 100, 80, 120, 128.
    let g = fp_server_analysis(&fig6(32), &[0, 1, 2, 3]).unwrap();
    let responses: Vec<_> = g.iter().map(|x| x.response.clone()).collect();
    assert_eq!(responses, [4, 9, 13, 17].map(|r| Rta::Meets { response: ms(r) }));
    assert_eq!(g.iter().map(|x| x.backlogged_served.unwrap()).collect::<Vec<_>>(), [100, 80, 120, 128].map(ms));
    assert_eq!(g.iter().map(|x| x.backlogged_share().unwrap()).collect::<Vec<_>>(), vec![0.125, 0.1, 0.15, 0.16]);
}

#[test]
fn fig6_at_4_per_8_is_91_percent_and_the_lowest_server_is_guaranteed_3_of_its_4() {
    // U = 0.5 + 0.1 + 0.15 + 0.16 = 0.91. As tasks (jitter 4):
    //   1/10: 5 → 1 + ⌈13/8⌉·4 = 9 → 9.
    //   3/20: 8 → 12 → 13 → 3 + ⌈17/8⌉·4 + 2 = 17 → 17.
    //   4/25: 12 → 17 → 21 → 4 + ⌈25/8⌉·4 + ⌈21/10⌉ + ⌈21/20⌉·3 = 29 > 25: not guaranteed Θ.
    // Its guaranteed budget, max of t − I(t) over t ∈ {4, 10, 12, 20, 25}:
    //   I(4) = 4 + 1 + 3 = 8, I(10) = 8 + 1 + 3, I(12) = 8 + 2 + 3, I(20) = 12 + 2 + 3 = 17,
    //   I(25) = 16 + 3 + 6 = 25: best 20 − 17 = 3 ms per 25 ms.
    let g = fp_server_analysis(&fig6(8), &[0, 1, 2, 3]).unwrap();
    assert_eq!(g[1].response, Rta::Meets { response: ms(9) });
    assert_eq!(g[2].response, Rta::Meets { response: ms(17) });
    assert_eq!(g[3].response, Rta::Misses { response_at_least: ms(29) });
    assert_eq!(g[3].guaranteed_budget, ms(3));
    // Backlogged, over the 200 ms hyperperiod: the web server runs [8k, 8k + 4); the free
    // halves go to 1/10 first, then 3/20, which always finish (20 and 30 ms); 4/25 gets
    // 3, 4, 4, 4, 4, 4, 4, 4 ms in its eight periods (3 in [0, 25): [13, 16) only) = 31 ms.
    assert_eq!(g.iter().map(|x| x.backlogged_served.unwrap()).collect::<Vec<_>>(), [100, 20, 30, 31].map(ms));
    assert_eq!(g[3].backlogged_share(), Some(0.155));
}

#[test]
fn an_overloaded_set_starves_the_lowest_server() {
    // 3/4 above 2/5 (periodic): in [0, 4) the top takes 3, the lower one gets 1 of each 4 ms
    // window at best; per 5 ms period its free time is at most t − I(t) = 5 − ⌈5/4⌉·3 < 0 → 1
    // at t = 4 (4 − 3). Guaranteed 1.
    let g = fp_server_analysis(&[server(3, 4, ServerKind::Periodic), server(2, 5, ServerKind::Periodic)], &[0, 1]).unwrap();
    assert!(matches!(g[1].response, Rta::Misses { .. }));
    assert_eq!(g[1].guaranteed_budget, ms(1));
    assert!(fp_server_analysis(&[], &[]).unwrap().is_empty());
}
