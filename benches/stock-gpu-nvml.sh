#!/bin/bash
# Builds the stock gpu/nvml plugin (gpu_nvml.so) from the Debian source of the
# installed slurmd, for the benchmarks' NVML rows.  Debian's slurmd selects
# gpu/nvml for AutoDetect=nvml whenever libnvidia-ml.so loads, but Debian
# ships no gpu_nvml.so (its NVML header is in non-free); built here, the stock
# side of an NVML node detects through NVML as ours does.
#
#   benches/stock-gpu-nvml.sh OUT_DIR NVML_LIB_DIR
#
# OUT_DIR receives gpu_nvml.so (and keeps its work files under OUT_DIR/work,
# so a second run only rebuilds); NVML_LIB_DIR holds the libnvidia-ml.so.1 to
# link against (the NVML stand-in of tests/nvml-standin).  nvml.h comes from
# Debian's libnvidia-ml-dev package, fetched with a private apt setup (the
# machine's apt sources are left alone).  Debian's own build flags are used.
# Nothing it fetches is kept outside OUT_DIR.  Prints the plugin's path.
set -euo pipefail

out=${1:?OUT_DIR}
nvml_lib=${2:?NVML_LIB_DIR}
[ -f "$nvml_lib/libnvidia-ml.so.1" ] || { echo "no libnvidia-ml.so.1 in $nvml_lib" >&2; exit 1; }
mkdir -p "$out/work"
out=$(cd "$out" && pwd)
nvml_lib=$(cd "$nvml_lib" && pwd)
work="$out/work"

# Slurm's source, the version of the installed slurmd (with Debian's patches).
version=$(dpkg-query -W -f='${Version}' slurmd)
upstream=${version#*:}
upstream=${upstream%-*}
src="$work/slurm-wlm-$upstream"
if [ ! -f "$src/configure" ]; then
    (cd "$work" && apt-get source -qq "slurm-wlm=$version" >"$work/source.log" 2>&1) ||
        { tail -5 "$work/source.log" >&2; echo "apt-get source slurm-wlm=$version failed (a deb-src entry is needed: tests/setup-debian.sh adds one)" >&2; exit 1; }
fi

# nvml.h from libnvidia-ml-dev (Debian non-free), through a private apt state.
if [ ! -f "$work/nvml/include/nvml.h" ]; then
    apt_dir="$work/apt"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/sources.list.d"
    uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [ -n "$uri" ] || uri=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
    [ -n "$uri" ] || uri=http://deb.debian.org/debian
    suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
    cat >"$apt_dir/sources.list.d/non-free.sources" <<EOF
Types: deb
URIs: $uri
Suites: $suite
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt_dir/sources.list.d"
        -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)
    apt-get "${apt_opts[@]}" -qq update >"$work/apt.log" 2>&1 &&
        (cd "$apt_dir" && apt-get "${apt_opts[@]}" -qq download libnvidia-ml-dev >>"$work/apt.log" 2>&1) ||
        { tail -5 "$work/apt.log" >&2; echo "could not fetch libnvidia-ml-dev (Debian non-free) for nvml.h" >&2; exit 1; }
    rm -rf "$apt_dir/x"
    dpkg-deb -x "$apt_dir"/libnvidia-ml-dev_*.deb "$apt_dir/x"
    mkdir -p "$work/nvml/include"
    cp "$apt_dir/x/usr/include/nvml.h" "$work/nvml/include/nvml.h"
fi

# Link against the given library (Slurm's configure looks in lib64/stubs).
mkdir -p "$work/nvml/lib64/stubs"
ln -sfn "$nvml_lib/libnvidia-ml.so.1" "$work/nvml/lib64/stubs/libnvidia-ml.so"
ln -sfn "$nvml_lib/libnvidia-ml.so.1" "$work/nvml/lib64/stubs/libnvidia-ml.so.1"

CFLAGS=$(dpkg-buildflags --get CFLAGS)
CPPFLAGS=$(dpkg-buildflags --get CPPFLAGS)
LDFLAGS=$(dpkg-buildflags --get LDFLAGS)
export CFLAGS CPPFLAGS LDFLAGS
cd "$src"
if ! grep -q '^#define HAVE_NVML 1' config.h 2>/dev/null; then
    ./configure --with-nvml="$work/nvml" --disable-dependency-tracking >"$work/configure.log" 2>&1 ||
        { tail -20 "$work/configure.log" >&2; exit 1; }
    grep -q '^#define HAVE_NVML 1' config.h || { echo "Slurm's configure did not find NVML (see $work/configure.log)" >&2; exit 1; }
fi
{ make -C src/plugins/gpu/common && make -C src/plugins/gpu/nvml; } >"$work/make.log" 2>&1 ||
    { tail -20 "$work/make.log" >&2; exit 1; }
install -m 0644 src/plugins/gpu/nvml/.libs/gpu_nvml.so "$out/.gpu_nvml.so.tmp"
# As Debian's packages are (their debug symbols go to -dbgsym packages).
strip --strip-unneeded "$out/.gpu_nvml.so.tmp"
mv "$out/.gpu_nvml.so.tmp" "$out/gpu_nvml.so"
echo "$out/gpu_nvml.so"
