"""Builds the initramfs of the cgroup v2 test guest (scripts/test-cgroup-v2.sh).

The archive holds a static busybox, the guest kernel's modules that mount the host's
filesystem over 9p, the overlay, the scratch disk and the swap disk (with the modules they
depend on, in load order), and the `/init` script given on the command line. Written in the
kernel's `newc` cpio format, gzip-compressed, with fixed timestamps so the same inputs give
the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

# What the guest needs from the kernel's modules; their dependencies are added from each
# module's own `depends=` field. crc32c_generic is a soft dependency of ext4 (the crypto API
# asks for "crc32c" at mount), which `depends=` does not list.
WANTED_MODULES = [
    "virtio_pci",
    "virtio_blk",
    "9pnet_virtio",
    "9p",
    "overlay",
    "crc32c_generic",
    "ext4",
    # The chaos cases make an ext4 filesystem of their own on a loop device.
    "loop",
]


def modinfo_depends(module: Path) -> list[str]:
    """The `depends=` entry of a module's .modinfo section (NUL-separated key=value strings)."""
    data = module.read_bytes()
    for field in data.split(b"\0"):
        if field.startswith(b"depends="):
            names = field[len(b"depends=") :].decode()
            return [n for n in names.split(",") if n]
    return []


def load_order(modules_dir: Path, wanted: list[str]) -> list[Path]:
    """Modules to insmod, each after the modules it depends on."""
    by_name: dict[str, Path] = {}
    for path in modules_dir.rglob("*.ko"):
        # Module names use '_' where file names may use '-'.
        by_name[path.stem.replace("-", "_")] = path
    order: list[Path] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        key = name.replace("-", "_")
        if key in seen:
            return
        seen.add(key)
        if key not in by_name:
            sys.exit(f"v2_guest_initramfs: module {name} not found under {modules_dir}")
        path = by_name[key]
        for dep in modinfo_depends(path):
            visit(dep)
        order.append(path)

    for name in wanted:
        visit(name)
    return order


class Cpio:
    """A newc cpio archive (the format the kernel unpacks as an initramfs)."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.inode = 1

    def _entry(self, name: str, mode: int, body: bytes) -> None:
        encoded = name.encode() + b"\0"
        fields = [self.inode, mode, 0, 0, 1, 0, len(body), 0, 0, 0, 0, len(encoded), 0]
        self.inode += 1
        self.data += b"070701" + b"".join(b"%08X" % f for f in fields) + encoded
        self.data += b"\0" * (-len(self.data) % 4)
        self.data += body
        self.data += b"\0" * (-len(self.data) % 4)

    def directory(self, name: str) -> None:
        self._entry(name, 0o040755, b"")

    def file(self, name: str, body: bytes, executable: bool = False) -> None:
        self._entry(name, 0o100755 if executable else 0o100644, body)

    def finish(self) -> bytes:
        self._entry("TRAILER!!!", 0, b"")
        return bytes(self.data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="the extracted kernel and busybox-static packages")
    parser.add_argument("--release", required=True, help="the kernel release, e.g. 6.1.0-57-amd64")
    parser.add_argument("--init", type=Path, required=True, help="the guest's /init script")
    parser.add_argument("--out", type=Path, required=True, help="where to write the gzip'd cpio archive")
    args = parser.parse_args()

    modules_dir = args.root / "lib" / "modules" / args.release
    busybox = args.root / "bin" / "busybox"
    for needed in (modules_dir, busybox, args.init):
        if not needed.exists():
            sys.exit(f"v2_guest_initramfs: {needed} does not exist")
    order = load_order(modules_dir, WANTED_MODULES)

    archive = Cpio()
    for directory in ("bin", "dev", "proc", "sys", "lower", "rw", "newroot", "modules"):
        archive.directory(directory)
    archive.file("bin/busybox", busybox.read_bytes(), executable=True)
    archive.file("init", args.init.read_bytes(), executable=True)
    names = []
    for index, module in enumerate(order):
        # A numeric prefix keeps the load order in the file names themselves.
        name = f"modules/{index:02d}-{module.name}"
        archive.file(name, module.read_bytes())
        names.append(name)
    archive.file("modules/order", ("\n".join(names) + "\n").encode())
    args.out.write_bytes(gzip.compress(archive.finish(), mtime=0))


if __name__ == "__main__":
    main()
