#!/usr/bin/env bash
# Runs every test: the style checks (rustfmt, clippy, ruff), the documentation build (mkdocs
# build --strict), the Rust workspace (cargo test),
# pytest against the installed package, the type checks (mypy --strict, and stubtest of the
# extension's .pyi stubs), then the real-Linux tests' functional subset on cgroup v2 in a QEMU
# guest (scripts/test-cgroup-v2.sh --subset).
# Expects .venv from scripts/setup.sh. Any failing step fails the run; so does pytest's
# exit code 5 ("no tests collected").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv=.venv
if [ ! -x "$venv/bin/pytest" ]; then
    echo "test: $venv is missing or incomplete: run 'bash scripts/setup.sh' first" >&2
    exit 1
fi

# pytest runs the built extension and the installed Linux binaries: if a Rust source is newer
# than any of them (a pull or an edit since setup.sh), they are rebuilt first, so no test runs
# against stale code.
source scripts/linux-binaries.sh
built=(python/critmem/_core*.so "${LINUX_BINARIES[@]/#/$venv/bin/}")
stale=""
for artifact in "${built[@]}"; do
    if [ ! -e "$artifact" ]; then
        stale="$artifact is missing"
        break
    fi
    newer=$(find crates include Cargo.toml Cargo.lock -newer "$artifact" -type f \( -name '*.rs' -o -name '*.toml' -o -name '*.lock' -o -name '*.h' \) -print -quit)
    if [ -n "$newer" ]; then
        stale="$newer is newer than $artifact"
        break
    fi
done
if [ -n "$stale" ]; then
    echo "test: $stale: rebuilding with scripts/setup.sh" >&2
    bash scripts/setup.sh
fi

# The bindings' unit tests are an executable linked to libpython: build them for the venv's
# interpreter (as maturin does) and let the loader find that interpreter's libpython.
export PYO3_PYTHON=$PWD/$venv/bin/python
libdir=$("$PYO3_PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

step() { printf '\n== %s\n' "$*"; }

# Optimised builds: the property tests and simulations run many times faster than in debug.
step "cargo fmt --check, clippy -D warnings, ruff"
cargo fmt --check
cargo clippy --workspace --all-targets --release --locked -- -D warnings
"$venv/bin/ruff" check python tests scripts
"$venv/bin/ruff" format --check python tests scripts

step "mkdocs build --strict (the documentation site, into a temporary folder)"
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
NO_MKDOCS_2_WARNING=1 "$venv/bin/mkdocs" build --strict --quiet --site-dir "$site"

# The ci-test profile (Cargo.toml) is release without LTO: the same speed of tests for half the
# build.
step "cargo test --workspace --profile ci-test"
cargo test --workspace --profile ci-test --locked

# Both cores share the simulator's tests; the tests that measure the machine (real processes,
# cgroups, swap, wall-clock timing: the `serial` mark) then run alone, on a quiet machine.
step "pytest on both cores"
"$venv/bin/pytest" -q -n 2 -m "not serial"

step "pytest: the tests that measure the machine, one at a time"
"$venv/bin/pytest" -q -m serial

step "mypy --strict python/critmem tests"
"$venv/bin/mypy" --strict python/critmem tests

step "stubtest critmem._core"
"$venv/bin/python" -m mypy.stubtest critmem._core

# After every test that times this machine: the guest takes both cores for ten minutes.
step "the real-Linux tests on cgroup v2 in a QEMU guest (the functional subset; the full suite: bash scripts/test-cgroup-v2.sh)"
guest_rc=0
bash scripts/test-cgroup-v2.sh --subset || guest_rc=$?
if [ "$guest_rc" -eq 77 ]; then
    echo "test: no cgroup v2 guest could start on this machine (the line above says why): its tests did not run"
elif [ "$guest_rc" -ne 0 ]; then
    exit "$guest_rc"
fi

step "all tests passed"
