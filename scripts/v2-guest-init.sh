#!/bin/busybox sh
# /init of the cgroup v2 test guest (packed into its initramfs by scripts/v2_guest_initramfs.py).
# Mounts the host's / read-only over 9p under a tmpfs overlay (the guest may write anywhere,
# nothing reaches the host), an ext4 scratch disk at /tmp and /var/tmp,
# cgroup2 alone at /sys/fs/cgroup, turns on its own swap disk, then runs the host's command
# (cmd.sh in the shared run directory) as root and leaves its exit code in `rc` there.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

fail() {
    echo "v2-guest: $*" >&2
    poweroff -f
}

while read -r module; do
    insmod "/$module" || fail "insmod $module failed"
done < /modules/order

mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower || fail "cannot mount the host's / (9p tag hostroot)"
mount -t tmpfs -o mode=0755 rw /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot || fail "overlay mount failed"

disk_with_serial() {
    for block in /sys/block/vd*; do
        if [ "$(cat "$block/serial" 2>/dev/null)" = "$1" ]; then
            echo "/dev/${block##*/}"
            return 0
        fi
    done
    fail "no virtio disk with serial $1"
}
scratch=$(disk_with_serial critmem-scratch)
swap=$(disk_with_serial critmem-swap)

N=/newroot
# The checkout (its path on the kernel's command line) may lie under a directory the scratch
# disk covers below, as a CI's /tmp: it is bound back in place afterwards.
checkout=$(sed -n 's/.*critmem\.checkout=\([^ ]*\).*/\1/p' /proc/cmdline)
if [ -n "$checkout" ]; then
    mkdir -p /rw/checkout
    mount --bind "$N$checkout" /rw/checkout || fail "cannot find the checkout $checkout"
fi
mount -t proc proc $N/proc
mount -t sysfs sysfs $N/sys
mount -t devtmpfs devtmpfs $N/dev
mkdir -p $N/dev/pts $N/dev/shm
mount -t devpts devpts $N/dev/pts
mount -t tmpfs tmpfs $N/dev/shm
mount -t cgroup2 -o nsdelegate cgroup2 $N/sys/fs/cgroup || fail "cgroup2 mount failed"
mount -t tmpfs -o mode=0755 tmpfs $N/run
# /tmp and /var/tmp on the scratch disk: tests write gigabytes there (more than the tmpfs
# overlay holds) and make swapfiles, which swapon refuses on tmpfs and overlayfs.
mkdir -p $N/run/critmem-scratch
mount -t ext4 "$scratch" $N/run/critmem-scratch || fail "cannot mount the scratch disk $scratch"
for dir in tmp var/tmp; do
    mkdir -p "$N/run/critmem-scratch/$dir" "$N/$dir"
    chmod 1777 "$N/run/critmem-scratch/$dir"
    mount --bind "$N/run/critmem-scratch/$dir" "$N/$dir"
done
# critmem makes its state directory and default swapfile in /var/lib/critmem, so /var/lib is
# on the scratch disk (swapon refuses tmpfs and overlayfs) with each of the host's entries
# bound in but critmem's: a fresh machine's, as the first-start tests need.
lib=$N/run/critmem-scratch/var/lib
mkdir -p "$lib"
chmod 0755 "$lib"
for entry in "$N"/var/lib/* "$N"/var/lib/.[!.]*; do
    name=${entry##*/}
    if [ ! -e "$entry" ] || [ "$name" = critmem ]; then
        continue
    fi
    if [ -d "$entry" ]; then mkdir -p "$lib/$name"; else touch "$lib/$name"; fi
    mount --bind "$entry" "$lib/$name" || fail "cannot bind $entry into the scratch disk's /var/lib"
done
mount -o rbind "$lib" "$N/var/lib" || fail "cannot bind the scratch disk's /var/lib"
mkdir -p $N/run/critmem-guest
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 guestrun $N/run/critmem-guest || fail "cannot mount the run directory (9p tag guestrun)"
if [ -n "$checkout" ] && [ ! -e "$N$checkout/scripts/v2-guest-init.sh" ]; then
    mkdir -p "$N$checkout"
    mount --bind /rw/checkout "$N$checkout" || fail "cannot bind the checkout $checkout back"
fi
swapon "$swap" || fail "swapon $swap failed"
# No network, but the loopback: tests serve on 127.0.0.1 (nginx under ab).
ifconfig lo 127.0.0.1 up || fail "cannot bring up the loopback interface"
hostname critmem-v2-guest

# The host's environment, minus what points at the host's own session.
chroot $N /usr/bin/env -i HOME=/root USER=root LOGNAME=root TERM=dumb LANG=C.UTF-8 \
    PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/sh /run/critmem-guest/cmd.sh
rc=$?
echo "$rc" > $N/run/critmem-guest/rc
# The command may have turned it off already.
swapoff "$swap" 2>/dev/null
umount $N/run/critmem-guest
sync
poweroff -f
