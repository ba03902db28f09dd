#!/bin/bash
# Builds, or reuses, a chroot holding a Slurm release built from SchedMD's
# source, for the releases Debian does not ship (23.02, 23.11, 24.05, 25.05,
# 25.11), as the test bed runs them (crates/test-harness/src/chroot.rs):
#
#   tests/testbed/slurm-source.sh 23.11        # the 23.11 tarball of
#                                              # ../shared/slurm-src
#   tests/testbed/slurm-source.sh /path/slurm-23-11-11-1.tar.xz
#   tests/testbed/slurm-source.sh all          # the five series, in turn
#
# The tarballs are looked up in $GRES_RS_SLURM_SRC (default: the
# repository's ../shared/slurm-src).  The chroot is a copy of the build base
# (tests/testbed/debian-chroot.sh build: Debian 12 with gcc and Slurm's build
# dependencies) with the release configured like Debian's package
# (--prefix=/usr --sysconfdir=/etc/slurm, libraries and plugins under
# /usr/lib/<multiarch>) and only what the test bed runs built and installed:
# libslurm/libslurmfull, slurmctld, slurmd, slurmstepd and slurmdbd (the
# GPU accounting test's, with accounting_storage/mysql: the build base has
# MariaDB's client library), the clients the harness and the jobs call
# (sstat, sacct, sacctmgr for the accounting test), the headers, and the
# plugin types the test clusters load.
#
# It lives in ${GRES_RS_CHROOT_DIR:-/var/cache/slurm-gpu-gres/chroot}/
# source-<version>-<first 12 hex of the tarball's sha256>, so a new tarball
# is a new build and the same tarball on the same machine is reused; the
# link source-<series> names the current one (what the harness opens).  As
# with debian-chroot.sh, the build runs in a temporary directory and a
# private mount namespace, and is renamed into place with its stamp only
# once complete.  Idempotent; needs root.  Prints, as its last line,
# `source-<series> <chroot dir> <Slurm version>`.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC_DIR="${GRES_RS_SLURM_SRC:-$HERE/../../../shared/slurm-src}"
BASE="${GRES_RS_CHROOT_DIR:-/var/cache/slurm-gpu-gres/chroot}"
STAMP_NAME=.gres-rs-chroot-stamp
# The series the test bed builds from source (Debian ships the others).
SERIES_ALL=(23.02 23.11 24.05 25.05 25.11)
export LC_ALL=C

log() { echo "slurm-source[${WHAT:-}]: $*" >&2; }
# shellcheck source=tests/testbed/chroot-lib.sh
. "$HERE/chroot-lib.sh"

if [ "${1:-}" = all ]; then
    for s in "${SERIES_ALL[@]}"; do
        bash "${BASH_SOURCE[0]}" "$s"
    done
    exit 0
fi

WHAT="${1:-}"
case "$WHAT" in
    [0-9][0-9].[0-9][0-9])
        shopt -s nullglob
        found=("$SRC_DIR"/slurm-"${WHAT%%.*}"-"${WHAT#*.}"-*-1.tar.xz)
        shopt -u nullglob
        if [ "${#found[@]}" -ne 1 ]; then
            log "expected one slurm-${WHAT%%.*}-${WHAT#*.}-*-1.tar.xz in $SRC_DIR, found ${#found[@]} (set GRES_RS_SLURM_SRC)"
            exit 1
        fi
        TARBALL="${found[0]}"
        ;;
    *.tar.xz | *.tar.bz2 | *.tar.gz) TARBALL="$WHAT" ;;
    *)
        echo "usage: $0 <series: ${SERIES_ALL[*]}>|<slurm tarball>|all" >&2
        exit 2
        ;;
esac
[ -f "$TARBALL" ] || {
    log "no tarball $TARBALL"
    exit 1
}
if [ "$(id -u)" -ne 0 ]; then
    log "must run as root"
    exit 1
fi

# slurm-23-11-11-1.tar.xz (SchedMD's tag) -> 23.11.11.
VERSION="$(basename "$TARBALL" | sed -nE 's/^slurm-([0-9]+)-([0-9]+)-([0-9]+)-[0-9]+\.tar\..*/\1.\2.\3/p')"
[ -n "$VERSION" ] || {
    log "cannot read a version from $(basename "$TARBALL") (want slurm-<major>-<minor>-<micro>-<n>.tar.*)"
    exit 1
}
SERIES="${VERSION%.*}"
WHAT=$SERIES
SUM="$(sha256sum "$TARBALL" | cut -c1-64)"
NAME="source-$VERSION-${SUM:0:12}"
TARGET="$BASE/$NAME"
LINK="$BASE/source-$SERIES"

# Run inside the chroot, in /usr/src/slurm.  Only what the test bed runs:
# src/api builds the common libraries it links (libslurm, libslurmfull);
# the plugin types are those the test clusters name in slurm.conf or that
# the daemons load by default (crates/test-harness/src/cluster_files.rs prepare_in),
# each type's directory whole (its plugins needing an absent library are
# left out by configure).  Configured as Debian configures slurm-wlm
# (debian/rules: --disable-debug --enable-multiple-slurmd, with which
# cred/munge accepts the credential that every node of a test cluster,
# sharing one munged, decodes again) and installed like Debian's package:
# configuration in /etc/slurm, plugins in /usr/lib/<multiarch>/slurm.
BUILD_SCRIPT='
set -euo pipefail
cd /usr/src/slurm
triplet=$(gcc -dumpmachine)
./configure --prefix=/usr --sysconfdir=/etc/slurm --localstatedir=/var --runstatedir=/run \
    --libdir=/usr/lib/$triplet --disable-dependency-tracking --disable-static --disable-debug --enable-multiple-slurmd \
    --disable-x11 --without-pmix --without-ucx --with-nvml=/opt/nvml --without-rsmi --without-oneapi \
    >configure.log 2>&1 || { tail -n 40 configure.log; exit 1; }
dirs="src/api src/slurmctld src/slurmd src/slurmdbd src/srun src/sbatch src/salloc src/scontrol src/squeue src/scancel src/sinfo src/sstat src/sacct src/sacctmgr"
for t in accounting_storage acct_gather_energy acct_gather_profile acct_gather_interconnect acct_gather_filesystem \
         auth cred gpu gres hash jobacct_gather jobcomp mcs mpi preempt prep priority proctrack sched select \
         switch task topology tls certmgr namespace job_container site_factor ext_sensors node_features power \
         cgroup route core_spec certgen; do
    [ -f "src/plugins/$t/Makefile" ] && dirs="$dirs src/plugins/$t"
done
# src/api first (the rest link it).
for d in $dirs; do
    make -j"$1" -C "$d" >>make.log 2>&1 || { tail -n 40 make.log; echo "make in $d failed"; exit 1; }
done
for d in $dirs; do
    make -C "$d" install >>install.log 2>&1 || { tail -n 40 install.log; echo "make install in $d failed"; exit 1; }
done
# The headers (slurm/slurm.h, slurm_version.h, ...: the top directory installs them).
make install-pkgincludeHEADERS >>install.log 2>&1 || { tail -n 40 install.log; echo "installing the headers failed"; exit 1; }
grep -q "^#define HAVE_NVML 1" config.h || { echo "configure did not find NVML (/opt/nvml of the build base)"; exit 1; }
[ -f /usr/lib/$triplet/slurm/accounting_storage_mysql.so ] || { echo "accounting_storage/mysql was not built (MariaDB client library of the build base)"; exit 1; }
# As in the Debian packages: slurmd built with NVML, no stock gpu_nvml.so in
# the plugin dir (Debian ships none), and no NVML library on the node (the
# tests bring their stand-in).  The stock plugin is kept aside.
mkdir -p /usr/lib/$triplet/slurm-stock-gpu-nvml
mv /usr/lib/$triplet/slurm/gpu_nvml.* /usr/lib/$triplet/slurm-stock-gpu-nvml/
rm -rf /opt/nvml
mkdir -p /etc/slurm /var/spool/slurmd /var/lib/slurm /var/log/slurm
ldconfig
'
# The recipe's checksum is part of the cache key (with the tarball's).
RECIPE="$(printf '%s' "$BUILD_SCRIPT" | sha256sum | cut -c1-64)"

# "23.11.11" from the installed slurm_version.h.
slurm_version() {
    local n
    n="$(sed -nE 's/^#define SLURM_VERSION_NUMBER[[:space:]]+(0x[0-9a-fA-F]+).*/\1/p' "$1/usr/include/slurm/slurm_version.h" 2>/dev/null)"
    [ -n "$n" ] && printf '%d.%02d.%d\n' $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255))
}

ready() {
    [ -f "$TARGET/$STAMP_NAME" ] && grep -qx "tarball_sha256 $SUM" "$TARGET/$STAMP_NAME" &&
        grep -qx "recipe_sha256 $RECIPE" "$TARGET/$STAMP_NAME" && [ -x "$TARGET/usr/sbin/slurmd" ] &&
        [ "$(slurm_version "$TARGET")" = "$VERSION" ]
}

# Built from this tarball by another recipe (an older BUILD_SCRIPT).
stale() {
    [ -f "$TARGET/$STAMP_NAME" ] && ! grep -qx "recipe_sha256 $RECIPE" "$TARGET/$STAMP_NAME"
}

point_link() {
    if [ "$(readlink "$LINK" 2>/dev/null)" != "$NAME" ]; then
        ln -sfn "$NAME" "$LINK.tmp.$$"
        mv -T "$LINK.tmp.$$" "$LINK"
    fi
}

report() {
    point_link
    log "reusing $TARGET ($(grep -E '^(built|build_seconds) ' "$TARGET/$STAMP_NAME" | tr '\n' ' '))"
    echo "source-$SERIES $TARGET $VERSION"
}

if ready; then
    report
    exit 0
fi

bash "$HERE/debian-chroot.sh" build >/dev/null
BUILD_BASE="$BASE/build"

mkdir -p "$BASE"
exec 9>"$BASE/.source-$SERIES.lock"
flock 9
if ready; then
    report
    exit 0
fi
remove_unfinished "$BASE/.source-$SERIES"
if stale; then
    log "$TARGET was built by another recipe; building it again"
    remove_stale "$TARGET" "$BASE/.source-$SERIES"
fi
if [ -e "$TARGET" ]; then
    log "$TARGET exists but is not a finished build of $TARBALL; remove it first"
    exit 1
fi

TMP="$BASE/.source-$SERIES.tmp.$$"
BUILDER=
trap cleanup_build EXIT
trap 'exit 130' INT TERM HUP
start=$(date +%s)
log "building $VERSION from $TARBALL into $TMP"
cp -a "$BUILD_BASE" "$TMP"
rm -f "$TMP/$STAMP_NAME"
mkdir -p "$TMP/usr/src/slurm"
tar -xf "$TARBALL" -C "$TMP/usr/src/slurm" --strip-components=1
JOBS="${GRES_RS_SLURM_BUILD_JOBS:-$(nproc)}"

setsid unshare --mount --propagation private -- /bin/bash -euo pipefail -c '
    dir=$1 script=$2 jobs=$3
    mount -t proc proc "$dir/proc"
    chroot "$dir" /bin/bash -c "$script" slurm-build "$jobs"
' slurm-source "$TMP" "$BUILD_SCRIPT" "$JOBS" &
BUILDER=$!
wait "$BUILDER"
BUILDER=

GOT="$(slurm_version "$TMP")"
if [ "$GOT" != "$VERSION" ] || [ ! -x "$TMP/usr/sbin/slurmd" ]; then
    log "the build has no slurmd or its slurm_version.h says ${GOT:-nothing}, not $VERSION"
    exit 1
fi
rm -rf "$TMP/usr/src/slurm"
took=$(($(date +%s) - start))
{
    echo "source $(basename "$TARBALL")"
    echo "tarball_sha256 $SUM"
    echo "recipe_sha256 $RECIPE"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "build_seconds $took"
    echo "build_jobs $JOBS"
    echo "slurm_version $VERSION"
    grep -vE '^(suite|built|slurm_version) ' "$BUILD_BASE/$STAMP_NAME" | sed 's/^/base /'
} >"$TMP/$STAMP_NAME.tmp"
mv "$TMP/$STAMP_NAME.tmp" "$TMP/$STAMP_NAME"
mv -T "$TMP" "$TARGET"
TMP=
point_link
log "built $TARGET in $took s"
echo "source-$SERIES $TARGET $VERSION"
