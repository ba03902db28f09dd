#!/bin/bash
# Builds, or reuses, the stock gpu/nvml plugin (gpu_nvml.so) of a Debian
# release of the test bed: Debian's slurmd picks gpu/nvml for
# AutoDetect=nvml whenever libnvidia-ml.so loads, but Debian ships no
# gpu_nvml.so (its NVML header is in non-free).  Built here, the stock side
# of the NVML tests detects, sets clocks and reads usage through NVML as
# ours does (docs/compat.md, "Stock gpu/nvml").
#
#   tests/testbed/stock-gpu-nvml.sh bookworm   # for the host's slurmd
#   tests/testbed/stock-gpu-nvml.sh trixie     # for the trixie chroot's slurmd
#   tests/testbed/stock-gpu-nvml.sh sid        # for the sid chroot's slurmd
#
# The source of bookworm's (the host's 22.05.8) is Debian's own source
# package of the installed slurmd, with Debian's patches, as
# tests/setup-debian.sh fetched and unpacked it into
# $GRES_RS_DEBIAN_SRC (default /var/cache/slurm-gpu-gres/src); it is
# copied, never built in place.  The source of trixie's and sid's is
# SchedMD's tarball of the chroot's series in $GRES_RS_SLURM_SRC (default
# ../shared/slurm-src): Debian's own source packages of trixie and sid
# cannot be fetched here.  Where the tarball is
# another point release than the chroot's slurmd (sid: 26.05.5, tarball
# 26.05.3), its META is given the chroot's version before configure, so
# that the plugin carries the version slurmd loads (slurmd refuses a
# plugin of another micro release); the code is the tarball's.  Configured
# as tests/testbed/slurm-source.sh configures a release (as Debian does,
# with nvml.h from the build base's /opt/nvml, Debian's libnvidia-ml-dev,
# and a stub library that has, besides nvmlInit, the one later call
# configure looks for, nvmlDeviceSetMemoryLockedClocks: a site builds
# against a driver that has it (465.19.01 on), and 26.05's gpu/nvml then
# sets locked clocks, HAVE_NVML_MEMORY_CLOCK), only
# src/plugins/gpu/{common,nvml} built, inside the
# build base chroot (tests/testbed/debian-chroot.sh build), whose compiler
# and glibc (Debian 12's) are the host's and every later release runs; the
# base itself is not changed (the source is bind-mounted into it).
#
# The plugin goes to
# ${GRES_RS_CHROOT_DIR:-/var/cache/slurm-gpu-gres/chroot}/stock-gpu-nvml-<suite>/<version>/gpu_nvml.so
# with a stamp of the source and of this recipe; a present one is reused.
# Idempotent; needs root.  Prints the plugin's path as its last line.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SUITE="${1:-}"
case "$SUITE" in
    bookworm | trixie | sid) ;;
    *)
        echo "usage: $0 bookworm|trixie|sid" >&2
        exit 2
        ;;
esac
BASE="${GRES_RS_CHROOT_DIR:-/var/cache/slurm-gpu-gres/chroot}"
SRC_DIR="${GRES_RS_SLURM_SRC:-$HERE/../../../shared/slurm-src}"
DEBIAN_SRC="${GRES_RS_DEBIAN_SRC:-/var/cache/slurm-gpu-gres/src}"
# bookworm is the host: its slurmd is the machine's own.
if [ "$SUITE" = bookworm ]; then ROOT=/; else ROOT="$BASE/$SUITE"; fi
BUILD_BASE="$BASE/build"
export LC_ALL=C DEBIAN_FRONTEND=noninteractive
log() { echo "stock-gpu-nvml[$SUITE]: $*" >&2; }

[ "$(id -u)" -eq 0 ] || {
    log "must run as root"
    exit 1
}
[ -x "$ROOT/usr/sbin/slurmd" ] || [ -L "$ROOT/usr/sbin/slurmd" ] || {
    log "no chroot $ROOT (tests/testbed/debian-chroot.sh $SUITE)"
    exit 1
}

# The upstream version of the chroot's slurmd, e.g. 24.11.5 (of 24.11.5-4+deb13u1).
DEB_VERSION="$(dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f='${Version}' slurmd)"
VERSION="${DEB_VERSION#*:}"
VERSION="${VERSION%-*}"
major="${VERSION%%.*}" rest="${VERSION#*.}"
minor="${rest%%.*}" micro="${rest#*.}"
if [ "$SUITE" = bookworm ]; then
    # Debian's source of this very package version, unpacked (patches
    # applied) by tests/setup-debian.sh; its .dsc names every file of it.
    SOURCE="$DEBIAN_SRC/slurm-wlm-$VERSION"
    DSC="$DEBIAN_SRC/slurm-wlm_${DEB_VERSION#*:}.dsc"
    [ -f "$SOURCE/configure" ] && [ -f "$DSC" ] || {
        log "no Debian source of slurm-wlm $VERSION in $DEBIAN_SRC (tests/setup-debian.sh fetches it; set GRES_RS_DEBIAN_SRC)"
        exit 1
    }
    SUM="$(sha256sum "$DSC" | cut -c1-16)"
    SOURCE_NAME="$(basename "$DSC")"
else
    shopt -s nullglob
    found=("$SRC_DIR"/slurm-"$major"-"$minor"-*-1.tar.xz)
    shopt -u nullglob
    [ "${#found[@]}" -eq 1 ] || {
        log "expected one slurm-$major-$minor-*-1.tar.xz in $SRC_DIR, found ${#found[@]} (set GRES_RS_SLURM_SRC)"
        exit 1
    }
    SOURCE="${found[0]}"
    SUM="$(sha256sum "$SOURCE" | cut -c1-16)"
    SOURCE_NAME="$(basename "$SOURCE")"
fi

# The recipe (this file) and the source are the cache key.
RECIPE="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"
OUT="$BASE/stock-gpu-nvml-$SUITE/$VERSION"
STAMP="$OUT/.stamp"
if [ -f "$OUT/gpu_nvml.so" ] && grep -qx "recipe $RECIPE" "$STAMP" 2>/dev/null && grep -qx "source_sha256 $SUM" "$STAMP"; then
    log "reusing $OUT/gpu_nvml.so ($(grep '^built ' "$STAMP"))"
    echo "$OUT/gpu_nvml.so"
    exit 0
fi

bash "$HERE/debian-chroot.sh" build >/dev/null
mkdir -p "$BASE"
exec 9>"$BASE/.stock-gpu-nvml-$SUITE.lock"
flock 9

WORK="$BASE/.stock-gpu-nvml-$SUITE.tmp.$$"
cleanup() { rm -rf --one-file-system "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
rm -rf --one-file-system "$BASE"/.stock-gpu-nvml-"$SUITE".tmp.*
mkdir -p "$WORK/src/slurm"
start=$(date +%s)

if [ "$SUITE" = bookworm ]; then
    cp -a "$SOURCE/." "$WORK/src/slurm/"
else
    tar -xf "$SOURCE" -C "$WORK/src/slurm" --strip-components=1
fi
from="$(sed -nE 's/^[[:space:]]*Version:[[:space:]]+([0-9.]+).*/\1/p' "$WORK/src/slurm/META")"
if [ "$from" != "$VERSION" ]; then
    log "$SOURCE_NAME is $from: building its gpu/nvml with version $VERSION (the chroot's slurmd)"
    sed -i -E "s/^([[:space:]]*Micro:[[:space:]]+).*/\1$micro/; s/^([[:space:]]*Version:[[:space:]]+).*/\1$VERSION/" "$WORK/src/slurm/META"
fi

# configure and build gpu/common and gpu/nvml in the build base, the
# source bind-mounted at /usr/src/slurm.
BUILD='
set -euo pipefail
cd /usr/src/slurm
triplet=$(gcc -dumpmachine)
nvml=/usr/src/slurm/nvml
mkdir -p $nvml/lib/stubs
ln -sfn /opt/nvml/include $nvml/include
printf "int nvmlInit(void) { return 0; }\nint nvmlDeviceSetMemoryLockedClocks(void) { return 0; }\n" |
    gcc -shared -fPIC -x c -o $nvml/lib/stubs/libnvidia-ml.so -
./configure --prefix=/usr --sysconfdir=/etc/slurm --localstatedir=/var --runstatedir=/run \
    --libdir=/usr/lib/$triplet --disable-dependency-tracking --disable-static --disable-debug --enable-multiple-slurmd \
    --disable-x11 --without-pmix --without-ucx --with-nvml=$nvml --without-rsmi --without-oneapi \
    >configure.log 2>&1 || { tail -n 40 configure.log; exit 1; }
grep -q "^#define HAVE_NVML 1" config.h || { echo "configure did not find NVML ($nvml)"; exit 1; }
{ make -j"$1" -C src/plugins/gpu/common && make -j"$1" -C src/plugins/gpu/nvml; } >make.log 2>&1 || { tail -n 40 make.log; exit 1; }
'
log "building src/plugins/gpu/nvml of $SOURCE_NAME in the build base"
setsid unshare --mount --propagation private -- /bin/bash -euo pipefail -c '
    base=$1 src=$2 script=$3 jobs=$4
    mount --bind "$src" "$base/usr/src/slurm" 2>/dev/null || { mkdir -p "$base/usr/src/slurm"; mount --bind "$src" "$base/usr/src/slurm"; }
    mount -t proc proc "$base/proc"
    chroot "$base" /bin/bash -c "$script" stock-gpu-nvml "$jobs"
' stock-gpu-nvml "$BUILD_BASE" "$WORK/src/slurm" "$BUILD" "${GRES_RS_SLURM_BUILD_JOBS:-$(nproc)}" >&2

mkdir -p "$OUT"
install -m 0644 "$WORK/src/slurm/src/plugins/gpu/nvml/.libs/gpu_nvml.so" "$OUT/.gpu_nvml.so.tmp"
# As Debian's packages are (their debug symbols go to -dbgsym packages).
strip --strip-unneeded "$OUT/.gpu_nvml.so.tmp"
mv "$OUT/.gpu_nvml.so.tmp" "$OUT/gpu_nvml.so"
{
    echo "recipe $RECIPE"
    echo "source_sha256 $SUM"
    echo "source $SOURCE_NAME ($from), version $VERSION"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(($(date +%s) - start)) s"
} >"$STAMP"
log "built $OUT/gpu_nvml.so in $(($(date +%s) - start)) s"
echo "$OUT/gpu_nvml.so"
