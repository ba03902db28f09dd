#!/bin/bash
# Builds, or reuses, a Debian chroot holding another Slurm release for the
# test bed (crates/test-harness/src/chroot.rs):
#
#   tests/testbed/debian-chroot.sh trixie   # Debian 13, Slurm 24.11
#   tests/testbed/debian-chroot.sh sid      # Debian unstable, Slurm 26.05
#   tests/testbed/debian-chroot.sh build    # Debian 12 with Slurm's build
#                                           # dependencies and no Slurm: the
#                                           # base of tests/testbed/slurm-source.sh
#
# The chroot is ${GRES_RS_CHROOT_DIR:-/var/cache/slurm-gpu-gres/chroot}/<name>.
# It is built in a temporary directory next to it and renamed into place only
# once complete, with a stamp file (.gres-rs-chroot-stamp) recording the
# package versions: a directory without the stamp is never used, and an
# interrupted run leaves only a temporary directory that the next run removes.
# The whole build (debootstrap, apt-get) runs in a private mount namespace,
# so the /proc and /sys that debootstrap mounts inside the target vanish with
# it, even when the build is killed.  Package scripts start no daemon (a
# policy-rc.d inside the chroot forbids it).
#
# Idempotent; needs root.  Installs debootstrap on the host when missing.
# Prints, as its last line, `<suite> <chroot dir> <Slurm version>`.
set -euo pipefail

SUITE="${1:-}"
# The tools the harness and the jobs call (setpriv, mount from util-linux;
# kill, ps), in every chroot.
TOOLS=(coreutils procps util-linux mount bash)
case "$SUITE" in
    trixie | sid)
        DIST=$SUITE
        COMPONENTS=main
        NVML_STUB=0
        # What the test bed needs inside: the Slurm daemons and clients,
        # munge, the headers (slurm_version.h, the version the harness
        # reads), slurmdbd (the accounting tests; its database server runs
        # on the host).  valgrind: the benchmark counts slurmd's
        # instructions inside the chroot.
        PKGS=(slurmd slurmctld slurm-client slurmdbd munge libslurm-dev "${TOOLS[@]}" valgrind)
        WITH_SLURM=1
        ;;
    build)
        # Debian 12's compiler (gcc 12 builds every series from 23.02 on)
        # and the libraries Debian builds its slurm-wlm with that the test
        # bed's plugins use (munge; hwloc for slurmd's CPU layout, as in
        # Debian's build; MariaDB's client library for slurmdbd's
        # accounting_storage/mysql), munged itself, and xz for the tarballs.
        # And, so that configure finds NVML as in Debian's build of
        # slurm-wlm (HAVE_NVML: slurmd selects gpu/nvml for
        # AutoDetect=nvml), a CUDA-like /opt/nvml: include/nvml.h from
        # libnvidia-ml-dev (non-free; only downloaded, its driver library
        # does not install here) and lib/stubs/libnvidia-ml.so, a stub with
        # the one symbol configure links against (slurmd dlopens the real
        # library at run time).  valgrind: tests/gpu_leaks.rs runs slurmd
        # under it.
        DIST=bookworm
        COMPONENTS=main,non-free
        PKGS=(build-essential pkg-config libmunge-dev munge libhwloc-dev libmariadb-dev xz-utils "${TOOLS[@]}" valgrind)
        WITH_SLURM=0
        NVML_STUB=1
        ;;
    *)
        echo "usage: $0 trixie|sid|build" >&2
        exit 2
        ;;
esac
BASE="${GRES_RS_CHROOT_DIR:-/var/cache/slurm-gpu-gres/chroot}"
TARGET="$BASE/$SUITE"
STAMP_NAME=.gres-rs-chroot-stamp
export DEBIAN_FRONTEND=noninteractive LC_ALL=C

log() { echo "debian-chroot[$SUITE]: $*" >&2; }
# shellcheck source=tests/testbed/chroot-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/chroot-lib.sh"

if [ "$(id -u)" -ne 0 ]; then
    log "must run as root"
    exit 1
fi

# "24.11.5" from SLURM_VERSION_NUMBER (0x180b05) of the chroot's libslurm-dev.
slurm_version() {
    local n
    n="$(sed -nE 's/^#define SLURM_VERSION_NUMBER[[:space:]]+(0x[0-9a-fA-F]+).*/\1/p' "$1/usr/include/slurm/slurm_version.h" 2>/dev/null)"
    [ -n "$n" ] && printf '%d.%02d.%d\n' $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255))
}

# slurmd is an alternatives symlink with an absolute target: look inside.
has_slurmd() {
    chroot "$1" test -x /usr/sbin/slurmd 2>/dev/null
}

# Every package of PKGS is in the stamp: a chroot of an older PKGS is
# built again (moved aside first, so the new one never mixes with it).
has_all_packages() {
    local p
    for p in "${PKGS[@]}"; do
        grep -q "^$p " "$TARGET/$STAMP_NAME" || return 1
    done
}

ready() {
    [ -f "$TARGET/$STAMP_NAME" ] && has_all_packages || return 1
    [ "$NVML_STUB" = 0 ] || [ -f "$TARGET/opt/nvml/include/nvml.h" ] || return 1
    [ "$WITH_SLURM" = 0 ] || { has_slurmd "$TARGET" && [ -n "$(slurm_version "$TARGET")" ]; }
}

stale() {
    [ -f "$TARGET/$STAMP_NAME" ] && ! has_all_packages
}

report() {
    log "reusing $TARGET ($(grep -E '^(built|slurmd) ' "$TARGET/$STAMP_NAME" | tr '\n' ' '))"
    echo "$SUITE $TARGET $(slurm_version "$TARGET" || echo none)"
}

if ready; then
    report
    exit 0
fi

mkdir -p "$BASE"
# One builder per suite at a time.
exec 9>"$BASE/.$SUITE.lock"
flock 9
if ready; then
    report
    exit 0
fi

# Leftovers of interrupted builds.
remove_unfinished "$BASE/.$SUITE"
# One of an older package list: set aside and removed, then built anew.
if stale; then
    log "$TARGET lacks packages of the current list; building it again"
    remove_stale "$TARGET" "$BASE/.$SUITE"
fi
# A target without a stamp was not made by this script: refuse to guess.
if [ -e "$TARGET" ]; then
    log "$TARGET exists but has no $STAMP_NAME (not a finished build of this script); remove it first"
    exit 1
fi

if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap on the host"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends debootstrap
fi

# The Debian mirror this machine uses (deb822 or one-line sources).
MIRROR="${GRES_RS_DEBIAN_MIRROR:-}"
if [ -z "$MIRROR" ]; then
    MIRROR="$(sed -nE 's|^URIs:[[:space:]]*(\S+/debian)/?$|\1|p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 || true)"
fi
if [ -z "$MIRROR" ]; then
    MIRROR="$(sed -nE 's|^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?(\S+/debian)/?[[:space:]].*|\2|p' /etc/apt/sources.list 2>/dev/null | head -n1 || true)"
fi
MIRROR="${MIRROR:-http://deb.debian.org/debian}"

TMP="$BASE/.$SUITE.tmp.$$"
BUILDER=
trap 'cleanup_build "$TMP.debootstrap.log"' EXIT
trap 'exit 130' INT TERM HUP
mkdir "$TMP"
log "building from $MIRROR into $TMP"
start=$(date +%s)

# Everything below runs in a private mount namespace, in a process group
# of its own (setsid execs: $BUILDER is its leader).
setsid unshare --mount --propagation private -- /bin/bash -euo pipefail -c '
    suite=$1 dir=$2 mirror=$3 components=$4 nvml_stub=$5; shift 5
    debootstrap --variant=minbase --components="$components" "$suite" "$dir" "$mirror" >"$dir.debootstrap.log" 2>&1 || {
        tail -n 30 "$dir.debootstrap.log" >&2
        exit 1
    }
    rm -f "$dir.debootstrap.log"
    # The snapshot of sid reachable here has an expired Release file.
    printf "Acquire::Check-Valid-Until \"false\";\nAPT::Install-Recommends \"false\";\n" >"$dir/etc/apt/apt.conf.d/90gres-rs-testbed"
    printf "#!/bin/sh\n# slurm-gpu-gres test bed: no service starts in this chroot\nexit 101\n" >"$dir/usr/sbin/policy-rc.d"
    chmod 755 "$dir/usr/sbin/policy-rc.d"
    # Mount points for the host files the harness binds (chroot.rs).
    [ -e "$dir/etc/hosts" ] || printf "127.0.0.1\tlocalhost\n::1\tlocalhost\n" >"$dir/etc/hosts"
    [ -e "$dir/etc/resolv.conf" ] || : >"$dir/etc/resolv.conf"
    mountpoint -q "$dir/proc" || mount -t proc proc "$dir/proc"
    chroot "$dir" apt-get update -qq
    chroot "$dir" apt-get install -y -qq "$@" >/dev/null
    if [ "$nvml_stub" = 1 ]; then
        chroot "$dir" /bin/sh -euc "
            cd /var/cache/apt/archives
            apt-get -o APT::Sandbox::User=root download -qq libnvidia-ml-dev
            mkdir -p /opt/nvml/include /opt/nvml/lib/stubs
            dpkg-deb --fsys-tarfile libnvidia-ml-dev_*.deb | tar -xO ./usr/include/nvml.h >/opt/nvml/include/nvml.h
            rm -f libnvidia-ml-dev_*.deb
            printf \"int nvmlInit(void) { return 0; }\\n\" | gcc -shared -fPIC -x c -o /opt/nvml/lib/stubs/libnvidia-ml.so -
            grep -q nvmlDeviceGetHandleByIndex /opt/nvml/include/nvml.h
        "
    fi
    chroot "$dir" apt-get clean
    rm -rf "$dir"/var/lib/apt/lists/*_Packages "$dir"/var/lib/apt/lists/*_InRelease "$dir"/var/lib/apt/lists/*_Release
' debian-chroot "$DIST" "$TMP" "$MIRROR" "$COMPONENTS" "$NVML_STUB" "${PKGS[@]}" &
BUILDER=$!
wait "$BUILDER"
BUILDER=

VERSION=none
if [ "$WITH_SLURM" = 1 ]; then
    VERSION="$(slurm_version "$TMP")"
    if [ -z "$VERSION" ] || ! has_slurmd "$TMP"; then
        log "the build has no slurm_version.h or slurmd"
        exit 1
    fi
fi
{
    echo "suite $DIST"
    echo "mirror $MIRROR"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "slurm_version $VERSION"
    chroot "$TMP" dpkg-query -W -f='${Package} ${Version}\n' "${PKGS[@]}"
} >"$TMP/$STAMP_NAME.tmp"
mv "$TMP/$STAMP_NAME.tmp" "$TMP/$STAMP_NAME"
mv -T "$TMP" "$TARGET"
TMP=
log "built $TARGET in $(($(date +%s) - start)) s"
echo "$SUITE $TARGET $VERSION"
