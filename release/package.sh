#!/usr/bin/env bash
# Packs one built `cellbridge` as a release asset with its checksum file (see release/build.sh).
# The archive is reproducible from the binary: fixed owner, mode and time, no directory entry.
# Usage: release/package.sh TARGET BINARY OUT
set -euo pipefail
target=${1:?usage: release/package.sh TARGET BINARY OUT}
binary=${2:?usage: release/package.sh TARGET BINARY OUT}
out=${3:?usage: release/package.sh TARGET BINARY OUT}
# The workspace's version (a cross-compiled binary cannot be asked on the build machine).
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$(dirname "$0")/../Cargo.toml")
[[ -n $version ]] || { echo "release/package.sh: no version in the workspace's Cargo.toml" >&2; exit 2; }
asset="cellbridge-$version-$target.tar.gz"
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -m 0755 "$binary" "$stage/cellbridge"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$stage" -cf - cellbridge |
  gzip -n >"$out/$asset"
(cd "$out" && sha256sum "$asset" >"$asset.sha256")
echo "$out/$asset"
