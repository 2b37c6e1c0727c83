#!/usr/bin/env bash
# Installs everything into a project-local .venv: the pinned Python packages from
# requirements.lock, then the critmem package with its Rust extension built in release mode.
# Safe to run again: each step is skipped or is a no-op when nothing changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python=${PYTHON:-python3}
venv=.venv
log=$venv/setup.log

say() { printf 'setup: %s\n' "$*"; }
# Runs a step with its output in the log; shows the log only if the step fails.
quiet() {
    if ! "$@" >>"$log" 2>&1; then
        say "failed: $*" >&2
        tail -n 40 "$log" >&2
        exit 1
    fi
}

command -v cargo >/dev/null || { say "cargo not found: install Rust (https://rustup.rs) first" >&2; exit 1; }

if ! "$venv/bin/python" -c '' 2>/dev/null; then
    say "creating $venv with $("$python" --version 2>&1)"
    rm -rf "$venv"
    "$python" -m venv "$venv"
fi
: >"$log"

# Reinstall the pinned packages only when the lock file changed.
stamp=$venv/requirements.lock.sha256
if ! sha256sum --check --status "$stamp" 2>/dev/null; then
    say "installing pinned Python packages from requirements.lock"
    # --no-deps: the lock lists every package, so nothing unpinned sneaks in; pip check
    # then proves the set is complete and consistent.
    quiet "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --no-deps -r requirements.lock
    quiet "$venv/bin/python" -m pip check --disable-pip-version-check
    sha256sum requirements.lock >"$stamp"
fi

say "building the critmem extension (release) and installing it into $venv"
export VIRTUAL_ENV=$PWD/$venv
# An editable install: python/critmem is imported in place, the built _core sits beside it.
# Its runtime dependencies are already satisfied from the lock, so pip fetches nothing.
quiet "$venv/bin/maturin" develop --release --locked
# critmem's modules compiled to bytecode beside their sources, so a command starts without
# compiling them, also where PYTHONDONTWRITEBYTECODE keeps Python from caching them itself (a
# source edited later is compiled again in memory: never a stale module).
quiet "$venv/bin/python" -m compileall -q -j 0 python/critmem
# The Linux platform's binaries (agent, scenario runner, workers, swapfile tool), beside the
# interpreter where `critmem run --platform linux`, `critmem agent` and `critmem swap` find them.
say "building the Linux agent and workers (release) and installing them into $venv/bin"
quiet cargo build --release --locked -p critmem-linux --bins
target_dir=$(cargo metadata --format-version 1 --no-deps --locked 2>>"$log" | "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
source scripts/linux-binaries.sh
for bin in "${LINUX_BINARIES[@]}"; do
    # Copy to a temporary name, then rename: a running binary is never overwritten in place.
    install -m 0755 "$target_dir/release/$bin" "$venv/bin/.$bin.new"
    mv -f "$venv/bin/.$bin.new" "$venv/bin/$bin"
done

# The HiRes HTTP measurement (Table III's analogue) needs a real web server and the paper's load
# generator, ab. Debian's nginx starts a service when installed: a policy-rc.d that refuses
# every start holds it back while apt runs (one already there is the machine's and is kept).
install_http_tools() {
    # nginx is in /usr/sbin, which a user's PATH may lack.
    have() { command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ]; }
    if have nginx && have ab; then
        return
    fi
    if [ "$(id -u)" -ne 0 ]; then
        say "not root: nginx and ab (apache2-utils) not installed; the HiRes HTTP measurement will be skipped"
        return
    fi
    if ! command -v apt-get >/dev/null; then
        say "no apt-get: the HiRes HTTP measurement will be skipped until nginx and ab (apache2-utils) are installed"
        return
    fi
    say "installing nginx-light and apache2-utils with apt-get (for the HiRes HTTP measurement)"
    local policy=/usr/sbin/policy-rc.d ours=""
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 0755 "$policy"
        ours=$policy
        trap "rm -f $policy" EXIT
    fi
    export DEBIAN_FRONTEND=noninteractive
    quiet apt-get update -q
    quiet apt-get install -y -q --no-install-recommends nginx-light apache2-utils
    if [ -n "$ours" ]; then
        rm -f "$ours"
        trap - EXIT
    fi
    # Should a start have got through all the same, the packaged daemon (its pid file is the
    # package's /run/nginx.pid) is stopped: the measurement starts its own server.
    if [ -s /run/nginx.pid ] && kill -0 "$(cat /run/nginx.pid)" 2>/dev/null; then
        say "stopping the nginx service the package started"
        nginx -s quit 2>>"$log" || kill "$(cat /run/nginx.pid)"
    fi
}
install_http_tools

# Installs Debian packages a test needs: as root, with apt-get. Elsewhere it says what goes
# without them. apt_install WITHOUT WHY PACKAGE...
apt_install() {
    local without=$1 why=$2
    shift 2
    if [ "$(id -u)" -ne 0 ]; then
        say "not root: $* not installed; $without"
        return
    fi
    if ! command -v apt-get >/dev/null; then
        say "no apt-get: $without until $* is installed"
        return
    fi
    say "installing $* with apt-get ($why)"
    export DEBIAN_FRONTEND=noninteractive
    quiet apt-get update -q
    quiet apt-get install -y -q --no-install-recommends "$@"
}

# The speech app (critmem.apps.speech) decodes real speech, synthesised once with espeak-ng into
# the venv, where the app looks for it.
install_speech_tools() {
    if command -v espeak-ng >/dev/null; then
        return
    fi
    apt_install "the speech app's recordings are skipped" "to synthesise the speech app's recordings" espeak-ng
}
install_speech_tools
speech_dir=$venv/share/critmem/speech
if command -v espeak-ng >/dev/null && ! "$venv/bin/python" -m critmem.apps.speech_audio --out "$speech_dir" --check; then
    say "synthesising the speech app's recordings into $speech_dir"
    quiet "$venv/bin/python" -m critmem.apps.speech_audio --out "$speech_dir"
fi

# The documentation site's test renders pages in headless Chromium (Debian's package).
install_chromium() {
    if [ -x /usr/bin/chromium ]; then
        return
    fi
    apt_install "the documentation site's browser test will be skipped" "for the documentation site's browser test" chromium
}
install_chromium

# scripts/test-cgroup-v2.sh boots Debian's stock kernel in QEMU with only the unified cgroup
# hierarchy: QEMU from apt, the kernel and a static busybox unpacked into .cache/v2-guest/
# (never installed into /boot).
install_v2_guest() {
    if ! command -v qemu-system-x86_64 >/dev/null; then
        apt_install "scripts/test-cgroup-v2.sh cannot boot its guest" "for scripts/test-cgroup-v2.sh's guest" qemu-system-x86
    fi
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
        say "not root or no apt-get: the cgroup v2 guest's kernel is not fetched; scripts/test-cgroup-v2.sh cannot run"
        return
    fi
    source scripts/v2-guest-kernel.sh
    if [ -z "$V2_GUEST_VMLINUZ" ]; then
        say "fetching the cgroup v2 guest's kernel (linux-image-amd64's) into $V2_GUEST_DIR"
        v2_guest_fetch || say "could not fetch the guest kernel: scripts/test-cgroup-v2.sh cannot run"
    fi
}
install_v2_guest

say "done: $("$venv/bin/critmem" --version)"
