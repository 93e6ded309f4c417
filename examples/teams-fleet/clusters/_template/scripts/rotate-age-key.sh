#!/bin/sh
# Re-encrypts this cell's SOPS files for a new age recipient: rotate-age-key.sh AGE_RECIPIENT
set -eu
cd "$(dirname "$0")/.."
for f in *.sops.yaml; do sops updatekeys --yes "$f"; done
