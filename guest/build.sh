#!/usr/bin/env bash
# Builds the Cellbed guest (DESIGN.md section 5) from Debian packages only:
#   OUTDIR/vmlinuz     kernel of the versioned package that
#                      linux-image-cloud-amd64 depends on
#   OUTDIR/initrd.img  gzip'd newc cpio: busybox-static, virtio + pvpanic
#                      modules, /init and the static workload program cbload
#   OUTDIR/guest.json  kernel version, sha256 of each artefact and of the
#                      sources, tool versions
#
# Usage: guest/build.sh OUTDIR
#
# Idempotent: if the outputs exist and their hashes, the source hash, the
# kernel package and the tool versions all match guest.json, it prints
# "guest up to date" and exits without touching the network.
set -euo pipefail

die() { echo "guest/build.sh: error: $*" >&2; exit 1; }
log() { echo "guest/build.sh: $*" >&2; }

[ $# -eq 1 ] || die "usage: $0 OUTDIR"
OUTDIR=$1
SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

KERNEL_META=linux-image-cloud-amd64
# Load order matters (dependencies first).
MODULES=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
         virtio_console pvpanic pvpanic-mmio)
SOURCES=(cbload.c init build.sh)
# Fixed mtime for everything in the initramfs, so the same inputs give a
# byte-identical initrd.img.
EPOCH=1700000000

# --- prerequisites ---------------------------------------------------------

pkg_version() {  # prints the installed version of a Debian package, or nothing
    dpkg-query -W -f='${db:Status-Status} ${Version}\n' "$1" 2>/dev/null \
        | awk '$1 == "installed" { print $2 }'
}
need_pkg() {
    [ -n "$(pkg_version "$1")" ] \
        || die "Debian package '$1' is not installed (needed for $2); install it with: apt-get install $1"
}
need_pkg busybox-static "the initramfs userland (/bin/busybox) and 'busybox cpio'"
need_pkg gcc "compiling cbload"
need_pkg libc6-dev "static linking of cbload (libc.a, libpthread)"
need_pkg gzip "compressing the initramfs"
need_pkg apt "downloading the kernel package"
need_pkg dpkg "extracting the kernel package (dpkg-deb)"

BUSYBOX=/bin/busybox
# Captured first: with pipefail, `busybox ... | grep -q` fails at random when
# grep exits early and busybox gets SIGPIPE.
CPIO_HELP=$("$BUSYBOX" cpio --help 2>&1 || true)
case "$CPIO_HELP" in
    *"-o"*) ;;
    *) die "$BUSYBOX has no 'cpio -o'; reinstall busybox-static" ;;
esac

# --- inputs and their fingerprint ------------------------------------------

# The versioned kernel package the meta package depends on (what
# `apt-cache depends linux-image-cloud-amd64` names), e.g.
# linux-image-6.1.0-56-cloud-amd64, and its exact version. One apt-cache call
# (about 1 s without a pkgcache.bin); it reads only the local package lists.
META_DEPENDS=$(apt-cache show --no-all-versions "$KERNEL_META" 2>/dev/null \
               | sed -n 's/^Depends: //p' | awk 'NR == 1') || true
KPKG=$(echo "$META_DEPENDS" | tr ',' '\n' \
       | sed -n 's/^ *\(linux-image-[0-9][^ ]*\).*/\1/p' | awk 'NR == 1')
[ -n "$KPKG" ] \
    || die "apt-cache cannot resolve $KERNEL_META to a versioned linux-image package; run apt-get update (is Debian's main archive in the apt sources?)"
KREL=${KPKG#linux-image-}
KVER=$(echo "$META_DEPENDS" | tr ',' '\n' \
       | sed -n "s/^ *$KPKG (= \([^)]*\)).*/\1/p" | awk 'NR == 1')
if [ -z "$KVER" ]; then   # no exact pin in the meta package: use the candidate
    KVER=$(apt-cache show --no-all-versions "$KPKG" 2>/dev/null \
           | awk '/^Version:/ { print $2; exit }') || true
fi
[ -n "$KVER" ] || die "apt-cache has no version for $KPKG; run apt-get update"

sha256() { sha256sum "$1" | awk '{ print $1 }'; }

# One hash over the sources' names and contents.
SRC_SHA=$(cd "$SRCDIR" && for f in "${SOURCES[@]}"; do
              printf '%s %s\n' "$f" "$(sha256 "$f")"; done | sha256sum | awk '{ print $1 }')
TOOLS="busybox-static=$(pkg_version busybox-static) gcc=$(pkg_version gcc) libc6-dev=$(pkg_version libc6-dev)"

# Reads a string field from guest.json (written by this script, one key per line).
json_field() {
    sed -n "s/^  \"$2\": \"\(.*\)\",\{0,1\}$/\1/p" "$1" | awk 'NR == 1'
}

up_to_date() {
    local meta=$OUTDIR/guest.json
    [ -f "$meta" ] && [ -f "$OUTDIR/vmlinuz" ] && [ -f "$OUTDIR/initrd.img" ] || return 1
    [ "$(json_field "$meta" source_sha256)" = "$SRC_SHA" ] || return 1
    [ "$(json_field "$meta" kernel_package)" = "$KPKG" ] || return 1
    [ "$(json_field "$meta" kernel_package_version)" = "$KVER" ] || return 1
    [ "$(json_field "$meta" tools)" = "$TOOLS" ] || return 1
    [ "$(json_field "$meta" vmlinuz_sha256)" = "$(sha256 "$OUTDIR/vmlinuz")" ] || return 1
    [ "$(json_field "$meta" initrd_sha256)" = "$(sha256 "$OUTDIR/initrd.img")" ] || return 1
}

mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
if up_to_date; then
    echo "guest up to date"
    exit 0
fi
log "building guest into $OUTDIR (kernel $KPKG $KVER)"

WORK=$(mktemp -d "$OUTDIR/.work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# --- kernel ----------------------------------------------------------------

CACHE=$OUTDIR/cache
mkdir -p "$CACHE"
DEB=$(ls "$CACHE/${KPKG}_${KVER//:/%3a}_"*.deb 2>/dev/null | awk 'NR == 1') || true
if [ -z "$DEB" ]; then
    log "downloading $KPKG $KVER"
    APT_OPTS=()
    # apt drops privileges to _apt for downloads, which cannot write here.
    [ "$(id -u)" -eq 0 ] && APT_OPTS=(-o APT::Sandbox::User=root)
    (cd "$CACHE" && apt-get -q "${APT_OPTS[@]}" download "$KPKG=$KVER") >&2 \
        || die "apt-get download $KPKG=$KVER failed (network or apt sources?)"
    DEB=$(ls "$CACHE/${KPKG}_${KVER//:/%3a}_"*.deb 2>/dev/null | awk 'NR == 1') || true
    [ -n "$DEB" ] || die "apt-get download did not produce ${KPKG}_${KVER}_*.deb in $CACHE"
    # Drop other versions of the kernel package from the cache.
    for old in "$CACHE"/linux-image-*.deb; do
        [ "$old" = "$DEB" ] || rm -f "$old"
    done
fi
dpkg-deb -x "$DEB" "$WORK/kernel"
VMLINUZ=$WORK/kernel/boot/vmlinuz-$KREL
[ -f "$VMLINUZ" ] || die "$DEB has no boot/vmlinuz-$KREL"
MODDIR=$WORK/kernel/lib/modules/$KREL
[ -d "$MODDIR" ] || die "$DEB has no lib/modules/$KREL"

# --- initramfs tree ----------------------------------------------------------

ROOT=$WORK/root
mkdir -p "$ROOT"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,etc/cellbed,lib/modules/"$KREL"}

# busybox-static plus a symlink per applet.
install -m 0755 "$BUSYBOX" "$ROOT/bin/busybox"
"$BUSYBOX" --list-full | while read -r applet; do
    [ -e "$ROOT/$applet" ] || ln -s /bin/busybox "$ROOT/$applet"
done

install -m 0755 "$SRCDIR/init" "$ROOT/init"

gcc -static -O2 -pthread -s -Wall -Wextra -o "$ROOT/bin/cbload" "$SRCDIR/cbload.c" \
    || die "compiling $SRCDIR/cbload.c failed"

# Modules: skip the ones built into this kernel, decompress .ko.xz/.ko.zst.
: > "$ROOT/etc/cellbed/modules"
for mod in "${MODULES[@]}"; do
    # modules.builtin lists paths like kernel/drivers/virtio/virtio.ko;
    # '-' and '_' are interchangeable in module names.
    pattern="/$(echo "$mod" | sed 's/[-_]/[-_]/g')\.ko$"
    if [ -f "$MODDIR/modules.builtin" ] && grep -q "$pattern" "$MODDIR/modules.builtin"; then
        log "module $mod is built into $KREL"
        continue
    fi
    src=$(find "$MODDIR/kernel" -regextype posix-extended \
              -regex ".*/$(echo "$mod" | sed 's/[-_]/[-_]/g')\.ko(\.xz|\.zst)?" | awk 'NR == 1')
    [ -n "$src" ] || die "module $mod is neither built into $KREL nor shipped in $DEB"
    dst=$ROOT/lib/modules/$KREL/$mod.ko
    case "$src" in
        *.ko)     cp "$src" "$dst" ;;
        *.ko.xz)  need_pkg xz-utils "decompressing $mod.ko.xz"; xz -dc "$src" > "$dst" ;;
        *.ko.zst) need_pkg zstd "decompressing $mod.ko.zst"; zstd -qdc "$src" > "$dst" ;;
    esac
    echo "$mod" >> "$ROOT/etc/cellbed/modules"
done

# A console node lets the kernel open the console for /init before devtmpfs
# is mounted (only possible as root; /init re-opens it anyway).
mknod -m 0600 "$ROOT/dev/console" c 5 1 2>/dev/null || true

find "$ROOT" -exec touch -h -d "@$EPOCH" {} +
(cd "$ROOT" && find . -mindepth 1 | LC_ALL=C sort \
    | "$BUSYBOX" cpio -o -H newc -R 0:0 --renumber-inodes --ignore-devno) | gzip -9 -n > "$WORK/initrd.img"

# --- outputs -----------------------------------------------------------------

cp "$VMLINUZ" "$WORK/vmlinuz"
VMLINUZ_SHA=$(sha256 "$WORK/vmlinuz")
INITRD_SHA=$(sha256 "$WORK/initrd.img")
mv -f "$WORK/vmlinuz" "$OUTDIR/vmlinuz"
mv -f "$WORK/initrd.img" "$OUTDIR/initrd.img"

json_list() { local sep=""; for x in "$@"; do printf '%s"%s"' "$sep" "$x"; sep=", "; done; }
{
    printf '{\n'
    printf '  "kernel_package": "%s",\n' "$KPKG"
    printf '  "kernel_package_version": "%s",\n' "$KVER"
    printf '  "kernel_release": "%s",\n' "$KREL"
    printf '  "source_sha256": "%s",\n' "$SRC_SHA"
    printf '  "tools": "%s",\n' "$TOOLS"
    printf '  "vmlinuz_sha256": "%s",\n' "$VMLINUZ_SHA"
    printf '  "vmlinuz_bytes": %s,\n' "$(stat -c %s "$OUTDIR/vmlinuz")"
    printf '  "initrd_sha256": "%s",\n' "$INITRD_SHA"
    printf '  "initrd_bytes": %s,\n' "$(stat -c %s "$OUTDIR/initrd.img")"
    printf '  "modules": [%s],\n' "$(json_list $(cat "$ROOT/etc/cellbed/modules"))"
    printf '  "sources": {'
    sep=""
    for f in "${SOURCES[@]}"; do
        printf '%s"guest/%s": "%s"' "$sep" "$f" "$(sha256 "$SRCDIR/$f")"; sep=", "
    done
    printf '}\n}\n'
} > "$WORK/guest.json"
mv -f "$WORK/guest.json" "$OUTDIR/guest.json"

log "built $OUTDIR/vmlinuz ($KREL) and $OUTDIR/initrd.img ($(stat -c %s "$OUTDIR/initrd.img") bytes)"
