//! Shared by the integration tests of critmem-core.

use proptest::test_runner::{Config as ProptestConfig, RngSeed};

/// A proptest configuration of `cases` cases whose random seed is printed (shown when the test
/// fails) and can be fixed: `PROPTEST_RNG_SEED=N cargo test ...` reruns exactly those cases.
/// Nothing is persisted to files: the printed seed and proptest's shrunk input say it all.
pub(crate) fn seeded_config(test: &str, cases: u32) -> ProptestConfig {
    let seed = std::env::var("PROPTEST_RNG_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("{test}: proptest seed {seed} (rerun with PROPTEST_RNG_SEED={seed})");
    ProptestConfig { cases, failure_persistence: None, rng_seed: RngSeed::Fixed(seed), ..ProptestConfig::default() }
}
