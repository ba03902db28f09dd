#!/bin/bash
# The real-GPU check: on a machine with an NVIDIA driver (and no Slurm),
# what `gres-rs detect` reports through ours' NVML code beside what the
# driver's own tools and sysfs say, and ours' usage path (gpu/nvml's
# usage_read, through `gres-rs detect --usage`) against a real process
# that holds GPU memory.  Prints a table; exits 1 on any mismatch, 2 when
# it cannot run.  Under a minute on one GPU.
#
#   tests/device/check.sh [DIR]
#
# DIR holds `gres-rs` and `gpu-hold` (tests/device/gpu-hold.c; built here
# with cc when DIR has none and cc exists); default target/release.
# Needs bash, coreutils, sed and the driver's nvidia-smi; reads nothing
# else of the driver than what NVML and nvidia-smi give, and changes no
# GPU setting (no clocks, no MIG mode).
#
# Compared per GPU, in NVML's index order:
#   type    Type= against nvidia-smi's name (lower case, blanks as `_`),
#   file    File= against /dev/nvidia<minor> (nvidia-smi -q -x),
#   cores   Cores= (machine CPUs, as gres-rs detect gives them outside
#           slurmd) against the PCI device's local_cpulist in sysfs,
#   links   Links= against nvidia-smi topo -m (NV<n>: n lanes, X: -1),
#   count   the whole GPUs listed;
#   mig     with MIG mode on: the MIG devices' Type= and UniqueId=
#           against nvidia-smi -L;
# for the process gpu-hold starts: gres/gpumem in MiB against
# nvidia-smi --query-compute-apps' used_memory (gres/gpuutil printed);
# and `gres-rs health` (Slurm not asked, nothing changed): no drain on a
# healthy machine, its NVML calls and time printed.
#
# For a self-test without a GPU, the environment may name other tools and
# places: GRES_RS, GPU_HOLD, NVIDIA_SMI, SYSFS (default /sys),
# GRES_RS_NVML_LIB (gres-rs --nvml-lib), MIG_MINORS (gres-rs
# --mig-minors), DEV (the device files' directory, default /dev),
# HOLD_MIB (default 1024).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${1:-$HERE/../../target/release}"
GRES_RS="${GRES_RS:-$DIR/gres-rs}"
GPU_HOLD="${GPU_HOLD:-$DIR/gpu-hold}"
NVIDIA_SMI="${NVIDIA_SMI:-nvidia-smi}"
SYSFS="${SYSFS:-/sys}"
DEV="${DEV:-/dev}"
HOLD_MIB="${HOLD_MIB:-1024}"
NVML_ARGS=()
[ -n "${GRES_RS_NVML_LIB:-}" ] && NVML_ARGS+=(--nvml-lib "$GRES_RS_NVML_LIB")
[ -n "${MIG_MINORS:-}" ] && NVML_ARGS+=(--mig-minors "$MIG_MINORS")
export LC_ALL=C

die() {
    echo "device-check: $*" >&2
    exit 2
}
# Each tool call with a time limit: a hung driver fails the check, it
# does not hang it.
smi() { timeout -k 2 30 "$NVIDIA_SMI" "$@"; }
ours() { timeout -k 2 60 "$GRES_RS" detect "${NVML_ARGS[@]}" "$@"; }

[ -x "$GRES_RS" ] || die "no gres-rs at $GRES_RS (cargo build --release; or give DIR)"
command -v "$NVIDIA_SMI" >/dev/null 2>&1 || die "no $NVIDIA_SMI: this check needs the NVIDIA driver"
if [ ! -x "$GPU_HOLD" ] && command -v cc >/dev/null 2>&1; then
    GPU_HOLD="$(mktemp -d)/gpu-hold"
    cc -O2 -o "$GPU_HOLD" "$HERE/gpu-hold.c" -ldl || die "cannot build $HERE/gpu-hold.c"
fi

fails=0
printf '%-6s %-5s %-42s %-42s %s\n' what gpu driver ours verdict
row() {
    local verdict=ok
    if [ "$3" != "$4" ]; then
        verdict=MISMATCH
        fails=$((fails + 1))
    fi
    printf '%-6s %-5s %-42s %-42s %s\n' "$1" "$2" "${3:--}" "${4:--}" "$verdict"
}

# A CPU or link list as one CPU per line, for comparing ranges.
expand() {
    local part a b
    IFS=, read -ra parts <<<"$1"
    for part in "${parts[@]}"; do
        case "$part" in
            *-*) a=${part%-*} b=${part#*-} ;;
            "") continue ;;
            *) a=$part b=$part ;;
        esac
        seq "$a" "$b"
    done
}
as_set() { expand "$1" | sort -n | tr '\n' ',' | sed 's/,$//'; }

# The Slurm series the plugins (and so detect's rules) are built for.
release="$("$GRES_RS" --version | sed -n 's/.*plugins for Slurm \([0-9]*\.[0-9]*\).*/\1/p')"
echo "device-check: $("$GRES_RS" --version)"

# --- the driver's view -------------------------------------------------------
start=$SECONDS
gpus="$(smi --query-gpu=index,name,pci.bus_id,mig.mode.current --format=csv,noheader)" || die "nvidia-smi --query-gpu failed"
mapfile -t minors < <(smi -q -x | sed -n 's:.*<minor_number>\([^<]*\)</minor_number>.*:\1:p')
# (Without the terminal escapes some drivers put around the header.)
topo="$(smi topo -m 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' || true)"
count=$(grep -c . <<<"$gpus")

# --- ours --------------------------------------------------------------------
conf="$(ours --format gres-conf)" || die "gres-rs detect failed (exit $?)"
mapfile -t lines < <(grep '^Name=gpu ' <<<"$conf")
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }

mig_any=0
i=0
while IFS=, read -r index name bus mig; do
    name="${name# }" bus="${bus# }" mig="${mig# }"
    want_type="$(tr 'A-Z ' 'a-z_' <<<"$name")"
    if [ "$mig" = Enabled ]; then
        # Its MIG devices are compared below.
        mig_any=1
        i=$((i + 1))
        continue
    fi
    line=""
    for l in "${lines[@]}"; do
        [ "$(field "$l" File)" = "/dev/nvidia${minors[$i]:-?}" ] && line=$l
    done
    row type "$index" "$want_type" "$(field "$line" Type)"
    row file "$index" "/dev/nvidia${minors[$i]:-?}" "$(field "$line" File)"
    dev="$(tr 'A-F' 'a-f' <<<"${bus#0000}")"
    cpulist="$(cat "$SYSFS/bus/pci/devices/$dev/local_cpulist" 2>/dev/null)"
    row cores "$index" "$(as_set "$cpulist")" "$(as_set "$(field "$line" Cores)")"
    # nvidia-smi topo -m: the row of GPU<index>, one column per GPU.
    want_links=""
    if [ "$count" -gt 1 ]; then
        want_links="$(awk -v g="GPU$index" -v n="$count" '$0 ~ "^" g "[ \t]" {
            s = ""
            for (c = 2; c <= n + 1; c++) {
                v = $c
                if (v == "X") v = -1; else if (v ~ /^NV[0-9]+$/) v = substr(v, 3) + 0; else v = 0
                s = s (c > 2 ? "," : "") v
            }
            print s
        }' <<<"$topo")"
    fi
    got_links="$(field "$line" Links)"
    [ "$count" -eq 1 ] && [ "$got_links" = "-1" ] && got_links=""
    row links "$index" "$want_links" "$got_links"
    i=$((i + 1))
done <<<"$gpus"
whole=$(grep -vc ',[[:space:]]*Enabled$' <<<"$gpus")
row count all "$whole" "$(printf '%s\n' "${lines[@]}" | grep -c ' File=')"
if [ "$mig_any" = 1 ]; then
    # nvidia-smi -L: "GPU 0: NVIDIA H200 (UUID: GPU-...)", then its MIG
    # devices, "  MIG 1g.18gb Device 0: (UUID: MIG-...)".
    listing="$(smi -L)"
    # A MIG device's type: its GPU's up to the first `-`, and the profile
    # (from NVML's name: 23.02 on; 22.05 computes it, compared only there).
    want="$(awk '/^GPU /{ name = $0; sub(/^GPU [0-9]+: /, "", name); sub(/ \(UUID:.*/, "", name); gsub(/ /, "_", name); name = tolower(name); sub(/-.*/, "", name) }
        /^ *MIG /{ print name "_" $2 }' <<<"$listing" | sort | tr '\n' ' ')"
    got="$(printf '%s\n' "${lines[@]}" | grep ' MultipleFiles=' | sed -n 's/.* Type=\([^ ]*\).*/\1/p' | sort | tr '\n' ' ')"
    if [ "$release" = 22.05 ]; then
        echo "mig types (22.05 computes them, not compared): driver ${want% }; ours ${got% }"
    else
        row mig all "${want% }" "${got% }"
    fi
    want="$(sed -n 's/.*(UUID: \(MIG-[^)]*\)).*/\1/p' <<<"$listing" | sort | tr '\n' ' ')"
    got="$(sed -n 's/^# UniqueId=\(MIG-.*\)/\1/p' <<<"$conf" | sort | tr '\n' ' ')"
    row uuids all "${want% }" "${got% }"
fi

# --- usage of a real process -------------------------------------------------
if [ -x "$GPU_HOLD" ]; then
    coproc HOLD { exec "$GPU_HOLD" "$HOLD_MIB"; }
    hold_pid=$HOLD_PID
    ready=""
    read -r -t 60 ready <&"${HOLD[0]}" || true
    if [ "${ready%% *}" = ready ]; then
        used=0
        while IFS=, read -r pid mib; do
            [ "${pid// /}" = "$hold_pid" ] && used=$((used + ${mib// /}))
        done < <(smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits)
        usage="$(ours --format gres-conf --usage "$hold_pid" | sed -n "s/^# usage of pid $hold_pid: //p")"
        mem="$(sed -n 's/.*gres\/gpumem=\([0-9]*\).*/\1/p' <<<"$usage")"
        util="$(sed -n 's/.*gres\/gpuutil=\([0-9]*\).*/\1/p' <<<"$usage")"
        row gpumem 0 "$used MiB" "$((${mem:-0} / 1048576)) MiB"
        echo "gpuutil of the idle holder: ${util:-?}% (not compared)"
    else
        row gpumem 0 "gpu-hold ready" "gpu-hold: ${ready:-no answer}"
    fi
    # Ours, stopped by its PID.
    kill "$hold_pid" 2>/dev/null
    wait "$hold_pid" 2>/dev/null
else
    echo "device-check: no gpu-hold and no cc: the usage path is not checked" >&2
    fails=$((fails + 1))
fi

# --- health: a healthy machine drains nothing ---------------------------------
# A fresh state directory: the XIDs already in the kernel log are noted,
# not acted on (the first run); nothing is changed (--dry-run, --no-slurm).
hstate="$(mktemp -d)"
hargs=(--no-slurm --dry-run --node device-check --format json --state-dir "$hstate" --dev-dir "$DEV" --sys-dir "$SYSFS")
[ -n "${GRES_RS_NVML_LIB:-}" ] && hargs+=(--nvml-lib "$GRES_RS_NVML_LIB")
t0=$(date +%s%N)
health="$(timeout -k 2 60 "$GRES_RS" health "${hargs[@]}" 2>&1)"
hrc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
rm -rf "$hstate"
json() { sed -n "s/^  \"$1\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" <<<"$health" | head -n1; }
verdict="$(json verdict)"
case "$verdict" in
drain | guard_refused) got="drain: $(json reason)" ;;
nothing | warn) got="no drain" ;;
*) got="no verdict (exit $hrc): $(head -c 200 <<<"$health")" ;;
esac
row health all "no drain" "$got"
echo "health: verdict ${verdict:-?} (exit $hrc), $(json nvml_calls) NVML calls, $ms ms"

echo "device-check: $count GPU(s), $fails mismatch(es), $((SECONDS - start)) s; driver $(smi --query-gpu=driver_version --format=csv,noheader | head -n1)"
[ "$fails" -eq 0 ]
