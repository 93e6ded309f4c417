#!/usr/bin/env python3
"""Fails on a delivery number anywhere in the repository: the product speaks of the product.

A line that says what was delivered when ("issue 16", "issue 15, item 3", "(item 2)") tells a
newcomer nothing about the code beside it and goes stale the day the tracker moves; say what the
code is about instead. Checked: every file Git tracks, as text.

Not delivery numbers, so not flagged (each exclusion with its reason):
- an address of another project's issue or pull request (`github.com/<owner>/<repo>/issues/<n>`,
  `.../pull/<n>`): a citation of a source, which the house asks for;
- `<owner>/<repo>#<n>`: the same citation written short (no "issue" word, so the pattern does not
  match it in the first place);
- files Git marks binary; this file (its own text quotes the pattern) and its tests,
  `tests/fakes/test_delivery_numbers.py` (their samples are delivery numbers on purpose).

Usage: delivery_numbers.py [ROOT]   (default: the repository holding this file). Exit 0 clean,
1 with one line per finding (file:line: text).
"""
import re
import subprocess
import sys
from pathlib import Path

PATTERN = re.compile(r"\b[Ii]ssues? #?\d+\b|\b[Ii]tems? \d+[a-z]?\b")
CITATION = re.compile(r"https?://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+\S*")
SELF = Path(__file__).resolve()
OWN_TESTS = "tests/fakes/test_delivery_numbers.py"


def findings(root):
    files = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        path = (Path(root) / rel).resolve()
        if path == SELF or rel == OWN_TESTS or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if PATTERN.search(CITATION.sub("", line)):
                yield f"{rel}:{n}: {line.strip()[:160]}"


def main(argv):
    root = argv[1] if len(argv) > 1 else SELF.parents[1]
    found = list(findings(root))
    for f in found:
        print(f)
    if found:
        print(f"delivery_numbers: {len(found)} line(s) name a delivery; say what the code is about instead")
        return 1
    print("delivery_numbers: no delivery number in any tracked file")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
