#!/usr/bin/env bash
# The real-Linux suite as scripts/test-cgroup-v2.sh runs it inside its cgroup v2 guest, as root,
# from the checkout: the critmem-linux `tests/linux` and chaos test binaries built on the host
# (their paths are the arguments), one test at a time, then pytest's real-machine modules (the
# `serial` mark: the agent, `critmem run --platform linux`, `critmem hires`, the apps). A test
# that skips itself ("SKIP ...") counts as a failure here, but for the cases of cgroup v1: this
# machine is meant to have everything they need. Prints each runner's closing line and exits 1
# if any step failed.
#
#   bash scripts/v2-guest-suite.sh [--subset] LINUX_TEST_BINARY CHAOS_TEST_BINARY
#
# --subset runs the functional subset CI runs (see SUBSET_* below and docs/linux/cgroup-v2.md):
# every cgroup file critmem writes, the journal, restore after kill -9, the OOM guard, reload
# and removed groups, without the cases judged on timing.
#
# Environment: CRITMEM_V2_VENV (the checkout's .venv) is the Python environment for pytest;
# CRITMEM_V2_STEP_TIMEOUT_S (1800 for the subset, 5400 for the whole suite, whose pytest step
# takes about 40 minutes) stops a step that hangs.
set -uo pipefail
subset=0
if [ "${1:-}" = "--subset" ]; then
    subset=1
    shift
fi
if [ $# -ne 2 ]; then
    echo "usage: bash scripts/v2-guest-suite.sh [--subset] LINUX_TEST_BINARY CHAOS_TEST_BINARY" >&2
    exit 2
fi
# The functional subset: libtest name filters (a test runs if its name contains one) and pytest
# node ids. Left out: the SARA acceptance run, the HiRes share and bandwidth measurements, the
# flood, soak and stall cases and the apps, which judge timing (run by the full suite).
SUBSET_LINUX=(cgroups:: control::the_platform_conformance_body control::a_quiet_loop control::a_resting_loop oom:: psi:: restore::
    service:: swap:: jobs::only_a_process jobs::reports_sent_before hires::a_killed_apply hires::a_tree_that_does_not_admit)
SUBSET_CHAOS=(kill9:: clients:: faults::a_managed_group_removed faults::a_journal_filesystem_turning_read_only)
SUBSET_PYTEST=(
    "tests/test_linux_cli.py::test_a_scenario_runs_on_real_processes_and_leaves_nothing_behind[None-None]"
    "tests/test_linux_cli.py::test_swap_setup_and_teardown_manage_only_critmems_own_swapfile"
    "tests/test_linux_cli.py::test_a_run_killed_with_sigkill_takes_its_tasks_and_the_next_run_removes_its_groups"
    "tests/test_python_controllers_linux.py"
)
venv=${CRITMEM_V2_VENV:-$PWD/.venv}
step_timeout_s=${CRITMEM_V2_STEP_TIMEOUT_S:-$((subset ? 1800 : 5400))}
log=$(mktemp -d)
failed=()

echo "v2-guest: kernel $(uname -r), controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
# Timing tests stretch their periods by how much slower this guest runs code than the host.
if [ -z "${CRITMEM_TIME_SCALE:-}" ] && [ -n "${CRITMEM_V2_HOST_LOOP_S:-}" ]; then
    guest_loop_s=$(/usr/bin/python3 scripts/v2_time_loop.py)
    CRITMEM_TIME_SCALE=$(awk -v g="$guest_loop_s" -v h="$CRITMEM_V2_HOST_LOOP_S" 'BEGIN { s = g / h; if (s < 1) s = 1; printf "%.1f", s }')
    export CRITMEM_TIME_SCALE
    echo "v2-guest: time scale $CRITMEM_TIME_SCALE (a fixed loop: ${CRITMEM_V2_HOST_LOOP_S} s on the host, ${guest_loop_s} s here)"
fi

# Runs one step, keeping its output; a non-zero exit or a self-skipped test fails the step.
step() {
    local name=$1
    shift
    printf '\n== %s\n' "$name"
    local start_s=$SECONDS rc=0
    # A step that hangs is stopped, after a listing of what every process waits on, so the
    # steps after it still run.
    (sleep $((step_timeout_s - 5)) && echo "== $name: still running after $((step_timeout_s - 5)) s:" &&
        ps -eo pid,ppid,stat,wchan:32,args | cut -c1-200) &
    local watchdog=$!
    timeout --kill-after=10 "$step_timeout_s" "$@" 2>&1 | tee "$log/$name" || rc=$?
    kill "$watchdog" 2>/dev/null
    wait "$watchdog" 2>/dev/null
    local skips
    # Tests print "SKIP <test>: <reason>" after libtest's "test <name> ... "; the cases of
    # cgroup v1 alone have nothing to test here.
    skips=$(grep -E '(^|\.\.\. )SKIP [a-z0-9_]+: ' "$log/$name" | grep -vc 'cgroup v1' || true)
    # The runner's closing line: cargo's last "test result:", pytest's last "passed/failed" line.
    local closing
    closing=$(grep -E '^test result:|^[0-9]+ (passed|failed)|(passed|failed|error).* in [0-9.]+s' "$log/$name" | tail -1)
    echo "-- $name: exit $rc, ${skips} skipped, $((SECONDS - start_s)) s: ${closing:-no closing line}"
    if [ "$rc" -ne 0 ] || [ "$skips" -ne 0 ]; then
        failed+=("$name")
    fi
}

# The Rust tests expect a machine without swap, as the project's hosts are (the ones that need
# swap make a swapfile of their own); pytest's apps run with the guest's swap disk.
swaps=$(awk 'NR > 1 { print $1 }' /proc/swaps)
for swap in $swaps; do swapoff "$swap"; done
if [ "$subset" = 1 ]; then
    step rust-linux "$1" --test-threads 1 "${SUBSET_LINUX[@]}"
    step rust-chaos "$2" --test-threads 1 "${SUBSET_CHAOS[@]}"
    for swap in $swaps; do swapon "$swap"; done
    step pytest-serial "$venv/bin/pytest" -q -p no:cacheprovider -m serial "${SUBSET_PYTEST[@]}"
else
    step rust-linux "$1" --test-threads 1
    step rust-chaos "$2" --test-threads 1
    for swap in $swaps; do swapon "$swap"; done
    step pytest-serial "$venv/bin/pytest" -q -p no:cacheprovider -m serial tests
fi

printf '\n'
# Every test that ran: libtest's "N passed; M failed", pytest's "N passed, M failed".
counts=$(cat "$log"/* | grep -E '^test result:|(passed|failed).* in [0-9.]+s' |
    awk '{ for (i = 2; i <= NF; i++) { w = $i; gsub(/[;,]/, "", w); if (w == "passed") p += $(i-1); if (w == "failed") f += $(i-1) } }
         END { printf "%d tests run: %d passed, %d failed", p + f, p, f }')
echo "v2-guest: $counts"
if [ ${#failed[@]} -ne 0 ]; then
    echo "v2-guest: FAILED: ${failed[*]}"
    exit 1
fi
echo "v2-guest: all steps passed"
