"""Secrets the fakes mint or are handed, registered for tests/leak_check.py.

Same layout as tests/support/leak.rs: `secrets.jsonl` in CELLBRIDGE_LEAK_DIR, else in
<repo>/target/leak-capture. A value cellbridge got from a fake (an installation token, an
assumed role's keys, the EKS token it signed) is then checked like the tests' own secrets.
"""
import json
import os
import sys

LEAK_DIR = os.environ.get("CELLBRIDGE_LEAK_DIR") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "target", "leak-capture")
_SEEN = set()


def register_secret(fake, what, value):
    if not value or value in _SEEN:
        return
    _SEEN.add(value)
    try:
        os.makedirs(LEAK_DIR, exist_ok=True)
        # One write per line, appended: lines of concurrent processes do not interleave.
        with open(os.path.join(LEAK_DIR, "secrets.jsonl"), "a") as f:
            f.write(json.dumps({"id": what, "value": value, "from": fake}) + "\n")
    except OSError as e:
        print(f"leak capture: cannot register a secret in {LEAK_DIR}: {e}", file=sys.stderr)
