#!/usr/bin/env bash
# The release workflow's build of the command line for one target, runnable as it is on a laptop
# (`make release-local`): builds `cellbridge` with the release profile and writes
#   OUT/cellbridge-<version>-<target>.tar.gz         the binary, alone at the archive's root
#   OUT/cellbridge-<version>-<target>.tar.gz.sha256  its checksum, as `sha256sum` writes it
# The version is the workspace's; the commit is the checkout's (`cellbridge --version`).
# Usage: release/build.sh TARGET OUT
set -euo pipefail
target=${1:?usage: release/build.sh TARGET OUT}
out=${2:?usage: release/build.sh TARGET OUT}
cd "$(dirname "$0")/.."
cargo build --release --locked -p cellbridge-cli --target "$target"
bash release/package.sh "$target" "target/$target/release/cellbridge" "$out"
