#!/usr/bin/env bash
# Runs a command as root in a QEMU guest whose kernel has only the unified cgroup hierarchy
# (cgroup_no_v1=all): Debian's stock kernel, 2 vCPUs, 4 GiB, the host's / read-only under a
# writable tmpfs overlay (the checkout and .venv at their usual paths), an ext4 scratch disk at
# /tmp and /var/tmp, and a swap disk of its own. Without a command it runs the real-Linux suite
# (scripts/v2-guest-suite.sh). Exits with the command's exit code.
#
#   bash scripts/test-cgroup-v2.sh                      # the real-Linux suite
#   bash scripts/test-cgroup-v2.sh --subset             # its functional subset (what CI runs)
#   bash scripts/test-cgroup-v2.sh -- cat /sys/fs/cgroup/cgroup.controllers
#
# Needs root (9p exports the host's files as they are), qemu-system-x86 and the guest kernel
# under .cache/v2-guest/: `bash scripts/setup.sh` installs both. TCG, not KVM: KVM guests on
# this project's machines never get past the boot loader. Environment: CRITMEM_V2_MEM (4G),
# CRITMEM_V2_TIMEOUT_S (5400 for the subset, 10800 for the whole suite, which takes about an
# hour), CRITMEM_V2_SWAP (2G). Exits 77 with one line saying why when
# no guest can start here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
checkout=$PWD

usage() {
    echo "usage: bash scripts/test-cgroup-v2.sh [--subset | -- COMMAND [ARG...]]" >&2
    exit 2
}
subset=()
if [ $# -gt 0 ]; then
    case $1 in
    --subset) [ $# -eq 1 ] || usage; subset=(--subset); shift ;;
    --) shift; [ $# -gt 0 ] || usage ;;
    *) usage ;;
    esac
fi
# The guest finds the checkout by its path on the kernel's command line.
case $checkout in
*[[:space:]]*) echo "test-cgroup-v2: the checkout's path has a space in it: $checkout" >&2; exit 2 ;;
esac
cannot_start() {
    echo "test-cgroup-v2: skipped: $*" >&2
    exit 77
}
[ "$(id -u)" = 0 ] || cannot_start "needs root (9p must read every file of the host's / as it is)"

source scripts/v2-guest-kernel.sh
qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || cannot_start "qemu-system-x86_64 is missing: run 'bash scripts/setup.sh' as root"
[ -n "$V2_GUEST_VMLINUZ" ] || cannot_start "no guest kernel under $V2_GUEST_ROOT/boot: run 'bash scripts/setup.sh' as root"
python=/usr/bin/python3
[ -x .venv/bin/python ] && python=.venv/bin/python

run=$(mktemp -d "$V2_GUEST_DIR/run.XXXXXX")
qemu_pid=""
cleanup() {
    if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
        kill "$qemu_pid" 2>/dev/null || true
        wait "$qemu_pid" 2>/dev/null || true
    fi
    rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$python" scripts/v2_guest_initramfs.py --root "$V2_GUEST_ROOT" --release "$V2_GUEST_RELEASE" \
    --init scripts/v2-guest-init.sh --out "$run/initramfs.gz"
# Sparse images: they take host disk only as the guest writes to them.
truncate -s 16G "$run/scratch.img"
mkfs.ext4 -q -F -E lazy_itable_init=1 "$run/scratch.img"
truncate -s "${CRITMEM_V2_SWAP:-2G}" "$run/swap.img"
mkswap -q "$run/swap.img" >/dev/null 2>&1 || mkswap "$run/swap.img" >/dev/null

if [ $# -eq 0 ]; then
    # The guest runs test binaries built here: compiling under TCG would take ten times as long.
    echo "test-cgroup-v2: building the critmem-linux tests (cargo test --profile ci-test --no-run)"
    binaries=$(nice -n 19 cargo test --profile ci-test --locked -p critmem-linux --no-run --message-format=json-render-diagnostics |
        "$python" -c '
import json, sys
found = {}
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable") and message["target"]["kind"] == ["test"]:
        found[message["target"]["name"]] = message["executable"]
print(found["linux"], found["chaos"])
')
    # shellcheck disable=SC2086 # two paths without spaces (target/ci-test/deps/...)
    set -- bash scripts/v2-guest-suite.sh "${subset[@]}" $binaries
fi
# The guest's slowdown is measured against this machine: the same fixed loop here and there.
host_loop_s=$(/usr/bin/python3 scripts/v2_time_loop.py)
{
    echo "cd $(printf %q "$checkout") || exit 1"
    echo "export CRITMEM_V2_HOST_LOOP_S=$host_loop_s"
    # The host's PYTHONPATH and CRITMEM_* settings (CRITMEM_V2_VENV, CRITMEM_SOAK_S, CRITMEM_CHAOS_LONG...).
    env | { grep -E '^(CRITMEM_[A-Z0-9_]*|PYTHONPATH)=' || true; } | while IFS= read -r setting; do
        printf 'export %s=%q\n' "${setting%%=*}" "${setting#*=}"
    done
    printf '%q ' exec "$@"
    echo
} > "$run/cmd.sh"

start_s=$(date +%s)
# -nodefaults: no VGA, network or CD-ROM; the serial port is the console, its output ours.
guest_timeout_s=10800
[ ${#subset[@]} -eq 0 ] || guest_timeout_s=5400
timeout --foreground "${CRITMEM_V2_TIMEOUT_S:-$guest_timeout_s}" nice -n 10 "$qemu" \
    -accel tcg,thread=multi -cpu max -smp 2 -m "${CRITMEM_V2_MEM:-4G}" \
    -nodefaults -display none -no-reboot -serial stdio \
    -kernel "$V2_GUEST_VMLINUZ" -initrd "$run/initramfs.gz" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1 critmem.checkout=$checkout" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$run,mount_tag=guestrun,security_model=none" \
    -drive "file=$run/scratch.img,if=none,id=scratch,format=raw,cache=unsafe" \
    -device virtio-blk-pci,drive=scratch,serial=critmem-scratch \
    -drive "file=$run/swap.img,if=none,id=swap,format=raw,cache=unsafe" \
    -device virtio-blk-pci,drive=swap,serial=critmem-swap \
    </dev/null &
qemu_pid=$!
qemu_rc=0
wait "$qemu_pid" || qemu_rc=$?
qemu_pid=""
elapsed_s=$(($(date +%s) - start_s))

if [ ! -f "$run/rc" ]; then
    echo "test-cgroup-v2: the guest stopped without the command's exit code (qemu exit $qemu_rc after ${elapsed_s} s)" >&2
    exit 1
fi
rc=$(cat "$run/rc")
echo "test-cgroup-v2: guest exit code $rc after ${elapsed_s} s (boot and shutdown included)"
exit "$rc"
