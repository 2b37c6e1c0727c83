//! Loading a scenario checks its memory declarations by arithmetic: it never builds the
//! memory model, however large the declared memory.

use critmem_core::load_toml_str;

use crate::alloc::allocated_bytes;

/// Three tasks each mapping four 16 GiB regions of a 64 GiB machine: 2^26 mapped pages, the
/// loader's cap. Setting up the memory model for it takes about a gigabyte (a frame table of
/// 2^24 frames, per-page state of 2^24 region pages, page tables of 3 · 2^24 entries).
fn huge_memory() -> String {
    let mut text = String::from("[scheduler]\nkind = \"edf\"\n[run]\nhorizon_ms = 100\n[memory]\ntotal_mb = 65536\n");
    for r in 0..4 {
        text += &format!("[[region]]\nname = \"r{r}\"\nsize_mb = 16384\n");
    }
    let streams: Vec<String> = (0..4).map(|r| format!("{{ pattern = \"random\", region = \"r{r}\", refs = 1 }}")).collect();
    for t in 0..3 {
        text += &format!("[[task]]\nname = \"t{t}\"\nwcet_ms = 1\nperiod_ms = 10\naccess = [{}]\n", streams.join(", "));
    }
    text
}

#[test]
fn loading_a_scenario_with_huge_memory_allocates_no_memory_model() {
    let text = huge_memory();
    let before = allocated_bytes();
    let s = load_toml_str(&text, "huge.toml").unwrap_or_else(|e| panic!("{e}"));
    let allocated = allocated_bytes() - before;
    let m = s.memory.as_ref().unwrap();
    assert_eq!((m.total_frames, m.regions.len(), s.tasks.len()), (1 << 24, 4, 3));
    assert!(allocated < 1 << 20, "loading allocated {allocated} bytes");
    // One region more is over the cap: refused before anything is built, too.
    let over = text.replacen("[[task]]", "[[region]]\nname = \"r4\"\nsize_mb = 1\n[[task]]", 1);
    let before = allocated_bytes();
    let e = load_toml_str(&over, "huge.toml").unwrap_err().to_string();
    assert!(e.contains("at most 2^26"), "{e}");
    assert!(allocated_bytes() - before < 1 << 20);
}
