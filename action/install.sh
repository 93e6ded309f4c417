#!/usr/bin/env bash
# Puts the pinned `cellbridge` on the runner: the released binary, refused unless its checksums
# match the pin; when that release cannot be downloaded (no release for this version or this
# machine, the host unreachable), built from the release's tag with cargo instead.
#
# Environment (the action's inputs):
#   CELLBRIDGE_VERSION           the release, without the leading v (required)
#   CELLBRIDGE_CHECKSUMS_SHA256  sha256 of the release's SHA256SUMS file (the release notes print
#                                it); empty: nothing is downloaded, the tag is built from source
#   CELLBRIDGE_RELEASE_URL       where releases are downloaded from: <url>/v<version>/<file>
#   CELLBRIDGE_SOURCE_URL        the Git repository the fallback builds from
#   CELLBRIDGE_INSTALL_DIR       where the binary goes (bin/ below it, added to GITHUB_PATH)
#   CELLBRIDGE_BUILD_DIR         cargo's root and target directory for the fallback (cached)
# Exit 0 installed; 1 refused (a checksum does not match: a tampered or corrupted download is
# never replaced by a build, it fails the check); 2 bad input or the fallback build failed.
set -euo pipefail

fail() { echo "cellbridge install: $2" >&2; exit "$1"; }

version=${CELLBRIDGE_VERSION:-}
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]] ||
  fail 2 "version '${version}' is not a release version such as 0.1.0 (no leading v)"
pin=${CELLBRIDGE_CHECKSUMS_SHA256:-}
[[ -z $pin || $pin =~ ^[0-9a-f]{64}$ ]] ||
  fail 2 "checksums-sha256 is not a sha256 (64 lowercase hex digits)"
install_dir=${CELLBRIDGE_INSTALL_DIR:?CELLBRIDGE_INSTALL_DIR is required}
case "$(uname -m)" in
  x86_64 | amd64) arch=x86_64 ;;
  aarch64 | arm64) arch=aarch64 ;;
  *) arch=$(uname -m) ;;
esac
target="$arch-unknown-linux-gnu"
asset="cellbridge-$version-$target.tar.gz"

installed() {
  local got
  got=$("$1" --version) || fail 2 "$1 does not run on this machine"
  [[ $got == "cellbridge $version "* ]] || fail 1 "$1 says '$got', not version $version"
  echo "cellbridge install: $got"
  if [[ -n ${GITHUB_PATH:-} ]]; then dirname "$1" >>"$GITHUB_PATH"; fi
}

download() {
  local tmp=$1
  [[ -n $pin ]] || { echo "cellbridge install: no checksums-sha256 pinned: building v$version from source" >&2; return 1; }
  local base="${CELLBRIDGE_RELEASE_URL:?CELLBRIDGE_RELEASE_URL is required}/v$version"
  curl -fsSL --retry 3 --proto '=https,file' -o "$tmp/SHA256SUMS" "$base/SHA256SUMS" || return 1
  (cd "$tmp" && echo "$pin  SHA256SUMS" | sha256sum --check --status) ||
    fail 1 "refused: SHA256SUMS of v$version does not match the pinned checksums-sha256 (sha256 $(sha256sum "$tmp/SHA256SUMS" | cut -d' ' -f1))"
  local line
  line=$(awk -v f="$asset" '$2 == f || $2 == "*" f' "$tmp/SHA256SUMS")
  [[ -n $line ]] || { echo "cellbridge install: v$version has no $asset" >&2; return 1; }
  curl -fsSL --retry 3 --proto '=https,file' -o "$tmp/$asset" "$base/$asset" || return 1
  (cd "$tmp" && echo "$line" | sha256sum --check --status) ||
    fail 1 "refused: $asset does not match its checksum in the pinned SHA256SUMS (sha256 $(sha256sum "$tmp/$asset" | cut -d' ' -f1))"
  # Only a verified archive is unpacked, and only its one binary. (errexit does not apply inside a
  # function called as a condition: every step says how it fails.)
  tar -xzf "$tmp/$asset" -C "$tmp" cellbridge || fail 1 "$asset holds no cellbridge binary"
  mkdir -p "$install_dir/bin" && install -m 0755 "$tmp/cellbridge" "$install_dir/bin/cellbridge" ||
    fail 2 "cannot write $install_dir/bin/cellbridge"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if download "$tmp"; then
  installed "$install_dir/bin/cellbridge"
  exit 0
fi

build_dir=${CELLBRIDGE_BUILD_DIR:?CELLBRIDGE_BUILD_DIR is required}
if [[ -x $build_dir/bin/cellbridge ]] && "$build_dir/bin/cellbridge" --version | grep -q "^cellbridge $version "; then
  echo "cellbridge install: v$version from the build cache"
else
  echo "cellbridge install: building v$version from ${CELLBRIDGE_SOURCE_URL:?CELLBRIDGE_SOURCE_URL is required}" >&2
  CARGO_TARGET_DIR="$build_dir/target" cargo install --locked --root "$build_dir" \
    --git "$CELLBRIDGE_SOURCE_URL" --tag "v$version" cellbridge-cli ||
    fail 2 "building v$version from source failed"
fi
mkdir -p "$install_dir/bin"
install -m 0755 "$build_dir/bin/cellbridge" "$install_dir/bin/cellbridge"
installed "$install_dir/bin/cellbridge"
