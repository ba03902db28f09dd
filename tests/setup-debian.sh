#!/bin/bash
# Prepares a Debian 12 machine for building and testing slurm-gpu-gres.
#
# Idempotent. Installs (only what is missing) the Slurm 22.05 daemons and
# clients, munge, the headers/tools the build needs, makes sure a deb-src
# entry exists and fetches Slurm's Debian source (for the layout test) into
# ${GRES_RS_SLURM_SRC:-/var/cache/slurm-gpu-gres/src}. Starts no daemon
# (package installs run under a policy-rc.d that forbids service starts).
#
# Then builds (or reuses) the test bed's chroots of the other Debian Slurm
# releases, trixie (24.11) and sid (26.05), with tests/testbed/debian-chroot.sh
# under /var/cache/slurm-gpu-gres/chroot (about a minute each the first
# time, nothing when present; GRES_RS_NO_CHROOTS=1 skips them) with their
# stock gpu_nvml.so and the host's (tests/testbed/stock-gpu-nvml.sh), and the
# chroots of the releases built from source that GRES_RS_SLURM names, with
# tests/testbed/slurm-source.sh.
#
# Prints, as its last line, `GRES_RS_SLURM_SRC=<dir of the unpacked source>`.
set -euo pipefail

# slurmdbd, mariadb-server: the accounting tests' slurmdbd and its database (each
# test starts its own server in a temporary directory; the package's own
# service is never started).
PKGS=(slurmd slurmctld slurmdbd slurm-client munge iproute2 strace libslurm-dev libclang-dev clang pkg-config valgrind build-essential dpkg-dev time fakeroot man-db rpm rpmlint mariadb-server)
SRC_CACHE="${GRES_RS_SLURM_SRC:-/var/cache/slurm-gpu-gres/src}"
export DEBIAN_FRONTEND=noninteractive

log() { echo "setup-debian: $*" >&2; }

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo -E)
    else
        log "must run as root (or with sudo available)"
        exit 1
    fi
fi

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

APT_UPDATED=0
apt_update_once() {
    if [ "$APT_UPDATED" -eq 0 ]; then
        log "apt-get update"
        "${SUDO[@]}" apt-get update -qq
        APT_UPDATED=1
    fi
}

# --- 1. deb-src entry (needed by `apt-get source`) ---------------------------
have_deb_src() {
    grep -rqsE '^[[:space:]]*Types:.*deb-src' /etc/apt/sources.list.d/ 2>/dev/null && return 0
    grep -qsE '^[[:space:]]*deb-src[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null && return 0
    return 1
}
if ! have_deb_src; then
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        log "adding /etc/apt/sources.list.d/debian-src.sources (deb-src copy of debian.sources)"
        sed -E 's/^([[:space:]]*Types:).*/\1 deb-src/' /etc/apt/sources.list.d/debian.sources |
            "${SUDO[@]}" tee /etc/apt/sources.list.d/debian-src.sources >/dev/null
    elif [ -f /etc/apt/sources.list ]; then
        log "adding /etc/apt/sources.list.d/debian-src.list (deb-src copy of sources.list)"
        sed -nE 's/^[[:space:]]*deb[[:space:]]+/deb-src /p' /etc/apt/sources.list |
            "${SUDO[@]}" tee /etc/apt/sources.list.d/debian-src.list >/dev/null
    else
        log "no apt sources found to derive a deb-src entry from"
        exit 1
    fi
    APT_UPDATED=0 # the new index must be fetched
    apt_update_once
fi
# Source indexes present? (a deb-src entry whose index was never fetched)
if ! ls /var/lib/apt/lists/ 2>/dev/null | grep -q '_Sources'; then
    apt_update_once
fi

# --- 2. packages ---------------------------------------------------------------
MISSING=()
for p in "${PKGS[@]}"; do
    installed "$p" || MISSING+=("$p")
done
if [ "${#MISSING[@]}" -gt 0 ]; then
    log "installing: ${MISSING[*]}"
    apt_update_once
    # Forbid service starts during the install (Debian's policy-rc.d
    # protocol, honoured by invoke-rc.d and deb-systemd-invoke).
    CREATED_POLICY=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\n# temporary, from slurm-gpu-gres tests/setup-debian.sh\nexit 101\n' |
            "${SUDO[@]}" tee /usr/sbin/policy-rc.d >/dev/null
        "${SUDO[@]}" chmod 755 /usr/sbin/policy-rc.d
        CREATED_POLICY=1
    fi
    set +e
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${MISSING[@]}"
    rc=$?
    set -e
    if [ "$CREATED_POLICY" -eq 1 ]; then
        "${SUDO[@]}" rm -f /usr/sbin/policy-rc.d
    fi
    if [ "$rc" -ne 0 ]; then
        log "apt-get install failed ($rc)"
        exit "$rc"
    fi
else
    log "all packages present"
fi

# --- 3. Slurm source (for the layout test) -----------------------------------
# Upstream version of the installed slurmd, e.g. 22.05.8 (from 22.05.8-4+deb12u3).
UPSTREAM="$(dpkg-query -W -f='${Version}' slurmd 2>/dev/null | sed -E 's/^[0-9]+://; s/-[^-]*$//' || true)"
find_src() {
    find "$SRC_CACHE" -mindepth 1 -maxdepth 1 -type d -name "slurm-wlm-${UPSTREAM:-*}" 2>/dev/null | sort | tail -n1 || true
}
SRC_DIR="$(find_src)"
if [ -z "$SRC_DIR" ] || [ ! -f "$SRC_DIR/src/common/gres.h" ]; then
    "${SUDO[@]}" mkdir -p "$SRC_CACHE"
    VER="$(dpkg-query -W -f='${Version}' slurmd 2>/dev/null || true)"
    log "fetching Slurm source (slurm-wlm${VER:+=$VER}) into $SRC_CACHE"
    (
        cd "$SRC_CACHE"
        if [ -n "$VER" ] && "${SUDO[@]}" apt-get source -qq "slurm-wlm=$VER"; then
            :
        else
            apt_update_once
            "${SUDO[@]}" apt-get source -qq slurm-wlm
        fi
    )
    SRC_DIR="$(find_src)"
    if [ -z "$SRC_DIR" ]; then
        log "apt-get source slurm-wlm produced no slurm-wlm-* dir in $SRC_CACHE"
        exit 1
    fi
else
    log "Slurm source present: $SRC_DIR"
fi

# --- 4. cargo ------------------------------------------------------------------
if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        log "cargo is in $HOME/.cargo/bin (not on PATH; callers add it)"
    else
        log "cargo not found (need a Rust toolchain >= 1.80, e.g. via rustup, in \$HOME/.cargo/bin)"
        exit 1
    fi
fi

# --- 5. test-bed chroots (Slurm 24.11 in trixie, 26.05 in sid) ---------------
if [ "${GRES_RS_NO_CHROOTS:-0}" = 1 ]; then
    log "GRES_RS_NO_CHROOTS=1: no test-bed chroots"
else
    for suite in trixie sid; do
        "${SUDO[@]}" bash "$(dirname "$0")/testbed/debian-chroot.sh" "$suite" >&2
    done
    # Their stock gpu_nvml.so and the host's, which Debian does not ship
    # (the NVML tests' stock side; the host's from the Debian source
    # fetched above; a few seconds each the first time, nothing when
    # present).
    for suite in bookworm trixie sid; do
        "${SUDO[@]}" env GRES_RS_DEBIAN_SRC="$(dirname "$SRC_DIR")" bash "$(dirname "$0")/testbed/stock-gpu-nvml.sh" "$suite" >&2
    done
fi

# --- 6. releases built from source (23.02, 23.11, 24.05, 25.05, 25.11) -------
# Those GRES_RS_SLURM names (all, source, or a series such as source:23.11),
# each a chroot of tests/testbed/slurm-source.sh (a few minutes each the
# first time on 2 cores, nothing when present).
SOURCE_SERIES=(23.02 23.11 24.05 25.05 25.11)
want_source=()
IFS=, read -ra sel <<<"${GRES_RS_SLURM:-}"
for item in "${sel[@]}"; do
    item="${item// /}"
    case "$item" in
        all | source) want_source=("${SOURCE_SERIES[@]}") ;;
        *)
            s="${item#source:}"
            s="$(echo "$s" | cut -d. -f1,2)"
            for k in "${SOURCE_SERIES[@]}"; do
                if [ "$k" = "$s" ] && [[ " ${want_source[*]} " != *" $k "* ]]; then
                    want_source+=("$k")
                fi
            done
            ;;
    esac
done
if [ "${GRES_RS_NO_CHROOTS:-0}" != 1 ]; then
    for s in "${want_source[@]}"; do
        "${SUDO[@]}" bash "$(dirname "$0")/testbed/slurm-source.sh" "$s" >&2
    done
fi

echo "GRES_RS_SLURM_SRC=$SRC_DIR"
