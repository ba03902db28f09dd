#!/bin/bash
# Builds the Debian package of slurm-gpu-gres from a checkout, for the Slurm
# release whose headers are installed (libslurm-dev), or for the Debian
# release of a test-bed chroot (tests/testbed/debian-chroot.sh):
#
#     bash packaging/debian/build-deb.sh [OUT_DIR]               # this machine's Slurm
#     bash packaging/debian/build-deb.sh --for trixie [OUT_DIR]  # Debian 13, Slurm 24.11.5
#     bash packaging/debian/build-deb.sh --for sid [OUT_DIR]     # Debian unstable, 26.05.5
#
# OUT_DIR defaults to target/debian (target/debian-<suite> with --for).
# With --for SUITE the headers are the chroot's
# ($GRES_RS_CHROOT_DIR/SUITE, default /var/cache/slurm-gpu-gres/chroot), the
# build goes to a target dir of its own (target/slurm-<version>, the one the
# test bed builds that release into), and the architecture, the multiarch
# path and every name in Depends are checked against the chroot's dpkg
# database (read only: nothing in the chroot is run or changed). The
# binaries are built here, against this machine's glibc (Debian 12: 2.36);
# Depends on libc6 is what dpkg-shlibdeps computes from the glibc symbol
# versions they use (libc6 (>= 2.35)), which a later Debian's libc6 (trixie
# 2.41, sid 2.43) satisfies.
#
# One command, no debhelper: a release build of the workspace, then the
# package tree laid out by hand and packed with dpkg-deb (as root or under
# fakeroot). The package:
#   /usr/lib/<multiarch>/slurm-gpu-gres/   gres_gpu.so gres_mps.so gres_shard.so
#                                          gpu_nvml.so libgres_rs-<version>.so (a directory
#                                          of its own: no file of another package)
#   /usr/bin/gres-rs                       the admin tool
#   /usr/bin/gres-rs-health                link: gres-rs health, for HealthCheckProgram
#   /usr/share/man/man1/gres-rs*.1.gz      man pages (gres-rs generate man)
#   bash, zsh and fish completions          (gres-rs generate completions)
#   /usr/share/slurm-gpu-gres/             the MPS Prolog/Epilog scripts, examples
#   /usr/share/doc/slurm-gpu-gres/         README, docs, a systemd drop-in example
# Its version carries the Slurm release (0.1.0+slurm22.05.8-1) and Depends
# pins the upstream release slurmd checks (major.minor.micro): any Debian
# revision of 22.05.8, nothing else. The maintainer scripts never edit
# slurm.conf: they print the PluginDir= line and run `gres-rs check`
# (--no-detect, 10 seconds at most) without failing the install; removal
# prints how to roll back and what slurmd loads after it (warning when
# that stops slurmd). Breaks: any other version of slurm-gpu-gres-divert,
# whose Depends pins this exact version.
#
# Also builds slurm-gpu-gres-divert, the optional package that puts links to
# ours in Slurm's own plugin directory in place of the stock files (moved
# aside with dpkg-divert), so that no slurm.conf change is needed.
#
# Prints the path of the divert package, then the path of the main package
# as its last line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH="$HOME/.cargo/bin:$PATH"

suite=""
if [ "${1:-}" = "--for" ]; then
    suite="${2:?build-deb: --for needs a suite (trixie, sid)}"
    shift 2
fi
chroot_dir=""
if [ -n "$suite" ]; then
    chroot_dir="${GRES_RS_CHROOT_DIR:-/var/cache/slurm-gpu-gres/chroot}/$suite"
    if [ ! -f "$chroot_dir/.gres-rs-chroot-stamp" ] || [ ! -f "$chroot_dir/usr/include/slurm/slurm_version.h" ]; then
        echo "build-deb: no finished test-bed chroot with libslurm-dev at $chroot_dir (tests/testbed/debian-chroot.sh $suite)" >&2
        exit 2
    fi
    export SLURM_INCLUDE_DIR="$chroot_dir/usr/include"
    unset SLURM_VERSION
fi
out="${1:-target/debian${suite:+-$suite}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

version_h="${SLURM_INCLUDE_DIR:-/usr/include}/slurm/slurm_version.h"
number="$(awk '$1 == "#define" && $2 == "SLURM_VERSION_NUMBER" {print $3}' "$version_h")"
if [ -z "$number" ]; then
    echo "build-deb: no SLURM_VERSION_NUMBER in $version_h (install libslurm-dev)" >&2
    exit 2
fi
n=$((number))
slurm="$(printf '%d.%02d.%d' $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255)))"
next_micro="$(printf '%d.%02d.%d' $((n >> 16 & 255)) $((n >> 8 & 255)) $(((n & 255) + 1)))"
ours="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"
deb_version="${ours}+slurm${slurm}-1"
arch="$(dpkg --print-architecture)"
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"
if [ -n "$suite" ]; then
    # The chroot's own dpkg database, read only.
    admindir="$chroot_dir/var/lib/dpkg"
    theirs="$(cat "$admindir/arch-native" 2>/dev/null || head -1 "$admindir/arch" 2>/dev/null || true)"
    if [ -n "$theirs" ] && [ "$theirs" != "$arch" ]; then
        echo "build-deb: the $suite chroot is $theirs, this machine builds $arch" >&2
        exit 2
    fi
    # Its slurmd's upstream release is the headers' one.
    plugins_version="$(dpkg-query --admindir="$admindir" -W -f='${Version}' slurm-wlm-basic-plugins 2>/dev/null || true)"
    if [ "${plugins_version%%-*}" != "$slurm" ]; then
        echo "build-deb: the $suite chroot's slurm-wlm-basic-plugins is '${plugins_version:-not installed}', its headers are Slurm $slurm" >&2
        exit 2
    fi
    # Debian's plugin directory of that release is under the same
    # multiarch path (the package's directory sits beside it).
    if ! dpkg-query --admindir="$admindir" -S "/usr/lib/$multiarch/slurm-wlm/libslurmfull.so" 2>/dev/null | grep -q '^slurm-wlm-basic-plugins:'; then
        echo "build-deb: in the $suite chroot no slurm-wlm-basic-plugins file /usr/lib/$multiarch/slurm-wlm/libslurmfull.so" >&2
        exit 2
    fi
fi
target="${CARGO_TARGET_DIR:-target}${suite:+/slurm-$slurm}"

echo "build-deb: slurm-gpu-gres $deb_version for Slurm $slurm ($arch${suite:+, Debian $suite, headers from $chroot_dir})" >&2
cargo build --release --workspace --locked --target-dir "$target" >&2
bin="$target/release/gres-rs"
lib="$target/release/libgres_rs.so"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
root="$work/root"
plugin_dir="/usr/lib/$multiarch/slurm-gpu-gres"
doc="/usr/share/doc/slurm-gpu-gres"
share="/usr/share/slurm-gpu-gres"
install -d -m 0755 "$root$plugin_dir" "$root/usr/bin" "$root/usr/share/man/man1" "$root$doc" "$root$share" \
    "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
    "$root/usr/share/fish/vendor_completions.d" "$root/DEBIAN"

# The library and the plugin files: gres-rs install writes them exactly as
# sites get them by hand (it checks each file's release and its library).
GRES_RS_SLURMD_VERSION="$slurm" "$bin" install --plugin-dir "$work/plugins" --from "$(dirname "$lib")" \
    --slurm-conf /dev/null --force >&2
# The library's name carries its version (libgres_rs-<version>.so): the one
# gres-rs install wrote, which the plugin files name.
library="$(cd "$work/plugins" && ls libgres_rs-*.so)"
if [ "$(wc -w <<<"$library")" != 1 ]; then
    echo "build-deb: gres-rs install wrote not one libgres_rs-<version>.so: $library" >&2
    exit 2
fi
for f in gres_gpu.so gres_mps.so gres_shard.so gpu_nvml.so "$library"; do
    install -m 0644 "$work/plugins/$f" "$root$plugin_dir/$f"
done
strip --strip-debug "$root$plugin_dir/$library"
install -m 0755 "$bin" "$root/usr/bin/gres-rs"
strip --strip-debug "$root/usr/bin/gres-rs"
# slurmd runs HealthCheckProgram without arguments: as gres-rs-health the
# tool runs `gres-rs health`.
ln -s gres-rs "$root/usr/bin/gres-rs-health"

"$bin" generate man "$work/man" >/dev/null
for page in "$work"/man/*.1; do
    gzip -9n <"$page" >"$root/usr/share/man/man1/$(basename "$page").gz"
done
"$bin" generate completions "$work/completions" >/dev/null
install -m 0644 "$work/completions/gres-rs.bash" "$root/usr/share/bash-completion/completions/gres-rs"
install -m 0644 "$work/completions/_gres-rs" "$root/usr/share/zsh/vendor-completions/_gres-rs"
install -m 0644 "$work/completions/gres-rs.fish" "$root/usr/share/fish/vendor_completions.d/gres-rs.fish"

# MPS scripts and node configurations.
install -d -m 0755 "$root$share/mps" "$root$share/examples"
for f in examples/mps/mps-prolog.sh examples/mps/mps-epilog.sh examples/mps/mps-task-prolog.sh; do
    install -m 0755 "$f" "$root$share/mps/$(basename "$f")"
done
# Sourced by the three, never run.
install -m 0644 examples/mps/mps-common.sh "$root$share/mps/mps-common.sh"
install -m 0644 examples/mps/README.md "$root$share/mps/README.md"
for d in a100-mig h100-nvlink mps-mixed shards typed-multi-model; do
    [ -d "examples/$d" ] || continue
    find "examples/$d" -type f ! -name '*.sh' -print0 | while IFS= read -r -d '' f; do
        install -D -m 0644 "$f" "$root$share/examples/${f#examples/}"
    done
done
install -m 0644 README.md SAFETY.md CONTRIBUTING.md "$root$doc/"
install -d -m 0755 "$root$doc/docs"
install -m 0644 docs/*.md "$root$doc/docs/"
install -m 0644 packaging/debian/slurmd-gres-rs-check.conf "$root$doc/slurmd-gres-rs-check.conf"
install -m 0644 packaging/debian/copyright "$root$doc/copyright"
printf 'slurm-gpu-gres (%s) unstable; urgency=medium\n\n  * Built from %s for Slurm %s.\n\n -- slurm-gpu-gres maintainers <maintainers@users.noreply.github.com>  %s\n' \
    "$deb_version" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$slurm" "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")" |
    gzip -9n >"$root$doc/changelog.Debian.gz"

# Shared-library dependencies, as Debian computes them.
mkdir -p "$work/shlibs/debian"
printf 'Source: slurm-gpu-gres\n\nPackage: slurm-gpu-gres\nArchitecture: any\n' >"$work/shlibs/debian/control"
shlibs="$(cd "$work/shlibs" && dpkg-shlibdeps -O -e"$root/usr/bin/gres-rs" -e"$root$plugin_dir/$library" 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')"
if [ -z "$shlibs" ]; then
    echo "build-deb: dpkg-shlibdeps gave no shared-library dependencies (dpkg-dev installed?)" >&2
    exit 2
fi
depends="${shlibs:+$shlibs, }slurm-wlm-basic-plugins (>= $slurm), slurm-wlm-basic-plugins (<< $next_micro~)"
if [ -n "$suite" ]; then
    # Each package named exists in that release, at a version that
    # satisfies it (dpkg-shlibdeps read this machine's symbols files).
    IFS=',' read -ra deps <<<"$depends"
    for d in "${deps[@]}"; do
        d="$(echo "$d" | xargs)"
        name="${d%% *}"
        have="$(dpkg-query --admindir="$admindir" -W -f='${db:Status-Abbrev}${Version}' "$name" 2>/dev/null || true)"
        case "$have" in "ii "*) have="${have#ii }" ;; *) have="" ;; esac
        if [ -z "$have" ]; then
            echo "build-deb: Depends names $name, which the $suite chroot does not have" >&2
            exit 2
        fi
        op="$(sed -n 's/^[^(]*(\([<>=]*\) *\([^)]*\)).*/\1/p' <<<"$d")"
        v="$(sed -n 's/^[^(]*(\([<>=]*\) *\([^)]*\)).*/\2/p' <<<"$d")"
        if [ -n "$op" ]; then
            case "$op" in '<<') op=lt ;; '<=') op=le ;; '=') op=eq ;; '>=') op=ge ;; '>>') op=gt ;; esac
            if ! dpkg --compare-versions "$have" "$op" "$v"; then
                echo "build-deb: Depends $d, the $suite chroot has $name $have" >&2
                exit 2
            fi
        fi
    done
fi

for s in postinst prerm postrm; do
    sed -e "s|@PLUGIN_DIR@|$plugin_dir|g" -e "s|@SLURM@|$slurm|g" "packaging/debian/$s" >"$root/DEBIAN/$s"
    chmod 0755 "$root/DEBIAN/$s"
done
size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
cat >"$root/DEBIAN/control" <<EOF
Package: slurm-gpu-gres
Version: $deb_version
Architecture: $arch
Maintainer: slurm-gpu-gres maintainers <maintainers@users.noreply.github.com>
Installed-Size: $size
Depends: $depends
Recommends: slurmd
Breaks: slurm-gpu-gres-divert (<< $deb_version), slurm-gpu-gres-divert (>> $deb_version)
Section: admin
Priority: optional
Description: memory-safe GPU GRES plugins for Slurm $slurm
 Drop-in replacements, written in Rust, for Slurm's gres/gpu, gres/mps,
 gres/shard and gpu/nvml plugins, built for Slurm $slurm exactly, in
 $plugin_dir (listed first in PluginDir= to use them), and gres-rs, the
 tool that checks gres.conf/slurm.conf as slurmd reads them, detects GPUs
 through NVML, installs the plugin files and tells which files the
 running daemons have loaded.
EOF

pack() { # pack ROOT DEB FIRST (packaging/debian/pack-deb.sh)
    if [ "$(id -u)" -eq 0 ]; then
        chown -R root:root "$1"
        bash packaging/debian/pack-deb.sh "$@"
    else
        fakeroot bash packaging/debian/pack-deb.sh "$@"
    fi
}
deb="$out/slurm-gpu-gres_${deb_version}_${arch}.deb"
pack "$root" "$deb" "$plugin_dir/$library"

# The optional second package, slurm-gpu-gres-divert: our files in Slurm's
# own plugin directory, so that no slurm.conf changes. dpkg-divert moves
# each stock file aside (<name>.so.stock, a name slurmd never loads) and
# the package puts a symbolic link to ours in its place, plus one to the
# library, which the plugin files find beside them ($ORIGIN). Removing it
# puts the stock files back.
droot="$work/divert"
stock_dir="/usr/lib/$multiarch/slurm-wlm"
install -d -m 0755 "$droot$stock_dir" "$droot/usr/share/doc/slurm-gpu-gres-divert" "$droot/DEBIAN"
for f in gres_gpu.so gres_mps.so gres_shard.so gpu_nvml.so "$library"; do
    ln -s "../slurm-gpu-gres/$f" "$droot$stock_dir/$f"
done
install -m 0644 packaging/debian/copyright "$droot/usr/share/doc/slurm-gpu-gres-divert/copyright"
printf 'slurm-gpu-gres-divert (%s) unstable; urgency=medium\n\n  * Built from %s for Slurm %s.\n\n -- slurm-gpu-gres maintainers <maintainers@users.noreply.github.com>  %s\n' \
    "$deb_version" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$slurm" "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")" |
    gzip -9n >"$droot/usr/share/doc/slurm-gpu-gres-divert/changelog.Debian.gz"
for s in preinst postinst prerm postrm; do
    sed -e "s|@PLUGIN_DIR@|$plugin_dir|g" -e "s|@STOCK_DIR@|$stock_dir|g" -e "s|@SLURM@|$slurm|g" "packaging/debian/divert/$s" >"$droot/DEBIAN/$s"
    chmod 0755 "$droot/DEBIAN/$s"
done
cat >"$droot/DEBIAN/control" <<CONTROL
Package: slurm-gpu-gres-divert
Version: $deb_version
Architecture: $arch
Maintainer: slurm-gpu-gres maintainers <maintainers@users.noreply.github.com>
Installed-Size: $(du -sk --exclude=DEBIAN "$droot" | cut -f1)
Depends: slurm-gpu-gres (= $deb_version), slurm-wlm-basic-plugins (>= $slurm), slurm-wlm-basic-plugins (<< $next_micro~)
Section: admin
Priority: optional
Description: use the slurm-gpu-gres plugins without changing slurm.conf
 Diverts Slurm $slurm's own gres_gpu.so, gres_mps.so, gres_shard.so and
 gpu_nvml.so in $stock_dir (each kept there as <name>.so.stock) and puts
 links to the slurm-gpu-gres plugins in their place, so slurmd and
 slurmctld load ours from the default PluginDir. Removing this package
 puts Slurm's files back.
CONTROL
divert_deb="$out/slurm-gpu-gres-divert_${deb_version}_${arch}.deb"
pack "$droot" "$divert_deb" "$stock_dir/$library"
echo "$divert_deb"
echo "$deb"
