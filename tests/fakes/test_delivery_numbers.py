"""tests/delivery_numbers.py itself: each kind of delivery number is found, citations are not."""
import importlib.util
import subprocess
from pathlib import Path

spec = importlib.util.spec_from_file_location("delivery_numbers", Path(__file__).parents[1] / "delivery_numbers.py")
dn = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dn)


def repo(tmp_path, files):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    return tmp_path


def test_delivery_numbers_are_found_and_named_by_file_and_line(tmp_path):
    root = repo(tmp_path, {
        "src/a.rs": "fn a() {}\n// auto-merge (issue 16)\n",
        "README.md": "Issue 15, item 3: private endpoints\n",
        "tests/t.py": "# the pause switch (item 2)\n",
    })
    found = sorted(dn.findings(root))
    assert found == [
        "README.md:1: Issue 15, item 3: private endpoints",
        "src/a.rs:2: // auto-merge (issue 16)",
        "tests/t.py:1: # the pause switch (item 2)",
    ], found


def test_citations_binaries_and_plain_words_pass(tmp_path):
    root = repo(tmp_path, {
        "src/b.rs": "// see https://github.com/fluxcd/flux2/issues/5185 and fluxcd/pkg#1275\n"
                    "// the dashboard issue, an item of the list, issues of the fleet\n",
        "blob.bin": b"\0issue 16\0",
    })
    assert list(dn.findings(root)) == []
