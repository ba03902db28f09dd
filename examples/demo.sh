#!/bin/bash
# The one demo command: prepares the machine (tests/setup-debian.sh), builds
# the plugins, then runs the demo (a throwaway single-node Slurm cluster
# with OUR GPU GRES plugins on fake GPUs; see examples/demo.rs). Needs root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export PATH="$HOME/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

echo "==> tests/setup-debian.sh"
bash tests/setup-debian.sh

echo "==> cargo build --workspace"
cargo build --workspace

echo "==> cargo run --example demo"
exec cargo run --example demo
