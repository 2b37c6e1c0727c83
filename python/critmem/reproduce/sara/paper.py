"""The SARA paper's own numbers (../shared/papers/sara-stall-aware-allocation.txt), quoted in the
report and the `--json` summary for comparison; nothing is computed from them."""

from __future__ import annotations

PAPER_SARA_HIT_RATIO = 0.9713
"""Abstract and Sec. IV-B: SARA's average deadline hit ratio."""
PAPER_THROUGHPUT_GAIN = {"greedy": 5.69, "tmo-low": 5.89}
"""Sec. IV-B: SARA's average non-RT throughput improvement over Greedy and TMO-Low."""
PAPER_MAX_THROUGHPUT_GAIN = {"greedy": 20.96, "tmo-low": 22.32}
"""Sec. IV-B: the largest improvement (small memory, fast SSD)."""
PAPER_BASELINE_HIT_RATIO = {"offline": 0.4961, "tmo-high": 0.7711}
"""Sec. IV-B: Offline's and TMO-High's deadline hit ratios."""
PAPER_FIG7 = {"slope": 1.0, "intercept_s": 0.48}
"""Sec. III-B: Fig. 7's fit for Sphinx, slope "approaches 1", intercept "approximates 0.48"."""
