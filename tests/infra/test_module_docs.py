"""The module's README documents every variable and output, and the console payloads it shows
are the ones in events/ (what a reader pastes must be what the tests exercise)."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = [ROOT / "infra", ROOT / "infra" / "modules" / "region-forwarder", ROOT / "infra" / "modules" / "cell-account"]


def declared(module, kind):
    text = "".join(p.read_text() for p in sorted(module.glob("*.tf")))
    return re.findall(rf'^{kind} "([^"]+)"', text, re.M)


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_readme_documents_every_variable_and_output(module):
    readme = (module / "README.md").read_text()
    for kind in ("variable", "output"):
        names = declared(module, kind)
        assert names, f"no {kind} found in {module}"
        missing = [n for n in names if f"| `{n}` |" not in readme]
        assert not missing, f"{module.name}/README.md has no table row for {kind}s {missing}"


def test_readme_console_payloads_are_the_sample_events():
    readme = (ROOT / "infra" / "README.md").read_text()
    shown = [json.loads(m) for m in re.findall(r"^\| [a-z-]+ \| `(\{.*?\})` \|", readme, re.M)]
    # The payloads meant for people, and the sweep's, which people send after fixing its alarm.
    console = sorted((ROOT / "events").glob("manual-*.json")) + [ROOT / "events" / "sweep.json"]
    samples = [json.loads(p.read_text()) for p in console]
    assert shown, "no payload table in infra/README.md"
    for payload in shown:
        assert payload in samples, f"README payload {payload} is not an events/manual-*.json or sweep.json sample"
    for sample in samples:
        assert sample in shown, f"events sample {sample} is not shown in infra/README.md"
