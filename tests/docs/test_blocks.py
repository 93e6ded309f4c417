"""Every command and payload the README and docs/ show is one a test runs.

- A ```console block is a transcript: each `$ ` line is run, in order and in one shell, by the
  `cellbridge` that `cargo build` made (target/debug), in a scratch directory holding copies of
  `examples/` and `events/`; the lines under it are its output, `...` standing for any lines.
- A block marked `<!-- payload: state-sync -->` or `<!-- payload: cluster-bootstrap -->` holds
  console payloads, one JSON object a line (or one object over several lines): each is fed to
  that function's own event reader through `cellbridge invoke`, paused, with every service out
  of reach, and must be read as the payload it is, never refused as input.
- Any other block that shows a `cellbridge` command or a JSON object is marked
  `<!-- illustration: why it is not run -->`.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mdread import ROOT, blocks, pages

CLI = ROOT / "target" / "debug" / "cellbridge"
COMMAND = re.compile(r"(^|[\s$;|&(])cellbridge (plan|sync|check|status|invoke|bootstrap)\b", re.M)
FUNCTIONS = ("state-sync", "cluster-bootstrap")

ALL = [b for p in pages() for b in blocks(p)]


def ident(b):
    return f"{b.path.name}:{b.line}"


def needs_cli():
    if not CLI.exists():
        pytest.fail(f"{CLI} is missing: `cargo build -p cellbridge-cli` first (make test builds it)")


@pytest.fixture
def scratch(tmp_path):
    """A directory with the examples and the sample events, and `cellbridge` on PATH: a fresh
    one for each block, so that one page's `sync` does not change the next page's fleet."""
    d = tmp_path
    shutil.copytree(ROOT / "examples", d / "examples", symlinks=True)
    shutil.copytree(ROOT / "events", d / "events")
    (d / "bin").mkdir()
    (d / "bin" / "cellbridge").symlink_to(CLI)
    return d


def clean_env(scratch, extra=()):
    """Nothing of the caller's CELLBRIDGE_*, AWS or GitHub settings: the docs' commands run as a
    newcomer's would."""
    env = {
        "PATH": f"{scratch / 'bin'}:/usr/bin:/bin",
        "HOME": str(scratch),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
    }
    env.update(extra)
    return env


# ---- console transcripts ---------------------------------------------------------------------

def transcript(text):
    """[(command, expected output lines)] of a console block."""
    steps = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"output before any command: {line!r}"
            steps[-1][1].append(line.rstrip())
    return steps


def matches(expected, got):
    """Whether `got` is `expected`, a `...` line standing for any number of lines."""
    if not expected:
        return not got
    if expected[0] == "...":
        return any(matches(expected[1:], got[i:]) for i in range(len(got) + 1))
    return bool(got) and expected[0] == got[0] and matches(expected[1:], got[1:])


def run_transcript(steps, scratch):
    """Runs the commands in one bash, each after a marker line; returns each one's output."""
    script = ["__rc=0"]
    for n, (cmd, _) in enumerate(steps):
        script.append(f"__rc=$?; printf '\\n@@step {n}\\n'; (exit $__rc); {cmd}")
    out = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=scratch,
        env=clean_env(scratch),
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    parts = re.split(r"\n@@step \d+\n", "\n" + out)[1:]
    return [[l.rstrip() for l in p.rstrip("\n").splitlines()] if p.strip() else [] for p in parts]


CONSOLE = [b for b in ALL if b.lang == "console" and not (b.marker or "").startswith("illustration")]


@pytest.mark.parametrize("block", CONSOLE, ids=ident)
def test_console_blocks_run_as_shown(block, scratch):
    needs_cli()
    steps = transcript(block.text)
    got = run_transcript(steps, scratch)
    assert len(got) == len(steps), f"{ident(block)}: the script stopped early: {got}"
    for (cmd, expected), output in zip(steps, got):
        assert matches(expected, output), (
            f"{ident(block)}: `{cmd}` printed\n" + "\n".join(output) + "\n--- the page shows\n" + "\n".join(expected)
        )


# ---- console payloads ------------------------------------------------------------------------

def payloads(block):
    """The JSON objects of a payload block: one a line, or the whole block as one."""
    try:
        return [json.loads(block.text)]
    except json.JSONDecodeError:
        return [json.loads(l) for l in block.text.splitlines() if l.strip()]


def invoke(function, payload, scratch):
    """`cellbridge invoke` on a payload, paused and with every service out of reach: what the
    function's event reader makes of it, without touching anything."""
    event = scratch / "payload.json"
    event.write_text(json.dumps(payload))
    unreachable = "http://127.0.0.1:9"  # the discard port: nothing listens in the test bed
    env = clean_env(
        scratch,
        {
            "CELLBRIDGE_PAUSED": "true",
            "CELLBRIDGE_FLEET_REPO": "acme/fleet",
            "CELLBRIDGE_GITHUB_SECRET": "cellbridge/github",
            "CELLBRIDGE_FLUX_GIT_SECRET": "cellbridge/flux-git",
            "CELLBRIDGE_STATE_BUCKET": "acme-tfstate",
            "CELLBRIDGE_DEADLINE_SECS": "5",
            "GITHUB_API_URL": unreachable,
            "AWS_ENDPOINT_URL": unreachable,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "eu-west-1",
            "AWS_MAX_ATTEMPTS": "1",
        },
    )
    p = subprocess.run(
        [str(CLI), "invoke", function, "--event", str(event), "--fleet", str(scratch / "examples" / "fleet")]
        if function == "cluster-bootstrap"
        else [str(CLI), "invoke", function, "--event", str(event)],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    try:
        answer = json.loads(p.stdout)
    except json.JSONDecodeError:
        answer = None
    return p.returncode, answer, p.stdout + p.stderr


def refused_as_input(code, answer, output):
    """The event reader refused it: exit code 2 and no answer, only the reason on stderr
    ("cellbridge: event: manual payload: ..."), as for any input it cannot read."""
    return code == 2 and answer is None


def answered_as(payload, answer):
    """Whether the answer is that payload's: the cell or cluster it names, or its action's shape
    (paused, a sync, a sync-all and a bootstrap answer without touching anything; the sweep,
    which the pause does not stop, fails on the services out of reach but answers as a sweep)."""
    if "cell" in payload:
        return [c.get("cell") for c in answer.get("cells", [])] == [payload["cell"]]
    if "key" in payload:
        return [c.get("key") for c in answer.get("cells", [])] == [payload["key"]]
    if "cluster" in payload:
        return answer.get("cluster") == payload["cluster"]
    return {
        "sync-all": lambda a: "cells" in a and "paused" in a,
        "dashboard": lambda a: "dashboard" in a,
        "sweep": lambda a: a.get("action") == "sweep",
    }[payload["action"]](answer)


PAYLOADS = [
    (b, f, i, payload)
    for b in ALL
    if (b.marker or "").startswith("payload:")
    for f in [b.marker.split(":", 1)[1].strip()]
    for i, payload in enumerate(payloads(b))
]


@pytest.mark.parametrize("block,function,index,payload", PAYLOADS, ids=lambda v: None)
def test_payload_blocks_are_read_as_payloads(block, function, index, payload, scratch):
    needs_cli()
    assert function in FUNCTIONS, f"{ident(block)}: marker names no function: {block.marker!r}"
    code, answer, output = invoke(function, payload, scratch)
    assert not refused_as_input(code, answer, output) and answer is not None, (
        f"{ident(block)} #{index}: {function} refused {payload} as input:\n{output}"
    )
    assert answered_as(payload, answer), f"{ident(block)} #{index}: {payload} answered as something else:\n{output}"


def test_the_payload_check_tells_a_refused_payload():
    """The check above can fail: a payload the reader refuses is seen as refused."""
    needs_cli()
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "bin").mkdir()
        (d / "bin" / "cellbridge").symlink_to(CLI)
        for function, bad in [
            ("state-sync", {"action": "sync"}),  # no cell, no bucket and key
            ("state-sync", {"action": "sync", "cell": "Not A Cell"}),
            ("cluster-bootstrap", {"action": "bootstrap", "region": "eu-west-1"}),  # no cluster
            ("cluster-bootstrap", {"action": "sweep", "dry_run": True}),  # the sweep takes no field
            ("state-sync", {"action": "bootstrap", "cluster": "c", "region": "eu-west-1"}),  # the other function's
        ]:
            (d / "examples" / "fleet").mkdir(parents=True, exist_ok=True)
            code, answer, output = invoke(function, bad, d)
            assert refused_as_input(code, answer, output), f"{function} {bad}: not refused:\n{output}"


# ---- everything else is marked -----------------------------------------------------------------

def shows_json_object(block):
    return block.lang == "json" or block.text.lstrip().startswith("{")


OTHERS = [
    b
    for b in ALL
    if b.lang != "console"
    and not (b.marker or "").startswith("payload:")
    and (COMMAND.search(b.text) or shows_json_object(b))
]


@pytest.mark.parametrize("block", OTHERS, ids=ident)
def test_every_other_command_or_payload_is_marked_an_illustration(block):
    marker = block.marker or ""
    assert marker.startswith("illustration:") and len(marker) > len("illustration:") + 10, (
        f"{ident(block)}: shows a cellbridge command or a JSON object; run it (a `console` "
        "transcript, a `<!-- payload: FUNCTION -->` block) or mark it "
        "`<!-- illustration: why it is not run -->`"
    )
