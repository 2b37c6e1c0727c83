# The cgroup v2 test guest's kernel (sourced by scripts/setup.sh and scripts/test-cgroup-v2.sh):
# Debian's stock kernel (the one linux-image-amd64 currently depends on) and a static busybox
# for the initramfs, unpacked from their packages into .cache/v2-guest/, never installed into
# the host's /boot. V2_GUEST_RELEASE and V2_GUEST_VMLINUZ are empty until one is unpacked.
V2_GUEST_DIR=$PWD/.cache/v2-guest
V2_GUEST_ROOT=$V2_GUEST_DIR/root

v2_guest_find() {
    V2_GUEST_RELEASE=""
    V2_GUEST_VMLINUZ=""
    local vmlinuz
    for vmlinuz in "$V2_GUEST_ROOT"/boot/vmlinuz-*; do
        if [ -f "$vmlinuz" ] && [ -x "$V2_GUEST_ROOT/bin/busybox" ]; then
            V2_GUEST_VMLINUZ=$vmlinuz
            V2_GUEST_RELEASE=${vmlinuz##*/vmlinuz-}
        fi
    done
}
v2_guest_find

# Downloads (apt-get download, as root) and unpacks the kernel and busybox-static packages.
v2_guest_fetch() {
    [ -z "$V2_GUEST_VMLINUZ" ] || return 0
    local package
    package=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1)
    if [ -z "$package" ]; then
        echo "v2-guest: apt-cache does not know which kernel linux-image-amd64 depends on" >&2
        return 1
    fi
    rm -rf "$V2_GUEST_DIR/debs"
    mkdir -p "$V2_GUEST_DIR/debs"
    # apt's sandbox user cannot write into a root-owned checkout: apt says so and goes on.
    (cd "$V2_GUEST_DIR/debs" && apt-get download -q "$package" busybox-static 2>&1 | grep -v 'Download is performed unsandboxed') || true
    local deb
    for deb in "$V2_GUEST_DIR"/debs/*.deb; do
        dpkg-deb -x "$deb" "$V2_GUEST_ROOT" || return 1
    done
    v2_guest_find
    [ -n "$V2_GUEST_VMLINUZ" ]
}
