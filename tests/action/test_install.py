"""The strict check action's installer (action/install.sh) against a release laid out as the
release workflow publishes it: release/package.sh's archive and checksum file of the `cellbridge`
this checkout built, and SHA256SUMS, served from a local directory.

A fleet repository pins the release's SHA256SUMS by its sha256; what does not match it is refused,
and a refusal never falls back to a build: the check fails and says why.
"""
import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "action/install.sh"
CLI = Path(os.environ.get("CELLBRIDGE_CLI", ROOT / "target/debug/cellbridge"))
VERSION = subprocess.run([str(CLI), "--version"], capture_output=True, text=True, check=True).stdout.split()[1] if CLI.exists() else None
TARGET = f"{platform.machine()}-unknown-linux-gnu"
ASSET = f"cellbridge-{VERSION}-{TARGET}.tar.gz"


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """One packed release of the built command line (packing takes seconds: done once)."""
    assert CLI.exists(), f"{CLI} is missing: build it first (cargo build -p cellbridge-cli)"
    out = tmp_path_factory.mktemp("packed")
    subprocess.run(["bash", str(ROOT / "release/package.sh"), TARGET, str(CLI), str(out)], check=True, capture_output=True)
    return out


@pytest.fixture
def release(tmp_path, packed):
    """A release directory as published: v<version>/{archive, archive.sha256, SHA256SUMS}."""
    tag = tmp_path / "releases" / f"v{VERSION}"
    tag.mkdir(parents=True)
    for f in packed.iterdir():
        shutil.copy(f, tag / f.name)
    (tag / "SHA256SUMS").write_text((tag / f"{ASSET}.sha256").read_text())
    return tag


def run(tmp_path, release, pin, **extra):
    env = {
        "PATH": os.environ["PATH"],
        "CELLBRIDGE_VERSION": VERSION,
        "CELLBRIDGE_CHECKSUMS_SHA256": pin,
        "CELLBRIDGE_RELEASE_URL": (release.parent).as_uri(),
        # Nothing here can be built: a fallback that tries fails visibly.
        "CELLBRIDGE_SOURCE_URL": (tmp_path / "no-such-repository").as_uri(),
        "CELLBRIDGE_INSTALL_DIR": str(tmp_path / "install"),
        "CELLBRIDGE_BUILD_DIR": str(tmp_path / "build"),
        "GITHUB_PATH": str(tmp_path / "github_path"),
        "CARGO_NET_OFFLINE": "true",
        **extra,
    }
    return subprocess.run(["bash", str(INSTALL)], env=env, capture_output=True, text=True)


def installed(tmp_path):
    return tmp_path / "install/bin/cellbridge"


def test_the_pinned_release_installs_and_is_put_on_the_path(tmp_path, release):
    r = run(tmp_path, release, sha256(release / "SHA256SUMS"))
    assert r.returncode == 0, r.stderr
    got = subprocess.run([str(installed(tmp_path)), "--version"], capture_output=True, text=True, check=True).stdout
    assert got.startswith(f"cellbridge {VERSION} (commit ")
    assert (tmp_path / "github_path").read_text().strip() == str(installed(tmp_path).parent)


def test_a_tampered_archive_is_refused_and_nothing_is_installed(tmp_path, release):
    archive = release / ASSET
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0x01
    archive.write_bytes(bytes(data))
    r = run(tmp_path, release, sha256(release / "SHA256SUMS"))
    assert r.returncode == 1
    assert f"refused: {ASSET} does not match its checksum in the pinned SHA256SUMS" in r.stderr
    assert not installed(tmp_path).exists()
    assert "building" not in r.stderr  # a refusal is not a reason to build instead


def test_a_release_whose_checksums_were_rewritten_with_the_archive_is_refused(tmp_path, release):
    pin = sha256(release / "SHA256SUMS")
    archive = release / ASSET
    archive.write_bytes(archive.read_bytes() + b"\0")
    (release / "SHA256SUMS").write_text(f"{sha256(archive)}  {ASSET}\n")
    r = run(tmp_path, release, pin)
    assert r.returncode == 1
    assert "refused: SHA256SUMS of v" in r.stderr and "does not match the pinned checksums-sha256" in r.stderr
    assert not installed(tmp_path).exists()


def test_an_archive_the_checksums_do_not_list_is_not_installed(tmp_path, release):
    (release / "SHA256SUMS").write_text(f"{'0' * 64}  cellbridge-{VERSION}-other-unknown-linux-gnu.tar.gz\n")
    r = run(tmp_path, release, sha256(release / "SHA256SUMS"))
    # Not on offer for this machine: the fallback builds, and here nothing can be built.
    assert r.returncode == 2, r.stderr
    assert f"has no {ASSET}" in r.stderr and "from source failed" in r.stderr
    assert not installed(tmp_path).exists()


def test_without_a_release_the_cached_source_build_of_that_version_is_used(tmp_path, release):
    shutil.rmtree(release)
    (tmp_path / "build/bin").mkdir(parents=True)
    shutil.copy(CLI, tmp_path / "build/bin/cellbridge")
    r = run(tmp_path, release, "a" * 64)
    assert r.returncode == 0, r.stderr
    assert "from the build cache" in r.stdout
    assert installed(tmp_path).exists()


def test_without_a_pin_nothing_is_downloaded(tmp_path, release):
    r = run(tmp_path, release, "")
    assert r.returncode == 2
    assert "no checksums-sha256 pinned: building" in r.stderr
    assert not installed(tmp_path).exists()


@pytest.mark.parametrize("version,pin,message", [
    ("v0.1.0", "a" * 64, "is not a release version"),
    (None, "A" * 64, "checksums-sha256 is not a sha256"),
])
def test_bad_inputs_are_named(tmp_path, release, version, pin, message):
    r = run(tmp_path, release, pin, CELLBRIDGE_VERSION=version or VERSION)
    assert r.returncode == 2 and message in r.stderr
