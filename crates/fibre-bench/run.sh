#!/usr/bin/env bash
# Runs fibre's lookup and table-load benchmarks side by side with DPDK and the Linux kernel.
# Installs Debian's dpdk-dev when it is missing (root), builds fibre-bench with its DPDK peers and
# the fibre CLI (for `fibre -batch`), then passes its arguments to fibre-bench:
#   crates/fibre-bench/run.sh                 # everything: lookup, build, kernel
#   crates/fibre-bench/run.sh lookup -4       # IPv4 lookups only
# Without DPDK (no root to install it), it runs fibre alone.
set -euo pipefail
cd "$(dirname "$0")/../.."

features=(--features dpdk)
if ! pkg-config --exists libdpdk 2>/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        echo "run.sh: installing dpdk-dev" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpdk-dev pkg-config >/dev/null
    else
        echo "run.sh: dpdk-dev missing and not root: benchmarking fibre alone" >&2
        features=()
    fi
fi

cargo build --release -p fibre-cli --quiet
cargo build --release -p fibre-bench "${features[@]}" --quiet
export FIBRE="${FIBRE:-$PWD/target/release/fibre}"
exec target/release/fibre-bench "$@"
