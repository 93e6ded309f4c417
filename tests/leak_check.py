#!/usr/bin/env python3
"""Fails if any secret a test used appears in anything the test suite captured.

Usage: leak_check.py DIR   (DIR = $CELLBRIDGE_LEAK_DIR, by default target/leak-capture)

DIR holds `secrets.jsonl` (one {"id", "value", "from"} per line: registered by the Rust tests
through tests/support/leak.rs and by the fakes for what they mint) and capture files (every log
line, result and error of each test process). A secret leaks when a capture file holds:
  - the whole value (values under 24 characters are only looked for whole), or
  - any run of 24 characters or more of it, taken line by line (a PEM body's lines, a token),
  - the same in the base64 of the value (how a Kubernetes Secret's data carries it).
The report names the capture file, the line and the secret's id; it never prints the value.
Exit status: 0 clean, 1 leaks, 2 nothing to check (no secrets or no capture: a broken wiring).
"""
import base64
import json
import os
import subprocess
import sys
import tempfile

SECRETS = "secrets.jsonl"
WINDOW = 16  # indexed piece size; scanned at STRIDE, so every run >= WINDOW + STRIDE - 1 is seen
STRIDE = 8
MIN_RUN = 24  # a shared run this long is a leak (shorter ones: coincidence or common prefixes)
MIN_VALUE = 8  # shorter values cannot be told from ordinary text


def load_secrets(root):
    secrets = {}  # value -> id (first registration wins)
    bad = []
    for dirpath, _, files in os.walk(root):
        for name in files:
            if not (name.startswith("secrets") and name.endswith(".jsonl")):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                        value, sid = rec["value"], str(rec["id"])
                    except (ValueError, KeyError, TypeError):
                        bad.append(f"{path}:{n}")
                        continue
                    if isinstance(value, str):
                        secrets.setdefault(value, f"{sid} [{rec.get('from', '?')}]")
    return secrets, bad


def pieces(value):
    """The strings to look for: each line of the value and of its base64."""
    # PEM armour (`-----BEGIN ... KEY-----`) is the same in every key: not a piece of this one.
    out = [("", line.strip()) for line in value.splitlines() if not line.strip().startswith("-----")]
    b64 = base64.b64encode(value.encode()).decode()
    if value.startswith("-----"):
        # Skip the encoded armour too (whole 3-byte groups of it, so the rest stays aligned).
        k = (len(value.split("\n", 1)[0].encode()) + 1) // 3
        b64 = b64[k * 4:]
    out.append((" (base64)", b64))
    return [(how, p) for how, p in out if p]


def build_index(secrets):
    short = {}  # exact string -> id
    index = {}  # WINDOW-long piece -> [(id, how, piece, offset)]
    for value, sid in secrets.items():
        v = value.strip()
        if len(v) < MIN_VALUE:
            continue
        if len(v) < MIN_RUN:
            short[v] = sid
            continue
        for how, p in pieces(value):
            if len(p) < MIN_RUN:
                short.setdefault(p, sid + how)
                continue
            for i in range(len(p) - WINDOW + 1):
                index.setdefault(p[i:i + WINDOW], []).append((sid + how, p, i))
    return short, index


def run_at(line, at, piece, off):
    """Length of the common run of `line` and `piece` around line[at] == piece[off]."""
    a, b = at, off
    while a > 0 and b > 0 and line[a - 1] == piece[b - 1]:
        a, b = a - 1, b - 1
    e, f = at + WINDOW, off + WINDOW
    while e < len(line) and f < len(piece) and line[e] == piece[f]:
        e, f = e + 1, f + 1
    return e - a


def short_candidates(path, short):
    """Numbers of the lines of `path` that may hold a short value: `grep -F` matches all of them
    at once (a multi-pattern search in C), where testing each of several hundred values against
    each of a million lines in Python took a minute. Values that span lines are left to `scan`."""
    patterns = [s for s in short if "\n" not in s and "\r" not in s]
    if not patterns:
        return set()
    with tempfile.NamedTemporaryFile("wb", suffix=".patterns") as pf:
        pf.write(b"\n".join(p.encode("utf-8") for p in patterns) + b"\n")
        pf.flush()
        out = subprocess.run(["grep", "-F", "-n", "-a", "-f", pf.name, path],
                             stdout=subprocess.PIPE, env=dict(os.environ, LC_ALL="C"), check=False)
    if out.returncode not in (0, 1):
        raise SystemExit(f"leak check: grep failed on {path} (exit {out.returncode})")
    return {int(l.split(b":", 1)[0]) for l in out.stdout.splitlines()}


def scan(path, rel, short, index, leaks):
    lines = 0
    candidates = short_candidates(path, short)
    spanning = {s: sid for s, sid in short.items() if "\n" in s or "\r" in s}
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            lines += 1
            for s, sid in (short.items() if n in candidates else spanning.items()):
                if s in line:
                    leaks.add((rel, n, sid))
            for at in range(0, len(line) - WINDOW + 1, STRIDE):
                hits = index.get(line[at:at + WINDOW])
                if not hits:
                    continue
                for sid, piece, off in hits:
                    if run_at(line, at, piece, off) >= MIN_RUN:
                        leaks.add((rel, n, sid))
    return lines


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = argv[1]
    if not os.path.isdir(root):
        print(f"leak check: {root} does not exist: nothing was captured (is CELLBRIDGE_LEAK_DIR set?)")
        return 2
    secrets, bad = load_secrets(root)
    for b in bad:
        print(f"leak check: unreadable secret record at {b}")
    short, index = build_index(secrets)
    leaks = set()
    lines = files = 0
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            if name.startswith("secrets") and name.endswith(".jsonl"):
                continue
            path = os.path.join(dirpath, name)
            files += 1
            lines += scan(path, os.path.relpath(path, root), short, index, leaks)
    for rel, n, sid in sorted(leaks):
        print(f"LEAK: {rel}:{n}: secret {sid}")
    print(f"leak check: {len(secrets)} secrets, {lines} captured lines, {len(leaks)} leaks ({files} capture files)")
    if leaks:
        return 1
    if not secrets or not lines or bad:
        print("leak check: nothing to compare (no secrets registered, nothing captured, or unreadable records)")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
