"""The fleet workflow fleet repositories adopt (examples/github-actions/cellbridge-check.yml with
the action in action/), read as GitHub reads it, against what docs/merge-queue.md tells people to
require: a required check must report on every pull request and every merge group.
"""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/github-actions/cellbridge-check.yml"
ACTION = ROOT / "action/action.yml"
DOC = ROOT / "docs/merge-queue.md"


def load(path):
    # PyYAML reads the key `on` as the boolean True (YAML 1.1); GitHub reads it as "on".
    doc = yaml.safe_load(path.read_text())
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc


def the_job():
    (job,) = load(EXAMPLE)["jobs"].values()
    return job


def lambda_status_context():
    src = (ROOT / "shared/src/pure/plan/mod.rs").read_text()
    return re.search(r'pub const STATUS_CONTEXT: &str = "([^"]+)";', src).group(1)


def test_it_runs_on_every_pull_request_and_every_merge_group():
    on = load(EXAMPLE)["on"]
    assert set(on) == {"pull_request", "merge_group"}
    for event, config in on.items():
        # A filter would leave some pull request or merge group without the required check.
        assert not (config or {}).keys() & {"paths", "paths-ignore", "branches", "branches-ignore", "types"}, event


def test_it_checks_the_events_own_commit_with_the_pinned_action():
    steps = the_job()["steps"]
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout@"))
    assert "ref" not in (checkout.get("with") or {}), "the default is the event's commit"
    action = next(s for s in steps if re.match(r"cellbridge/cellbridge/action@v\d", s.get("uses", "")))
    assert action["uses"] == f"cellbridge/cellbridge/action@v{action['with']['version']}"
    assert re.fullmatch(r"[0-9a-f]{64}", action["with"]["checksums-sha256"])
    declared = load(ACTION)["inputs"]
    assert set(action["with"]) <= set(declared)
    assert {name for name, i in declared.items() if i.get("required")} <= set(action["with"])


def test_the_action_installs_then_runs_the_check_over_the_fleet():
    steps = load(ACTION)["runs"]["steps"]
    runs = [s["run"] for s in steps if "run" in s]
    assert 'bash "$GITHUB_ACTION_PATH/install.sh"' in runs[0]
    assert runs[-1].strip() == 'cellbridge check --fleet "$FLEET"'


def test_the_docs_name_the_two_checks_as_they_are_reported():
    workflow_check = the_job()["name"]
    lambda_check = lambda_status_context()
    assert workflow_check != lambda_check
    doc = DOC.read_text()
    rows = {
        cells[1]: cells[3]
        for cells in (line.strip("| ").split(" | ") for line in doc.splitlines() if line.startswith("| "))
        if len(cells) == 4
    }
    by_workflow = "GitHub Actions in the fleet repository: `examples/github-actions/cellbridge-check.yml`, which runs the action in `action/`"
    assert rows[by_workflow] == f"`{workflow_check}`"
    assert rows["state-sync"] == f"`{lambda_check}`"
