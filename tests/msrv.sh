#!/bin/bash
# Builds the whole workspace (every target) with the rust-version the
# manifest declares: `tests/msrv.sh <version> <tools dir>`, from
# tests/lint.sh.  The machine has one rustup toolchain and can fetch no
# other, so the compiler of that version is Debian's own (bookworm's
# rustc-web/cargo-web, the same release as Debian 13's rustc), unpacked
# with dpkg-deb into <tools dir>/rust-<version> once per machine: nothing
# is installed system-wide and the rustup toolchain stays the default.
#
# Where Debian's archive no longer offers that version, the check says so
# and is skipped: raise rust-version to a release the archive has.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
msrv="${1:?usage: tests/msrv.sh <rust-version> <tools dir>}"
tools="${2:?usage: tests/msrv.sh <rust-version> <tools dir>}"
root="$tools/rust-$msrv"

if [ ! -x "$root/usr/bin/cargo" ]; then
    # The archive's build of that upstream release, e.g. 1.85.0+dfsg3-1~deb12u3.
    # (awk reads to the end: leaving early would kill apt-cache with
    # SIGPIPE, which pipefail makes this script's exit status.)
    deb_version="$(apt-cache madison rustc-web 2>/dev/null | awk -v v="$msrv" '!found && $3 ~ "^" v "\\.[0-9]+\\+" {found = $3} END {print found}')"
    if [ -z "$deb_version" ]; then
        echo "msrv: SKIPPED: Debian's archive has no rustc-web $msrv.x (apt-cache madison rustc-web);" \
            "the declared rust-version $msrv was not built" >&2
        exit 0
    fi
    echo "msrv: unpacking Debian's rustc-web/cargo-web $deb_version into $root"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    chmod 0755 "$work"
    # The compiler, its standard library, and the shared libraries rustc and
    # cargo need that a minimal machine lacks.
    (cd "$work" && apt-get download -q=2 \
        "rustc-web=$deb_version" "cargo-web=$deb_version" \
        "libstd-rust-web-dev=$deb_version" "libstd-rust-web-$msrv=$deb_version" \
        libllvm19 libpcre3 libhttp-parser2.9 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
    mkdir -p "$work/root"
    for deb in "$work"/*.deb; do
        dpkg-deb -x "$deb" "$work/root"
    done
    rm -rf "$root.tmp"
    mkdir -p "$tools"
    mv "$work/root" "$root.tmp"
    mv -T "$root.tmp" "$root"
fi

libs="$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu:$root/usr/lib/llvm-19/lib"
run() {
    env PATH="$root/usr/bin:$PATH" LD_LIBRARY_PATH="$libs" RUSTC="$root/usr/bin/rustc" \
        RUSTDOC="$root/usr/bin/rustdoc" "$root/usr/bin/cargo" "$@"
}
have="$(run --version); $(env LD_LIBRARY_PATH="$libs" "$root/usr/bin/rustc" --version)"
case "$have" in
    "cargo $msrv."*"; rustc $msrv."*) ;;
    *) echo "msrv: $root holds $have, not $msrv" >&2; exit 1 ;;
esac
echo "msrv: $have"
run build --workspace --all-targets --locked --target-dir "${CARGO_TARGET_DIR:-target}/msrv"
