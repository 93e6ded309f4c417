#!/usr/bin/env bash
# make package: one deployable zip per function for provided.al2023 (a `bootstrap` executable
# at the zip's root), built by cargo-lambda with zig as the glibc-targeted linker.
#   ARCH=x86_64 (default) | arm64   — arm64 needs `rustup target add aarch64-unknown-linux-gnu`,
#                                     which these build machines cannot download.
#   GLIBC=2.34 (default)            — provided.al2023 ships glibc 2.34.
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=${ARCH:-x86_64}
GLIBC=${GLIBC:-2.34}
case "$ARCH" in
  x86_64) triple=x86_64-unknown-linux-gnu ;;
  arm64) triple=aarch64-unknown-linux-gnu ;;
  *) echo "package: ARCH must be x86_64 or arm64, not $ARCH" >&2; exit 2 ;;
esac
venv=.venv-package
if [ ! -x "$venv/bin/cargo-lambda" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'cargo-lambda>=1.8' 'ziglang>=0.13'
fi
export PATH="$PWD/$venv/bin:$PATH"

# One TLS stack, one crypto provider: ring or OpenSSL in the tree would mean two.
for crate in ring openssl-sys rustls@0.21; do
  # `cargo tree -i` prints nothing (and still exits 0) when the crate is only in the lock file.
  if [ -n "$(cargo tree -q -e normal -p state-sync -p cluster-bootstrap -i "$crate" 2>/dev/null)" ]; then
    echo "package: $crate is in the dependency tree; see ARCHITECTURE 'one TLS stack'" >&2; exit 1
  fi
done

cargo lambda build --release --compiler zig --target "$triple.$GLIBC" \
  --output-format zip -p state-sync -p cluster-bootstrap
mkdir -p dist
printf '%-20s %10s %10s %s\n' function zip binary "highest glibc symbol"
for f in state-sync cluster-bootstrap; do
  cp "target/lambda/$f/bootstrap.zip" "dist/$f.zip"
  bin="target/$triple/release/$f"  # the executable the zip holds as `bootstrap`
  glibc=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n1)
  awk -v f="$f" -v z="$(stat -c %s "dist/$f.zip")" -v b="$(stat -c %s "$bin")" -v g="$glibc" \
    'BEGIN { printf "%-20s %9.1fM %9.1fM %s\n", f, z / 1048576, b / 1048576, g }'
  if [ "$(printf '%s\n' "GLIBC_$GLIBC" "$glibc" | sort -V | tail -n1)" != "GLIBC_$GLIBC" ]; then
    echo "package: $f needs $glibc, newer than provided.al2023's $GLIBC" >&2; exit 1
  fi
done
echo "zips in dist/ ($ARCH); deploy with the module in infra/ (state_sync_zip, cluster_bootstrap_zip)"
