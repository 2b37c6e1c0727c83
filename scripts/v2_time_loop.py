"""Prints the best of three timings, in seconds, of a fixed pure-Python loop: run on the host
and in the cgroup v2 guest, the ratio is how much slower the guest runs code
(scripts/v2-guest-suite.sh exports it as CRITMEM_TIME_SCALE)."""

import time


def main() -> None:
    best_s = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        sum(i * i for i in range(2_000_000))
        best_s = min(best_s, time.perf_counter() - started)
    print(f"{best_s:.4f}")


if __name__ == "__main__":
    main()
