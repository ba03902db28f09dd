#!/bin/bash
# The one test command: prepares the machine (tests/setup-debian.sh), runs
# the lint gates (tests/lint.sh: fmt, clippy, cargo deny), builds
# the workspace (the plugin .so files the real-Slurm tests install) and the
# test build with the test hooks, then
# runs every unit and integration test. Exits non-zero on any failure.
# Needs root (the test clusters run their own munged/slurmctld/slurmd).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export PATH="$HOME/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
# Under this script missing prerequisites are failures, not skips.
export GRES_RS_REQUIRE_SLURM="${GRES_RS_REQUIRE_SLURM:-1}"
# The Slurm releases the per-release differential tests run on
# (gres-test-harness testbed), a comma-separated list of: debian (the
# host's 22.05, 24.11 in a trixie chroot, 26.05 in a sid chroot), source
# (23.02, 23.11, 24.05, 25.05, 25.11, each built from ../shared/slurm-src),
# all (both), or series (22.05, source:23.11).  tests/setup-debian.sh
# builds the chroots the list names.  By default: the Debian three and ONE
# release built from source, chosen by the commit (its hash modulo 5), so
# that every run fits CI's time and successive commits cover all five;
# GRES_RS_SLURM=all runs everything (docs/compat.md).
if [ -z "${GRES_RS_SLURM:-}" ]; then
    source_series=(23.02 23.11 24.05 25.05 25.11)
    head="$(git rev-parse HEAD 2>/dev/null || echo 0)"
    GRES_RS_SLURM="debian,source:${source_series[$((16#${head:0:7} % 5))]}"
fi
export GRES_RS_SLURM
echo "==> GRES_RS_SLURM=$GRES_RS_SLURM"

echo "==> tests/setup-debian.sh"
bash tests/setup-debian.sh

echo "==> tests/lint.sh (fmt, clippy -D warnings, cargo deny)"
bash tests/lint.sh

echo "==> cargo test -p gres-core (the pure core: no Slurm, no libclang)"
cargo test -p gres-core

echo "==> cargo build --workspace"
cargo build --workspace

# The release build: tests/plugin_files.rs checks that the files sites
# install contain no test hook.
echo "==> cargo build --release --workspace"
cargo build --release --workspace

# The test build (test hooks on; gres-test-harness test_build_dir), which the
# tests would otherwise build at their first use of it.
echo "==> cargo build --workspace --features fault-injection,test-hooks (target/test-build)"
cargo build --workspace --features fault-injection,test-hooks --target-dir "${CARGO_TARGET_DIR:-target}/test-build"

# Every test that needs a real Slurm (or a host of some kind) says in
# this file whether it ran or was skipped, and why (gres-test-harness
# ledger); the last line of the run counts them.
GRES_RS_TEST_LEDGER="$(pwd)/${CARGO_TARGET_DIR:-target}/test-ledger.tsv"
export GRES_RS_TEST_LEDGER
: >"$GRES_RS_TEST_LEDGER"
ledger_summary() {
    local rc=$? ran skipped releases
    [ -f "$GRES_RS_TEST_LEDGER" ] || return "$rc"
    echo "==> tests skipped, by reason:"
    awk -F'\t' '$1 == "skipped" { print $3 }' "$GRES_RS_TEST_LEDGER" | sort | uniq -c | sort -rn
    ran=$(grep -c '^ran' "$GRES_RS_TEST_LEDGER" || true)
    skipped=$(grep -c '^skipped' "$GRES_RS_TEST_LEDGER" || true)
    releases=$(sed -n 's/^ran\t.*\[Slurm \([0-9.]*\)\].*/\1/p' "$GRES_RS_TEST_LEDGER" | sort -V | uniq -c |
        awk '{ printf "%s%s: %s", (NR > 1 ? ", " : ""), $2, $1 }')
    echo "==> real-Slurm tests (GRES_RS_SLURM=$GRES_RS_SLURM): $ran ran (${releases:-none}), $skipped skipped (reasons above)"
    return "$rc"
}
trap ledger_summary EXIT

# (gres-core's tests ran above, first; not again.)
echo "==> cargo test --workspace --exclude gres-core --no-fail-fast"
cargo test --workspace --exclude gres-core --no-fail-fast "$@"

echo "==> all tests passed"
