#!/bin/bash
# The checks every commit passes before its tests (run by tests/run.sh):
# formatting, clippy with warnings as errors (default features and the
# test builds' features), the documentation without a warning (broken
# intra-doc links), the layers (each crate depends only on those
# below it; unsafe code only in the ABI layer and nvml-extra), a build with
# the rust-version the manifest declares (Debian's own rustc of that
# version), and cargo-deny's license, ban and source checks (deny.toml).  cargo-deny is installed from crates.io into
# ${GRES_RS_TOOLS:-/var/tmp/slurm-gpu-gres-tools} when missing (a few
# minutes, once per machine).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$HOME/.cargo/bin:$PATH"

TOOLS="${GRES_RS_TOOLS:-/var/tmp/slurm-gpu-gres-tools}"
DENY_VERSION=0.20.2

echo "==> cargo fmt --check"
cargo fmt --all --check

echo "==> cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
echo "==> cargo clippy (test features)"
cargo clippy --workspace --all-targets --features fault-injection,test-hooks -- -D warnings

echo "==> cargo doc --workspace --no-deps, warnings as errors (every intra-doc link resolves)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

echo "==> the pure core depends on no build-time tool and no Slurm"
core_deps="$(cargo tree -p gres-core -e normal,build --prefix none --format '{p}')"
if grep -E '^(bindgen|cc|clang-sys|slurm-gpu-gres|nvml-wrapper) ' <<<"$core_deps"; then
    echo "lint: gres-core must stay pure (no bindgen, cc, NVML or Slurm)" >&2
    exit 1
fi

echo "==> the layers: each crate depends only on the crates below it"
# From the bottom; a crate may depend on those before it, never after.
layers=(gres-core gres-health gres-config gres-predict gres-log nvml-extra gres-nvml gres-plugins gres-slurm-abi gres_rs slurm-gpu-gres)
for i in "${!layers[@]}"; do
    deps="$(cargo tree -p "${layers[$i]}" -e normal,build --prefix none --format '{p}' | awk '{print $1}' | sort -u)"
    for above in "${layers[@]:$((i + 1))}"; do
        if grep -qxF "$above" <<<"$deps"; then
            echo "lint: ${layers[$i]} depends on $above, a layer above it (CONTRIBUTING.md)" >&2
            exit 1
        fi
    done
done
echo "==> the plugin library runs none of gres-rs check's crates"
# gres-health is allowed: our gpu/nvml reads the site's health file
# (step_xids) and writes the step XID records with it.
lib_deps="$(cargo tree -p gres_rs -e normal,build --prefix none --format '{p}' | awk '{print $1}' | sort -u)"
if grep -xE 'gres-config|gres-predict' <<<"$lib_deps"; then
    echo "lint: libgres_rs.so links gres-rs check's crates; the plugins get slurmd's parse (CONTRIBUTING.md)" >&2
    exit 1
fi
echo "==> unsafe code only in the ABI layer and nvml-extra"
for root in crates/gres-core/src/lib.rs crates/gres-health/src/lib.rs crates/gres-config/src/lib.rs crates/gres-predict/src/lib.rs crates/gres-log/src/lib.rs crates/gres-nvml/src/lib.rs \
    crates/gres-plugins/src/lib.rs src/lib.rs src/bin/gres-rs/main.rs; do
    if ! grep -qxF '#![deny(unsafe_code)]' "$root"; then
        echo "lint: $root lacks #![deny(unsafe_code)]: unsafe belongs in crates/slurm-abi or crates/nvml-extra" >&2
        exit 1
    fi
done

echo "==> the declared rust-version builds the workspace"
msrv="$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)"
bash tests/msrv.sh "$msrv" "$TOOLS"

deny="$TOOLS/bin/cargo-deny"
if ! "$deny" --version 2>/dev/null | grep -qF "$DENY_VERSION"; then
    echo "==> installing cargo-deny $DENY_VERSION into $TOOLS"
    cargo install --locked --quiet --root "$TOOLS" "cargo-deny@$DENY_VERSION"
fi
echo "==> cargo deny check licenses bans sources"
"$deny" check licenses bans sources
