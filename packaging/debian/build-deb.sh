#!/bin/bash
# Builds the Debian package of slurm-gpu-gres for the Slurm release whose
# headers are installed (libslurm-dev), from a checkout:
#
#     bash packaging/debian/build-deb.sh [OUT_DIR]      # default: target/debian
#
# One command, no debhelper: a release build of the workspace, then the
# package tree laid out by hand and packed with dpkg-deb (as root or under
# fakeroot). The package:
#   /usr/lib/<multiarch>/slurm-gpu-gres/   gres_gpu.so gres_mps.so gres_shard.so
#                                          gpu_nvml.so libgres_rs.so (a directory
#                                          of its own: no file of another package)
#   /usr/bin/gres-rs                       the admin tool
#   /usr/share/man/man1/gres-rs*.1.gz      man pages (gres-rs generate man)
#   bash, zsh and fish completions          (gres-rs generate completions)
#   /usr/share/slurm-gpu-gres/             the MPS Prolog/Epilog scripts, examples
#   /usr/share/doc/slurm-gpu-gres/         README, docs, a systemd drop-in example
# Its version carries the Slurm release (0.1.0+slurm22.05.8-1) and Depends
# pins the upstream release slurmd checks (major.minor.micro): any Debian
# revision of 22.05.8, nothing else. The maintainer scripts never edit
# slurm.conf: they print the PluginDir= line and run `gres-rs check`
# without failing the install; removal prints how to roll back.
#
# Prints the path of the .deb as its last line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH="$HOME/.cargo/bin:$PATH"

out="${1:-target/debian}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
target="${CARGO_TARGET_DIR:-target}"

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

echo "build-deb: slurm-gpu-gres $deb_version for Slurm $slurm ($arch)" >&2
cargo build --release --workspace --locked >&2
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
for f in gres_gpu.so gres_mps.so gres_shard.so gpu_nvml.so libgres_rs.so; do
    install -m 0644 "$work/plugins/$f" "$root$plugin_dir/$f"
done
strip --strip-debug "$root$plugin_dir/libgres_rs.so"
install -m 0755 "$bin" "$root/usr/bin/gres-rs"
strip --strip-debug "$root/usr/bin/gres-rs"

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
shlibs="$(cd "$work/shlibs" && dpkg-shlibdeps -O -e"$root/usr/bin/gres-rs" -e"$root$plugin_dir/libgres_rs.so" 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')"

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
Depends: ${shlibs:+$shlibs, }slurm-wlm-basic-plugins (>= $slurm), slurm-wlm-basic-plugins (<< $next_micro~)
Recommends: slurmd
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

deb="$out/slurm-gpu-gres_${deb_version}_${arch}.deb"
if [ "$(id -u)" -eq 0 ]; then
    chown -R root:root "$root"
    dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
else
    fakeroot dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
fi
echo "$deb"
