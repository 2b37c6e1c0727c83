#!/usr/bin/env bash
# The real-Linux suite as scripts/test-cgroup-v2.sh runs it inside its cgroup v2 guest, as root,
# from the checkout: the critmem-linux `tests/linux` and chaos test binaries built on the host
# (their paths are the arguments), one test at a time, then pytest's real-machine modules (the
# `serial` mark: the agent, `critmem run --platform linux`, `critmem hires`, the apps). A test
# that skips itself ("SKIP ...") counts as a failure here, but for the cases of cgroup v1: this
# machine is meant to have everything they need. Prints each runner's closing line and exits 1
# if any step failed.
#
#   bash scripts/v2-guest-suite.sh LINUX_TEST_BINARY CHAOS_TEST_BINARY
#
# Environment: CRITMEM_V2_VENV (the checkout's .venv) is the Python environment for pytest;
# CRITMEM_V2_STEP_TIMEOUT_S (1800) stops a step that hangs.
set -uo pipefail
if [ $# -ne 2 ]; then
    echo "usage: bash scripts/v2-guest-suite.sh LINUX_TEST_BINARY CHAOS_TEST_BINARY" >&2
    exit 2
fi
venv=${CRITMEM_V2_VENV:-$PWD/.venv}
step_timeout_s=${CRITMEM_V2_STEP_TIMEOUT_S:-1800}
log=$(mktemp -d)
failed=()

echo "v2-guest: kernel $(uname -r), controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"

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
step rust-linux "$1" --test-threads 1
step rust-chaos "$2" --test-threads 1
for swap in $swaps; do swapon "$swap"; done
step pytest-serial "$venv/bin/pytest" -q -p no:cacheprovider -m serial tests

printf '\n'
if [ ${#failed[@]} -ne 0 ]; then
    echo "v2-guest: FAILED: ${failed[*]}"
    exit 1
fi
echo "v2-guest: all steps passed"
