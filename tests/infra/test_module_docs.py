"""The module's README documents every variable and output, and the console payloads it shows
are the ones in events/ (what a reader pastes must be what the tests exercise)."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = [ROOT / "infra", ROOT / "infra" / "modules" / "region-forwarder"]


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
    samples = [json.loads(p.read_text()) for p in sorted((ROOT / "events").glob("manual-*.json"))]
    assert shown, "no payload table in infra/README.md"
    for payload in shown:
        assert payload in samples, f"README payload {payload} is not an events/manual-*.json sample"
    for sample in samples:
        assert sample in shown, f"events sample {sample} is not shown in infra/README.md"


def test_the_readmes_contents_list_every_section_in_order():
    """The README's contents are its `##` and `###` headings, in order, each linking to the
    anchor GitHub gives it: a section added, moved or renamed without its entry fails."""
    text = (ROOT / "README.md").read_text()
    heads, in_code = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = None if in_code else re.match(r"^(##|###) (.+)$", line)
        if m and m.group(2) != "Contents":
            heads.append((len(m.group(1)), m.group(2)))
    anchor = lambda t: re.sub(r"[^\w\- ]", "", t.strip().lower()).replace(" ", "-")
    want = [("  " if lvl == 3 else "") + f"- [{t}](#{anchor(t)})" for lvl, t in heads]
    block = text.split("## Contents\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert block == want, "README contents out of date:\n" + "\n".join(want)
