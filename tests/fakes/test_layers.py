"""tests/layers.py itself: an import up the layers is named by file and line; doc comments and
the listed exceptions are not; an exception no import needs any more is reported."""
import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location("layers", Path(__file__).parents[1] / "layers.py")
layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layers)


def tree(tmp_path, files):
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(tmp_path)


def test_an_import_up_the_layers_is_named_with_its_file_and_line(tmp_path, monkeypatch):
    monkeypatch.setattr(layers, "EXCEPTIONS", {})
    root = tree(tmp_path, {
        "pure/plan/mod.rs": "use std::fmt;\nuse crate::rules::report::Limit;\n",
        "rules/report.rs": "use crate::pure::plan::Plan;\nuse crate::ports::github::GitData;\n",
        "ports/github/mod.rs": "/// Implemented by [`crate::adapters::github::GithubFleet`].\npub trait GitData {}\n",
        "adapters/github/mod.rs": "use crate::shell::error::Class;\nuse crate::jobs::sync::Syncer;\n",
    })
    assert sorted(layers.check(root)) == [
        "shared/src/adapters/github/mod.rs:2: the adapters layer imports jobs::sync (use crate::jobs::sync::Syncer;)",
        "shared/src/pure/plan/mod.rs:2: the pure layer imports rules::report (use crate::rules::report::Limit;)",
    ]


def test_an_exception_allows_its_edge_and_is_reported_once_nothing_needs_it(tmp_path, monkeypatch):
    root = tree(tmp_path, {"shell/metrics.rs": "fn t() { use crate::jobs::sync::Action; }\n"})
    monkeypatch.setattr(layers, "EXCEPTIONS", {("shell::metrics", "jobs::sync"): "the README test"})
    assert layers.check(root) == []
    assert layers.used_exceptions(root) == []
    monkeypatch.setattr(layers, "EXCEPTIONS", {
        ("shell::metrics", "jobs::sync"): "the README test",
        ("pure::plan", "rules::report"): "gone",
    })
    assert layers.used_exceptions(root) == [
        "EXCEPTIONS[('pure::plan', 'rules::report')] is no longer needed: remove it"
    ]


def test_an_exception_is_matched_by_module_not_by_letters_and_a_doc_comment_needs_none(tmp_path, monkeypatch):
    root = tree(tmp_path, {
        "adapters/probes.rs": "use crate::doubles::cluster::MemAws;\n",
        "adapters/probe.rs": "/// Like [`crate::doubles::cluster::MemAws`].\npub struct EksProbe;\n",
    })
    monkeypatch.setattr(layers, "EXCEPTIONS", {("adapters::probe", "doubles::cluster"): "a holder"})
    assert layers.check(root) == [
        "shared/src/adapters/probes.rs:1: the adapters layer imports doubles::cluster (use crate::doubles::cluster::MemAws;)"
    ]
    assert layers.used_exceptions(root) == [
        "EXCEPTIONS[('adapters::probe', 'doubles::cluster')] is no longer needed: remove it"
    ]
