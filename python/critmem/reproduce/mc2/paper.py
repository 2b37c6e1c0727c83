"""The MC² paper's own numbers (Kim, Tang, Otterness, Anderson, Smith, Porter, "Supporting I/O and
IPC via Fine-Grained OS Isolation for Mixed-Criticality Real-Time Tasks";
../shared/papers/mc2-io-ipc-isolation.txt), quoted in the report and the `--json` summary for
comparison; nothing is computed from them. Figs. 8, 14 and 15 are plots whose data the text does
not give: only what the text states is here."""

from __future__ import annotations

PAPER_SUA_RATIOS: dict[str, float] = {
    "C|C/R|R": 1.05,
    "O|C/C|C": 1.11,
    "C|C+A/B-ALL/C|C": 1.03,
    "O|C+A/B-ALL/C|C": 1.14,
    "O|C+A/B-ALL/R|R": 1.20,
}
"""Sec. 6.2, ratios of schedulable-utilisation areas (SUA) over all 648 scenarios: Obs. 7 (C|C's
is "5% larger than that of R|R"), Obs. 8 (O|C's "11% greater than that of C|C"), Obs. 9
(C|C+A/B-ALL's "3% better than that of C|C"), Obs. 11 (O|C+A/B-ALL's "14% greater than that of
C|C" and "a 20% improvement over the SUA of R|R")."""

PAPER_OBS10_RATIOS: dict[str, float] = {
    "C|C+A/B-ALL/C|C+A/B-LP": 1.03,
    "C|C+A/B-ALL/C|C+A/B-SP": 1.03,
    "O|C+A/B-ALL/O|C+A/B-LP": 1.03,
    "O|C+A/B-ALL/O|C+A/B-SP": 1.02,
}
"""Obs. 10: "the SUA of C|C+A/B-ALL is roughly 3% better than C|C+A/B-LP and C|C+A/B-SP ... the
SUA of O|C+A/B-ALL is 3% better than O|C+A/B-LP and 2% better than O|C+A/B-SP"."""

PAPER_SUBSET_RATIOS: dict[str, tuple[str, str, str, float]] = {
    # key -> (numerator scheme, denominator scheme, "category=choice" of the scenarios counted, ratio)
    "O|C/C|C (Large IPC)": ("O|C", "C|C", "ipc_size=Large", 1.13),
    "C|C+A/B-ALL/C|C (High bandwidth)": ("C|C+A/B-ALL", "C|C", "io_bandwidth=High", 1.04),
}
"""Obs. 8: "The 11% improvement increases to 13% when only Large (Table 3, Category 5) message
sizes are considered"; Obs. 9: "The improvement increases to around 4% if we only consider High
bandwidths (Table 3, Category 6)"."""

PAPER_FIG15_SCENARIOS: dict[str, tuple[str, ...]] = {
    "a": ("C-Light", "Long", "Light", "Quick", "Small", "High", "Many"),
    "b": ("C-Light", "Long", "Light", "Quick", "Large", "High", "Many"),
    "c": ("C-Light", "Short", "Medium", "Slow", "Large", "High", "Many"),
}
"""Fig. 15's three representative plots, in Table 3's category order (criticality, period, task
utilisation, reload, IPC size, I/O bandwidth, direct I/O); the figure abbreviates Small, Large
and Medium as "Sm.", "Lar." and "Med."."""

PAPER_FIG15_CIRCLED: tuple[str, str, float, float] = ("c", "O|C", 2.6, 0.60)
"""Sec. 6.2: "the circled point in Fig. 15(c) indicates that 60% of the generated task systems
with a total utilization of 2.6 were schedulable under O|C" (inset, scheme, utilisation,
fraction)."""

PAPER_OBS1_PCT_OF_SBP: dict[str, dict[str, tuple[float, float]]] = {
    "CL": {"send": (2.7, 5.4), "receive": (10.6, 15.9)},
    "CE": {"send": (9.2, 12.9), "receive": (29.2, 40.5)},
}
"""Obs. 1 (Fig. 8, messages of 64 to 8,192 bytes): "Observed CL sending times were between 2.7%
and 5.4% of SBP sending times, and receiving times were 10.6% to 15.9% of SBP receiving times.
The CE sending times were between 9.2% and 12.9%, and receiving times were between 29.2% and
40.5%, of the respective SBP times"."""

PAPER_FIG8_SIZES_BYTES: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
"""Sec. 5.1: "message sizes ranging from 64 to 8,192 bytes"."""

PAPER_FIG14_LEVEL_C_PCT: tuple[int, ...] = (0, 20, 40, 60, 80, 100)
"""Sec. 5.3: "respectively allocating 0%, 20%, 40%, 60%, 80%, or 100% of the I/O buffers in the
Level-C banks"; Obs. 6: Synthetic's MOET decreases as that share increases."""

PAPER_SCENARIOS = 648
"""Sec. 6.2: "Our full study generated 648 schedulability plots, one per scenario"."""
PAPER_CPU_DAYS = 80
"""Sec. 6.2: "taking roughly 80 days of CPU time to compute"."""
PAPER_CONFIDENCE = (0.95, 0.05)
"""Sec. 6.1: "We generated sufficient task systems to estimate mean schedulability within ±0.05
with 95% confidence for each scenario and system utilization"."""
PAPER_CORES = 4
"""Sec. 2: the quad-core ARM Cortex A9 (i.MX6); footnote 15: a system whose generated
utilisation exceeds four can be schedulable, as MC²'s management lowers execution costs."""
