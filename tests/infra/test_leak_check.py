"""tests/leak_check.py catches real leaks: planted in a capture directory laid out as
tests/support/leak.rs and the fakes write it, each kind of leak is reported (file, line, secret
id, never the value), and a clean capture passes with the summary line."""

import base64
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "tests" / "leak_check.py"

PEM = """-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAt3m1f9Qx2Lr8Zp0Vb6Nw4Ks7Yd1Hf3Jg9MaCeWuXo5RiT2Lq
8Pz7Nc4Vb1Xm6Qk3Ws9Ed2Rf5Tg8Yh0Uj7Ik4Ol1Pa6Sd3Fg9Hj2Kl5Zx8Cv0Bn4
Mq7We1Rt9Yu3Io6Pa2Sd5Fg8Hj1Kl4Zx7Cv0Bn3Mq6We9Rt2Yu5Io8Pa1Sd4Fg7Hj
-----END RSA PRIVATE KEY-----
"""
TOKEN = "ghs_3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e4b6d"
PASSWORD = "pw-do-not-print"


def bed(tmp_path, captured):
    (tmp_path / "secrets.jsonl").write_text(
        "".join(
            json.dumps({"id": sid, "value": v, "from": "test"}) + "\n"
            for sid, v in [("app key", PEM), ("installation token", TOKEN), ("https password", PASSWORD)]
        )
    )
    (tmp_path / "state_sync-123.log").write_text(
        "2026-11-30T00:00:00Z  INFO cellbridge::sync: opened pull request cell=eu-c1\n" + captured
    )
    return subprocess.run([sys.executable, str(CHECK), str(tmp_path)], capture_output=True, text=True)


def test_a_clean_capture_passes_with_the_summary(tmp_path):
    r = bed(tmp_path, "== handler\n{\"cells\": [{\"cell\": \"eu-c1\", \"outcome\": \"opened\"}]}\n")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "leak check: 3 secrets, 3 captured lines, 0 leaks" in r.stdout


def leaked(tmp_path, text):
    r = bed(tmp_path, text)
    assert r.returncode == 1, r.stdout
    for v in (PEM.splitlines()[1], TOKEN, PASSWORD):
        assert v not in r.stdout and v not in r.stderr, "the report prints a secret value"
    return r.stdout


def test_a_whole_token_is_caught_with_file_line_and_id(tmp_path):
    out = leaked(tmp_path, f"DEBUG octocrab: GET /repos auth=Bearer {TOKEN}\n")
    assert "LEAK: state_sync-123.log:2: secret installation token [test]" in out
    assert "1 leaks" in out


def test_a_short_secret_is_caught_whole(tmp_path):
    assert "secret https password" in leaked(tmp_path, f"error: bad credentials for git:{PASSWORD}\n")


def test_24_characters_of_a_pem_body_are_a_leak(tmp_path):
    body_line = PEM.splitlines()[2]
    out = leaked(tmp_path, f"WARN key rejected near `{body_line[13:37]}`\n")
    assert "secret app key [test]" in out


def test_a_json_escaped_pem_is_caught(tmp_path):
    assert "secret app key" in leaked(tmp_path, json.dumps({"error": PEM}) + "\n")


def test_base64_of_a_secret_is_caught(tmp_path):
    encoded = base64.b64encode(PEM.encode()).decode()
    assert "secret app key [test] (base64)" in leaked(tmp_path, f'data: {{"identity": "{encoded}"}}\n')


def test_common_text_and_short_overlaps_are_not_leaks(tmp_path):
    # PEM armour is in every key, and 20 shared characters are a coincidence, not the secret.
    r = bed(tmp_path, f"-----BEGIN RSA PRIVATE KEY----- expected\nnear {TOKEN[:20]}\n")
    assert r.returncode == 0, r.stdout


def test_an_empty_capture_is_a_broken_wiring_not_a_pass(tmp_path):
    r = subprocess.run([sys.executable, str(CHECK), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2, r.stdout
    r = subprocess.run([sys.executable, str(CHECK), str(tmp_path / "missing")], capture_output=True, text=True)
    assert r.returncode == 2 and "nothing was captured" in r.stdout
