#!/usr/bin/env python3
"""The library's layers hold: each folder of shared/src imports only the layers listed before it.

    pure      the core: no I/O, imports no other layer
    ports     the outside services as traits: pure
    shell     the Lambda shell every job runs in (the Job trait, metrics, pause): pure, ports
    rules     the rules over the ports: pure, ports, shell
    adapters  the ports against the real services: pure, ports, shell
    doubles   the ports in memory (test-support): pure, ports, shell, and the adapters'
              classifiers of GitHub's answers, which the double shares
    jobs      the two jobs, composed of rules and adapters: everything but the doubles

`shell::error`, `shell::config`, `shell::retry` and `shell::telemetry` are the error model,
settings, retries and logging every layer uses: any layer may import them. Every other edge not
in the table is an error naming the file, the line and the import. An exception is allowed only
with its reason, in EXCEPTIONS.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shared", "src")

ALLOWED = {
    "pure": set(),
    "ports": {"pure"},
    "shell": {"pure", "ports"},
    "rules": {"pure", "ports", "shell"},
    "adapters": {"pure", "ports", "shell"},
    "doubles": {"pure", "ports", "shell", "adapters"},
    "jobs": {"pure", "ports", "shell", "rules", "adapters"},
}
EVERYWHERE = {"shell::error", "shell::config", "shell::retry", "shell::telemetry"}

# (importing module prefix, imported module prefix) -> why the edge is there.
HOLDER = (
    "a held port is an enum of its implementations, not a trait object (the ports are async);"
    " its in-memory variant names the double and is compiled with the test-support feature only"
)
EXCEPTIONS = {
    ("adapters::probe", "doubles::cluster"): HOLDER,
    ("jobs::bootstrap::handler", "doubles::cluster"): HOLDER,
    ("jobs::queue", "doubles::queue"): HOLDER,
    ("ports::github::error", "adapters::github"): (
        "GithubError::TooLarge carries the archive reader's ArchiveError, whose message names"
        " the memory setting the archive reader owns"
    ),
    ("shell::metrics", "jobs::sync"): "the unit test that checks every outcome against docs/outcomes.md's table",
    ("shell::metrics", "rules::bootstrap"): "the unit test that checks every outcome against docs/outcomes.md's table",
}

REF = re.compile(r"\bcrate::(pure|ports|rules|adapters|doubles|jobs|shell)::(\w+)")


def within(path, prefix):
    """`path` is the module `prefix` or one inside it (by `::` segments, not by letters)."""
    return path == prefix or path.startswith(prefix + "::")


def references(root=ROOT):
    """Every code reference from one layer to another: (layer, module, file, line number, line,
    target module). A doc comment may point anywhere: only code counts."""
    for layer in ALLOWED:
        for d, _, fs in os.walk(os.path.join(root, layer)):
            for f in sorted(fs):
                if not f.endswith(".rs"):
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, root)
                module = rel[:-3].replace("/mod", "").replace("/", "::")
                for n, line in enumerate(open(path, encoding="utf-8"), 1):
                    if line.lstrip().startswith("//"):
                        continue
                    for m in REF.finditer(line):
                        if m.group(1) != layer:
                            yield layer, module, rel, n, line, f"{m.group(1)}::{m.group(2)}"


def excepted(module, target):
    return any(within(module, a) and within(target, b) for a, b in EXCEPTIONS)


def check(root=ROOT):
    errors = []
    for layer, module, rel, n, line, target in references(root):
        if target.split("::")[0] in ALLOWED[layer] or target in EVERYWHERE or excepted(module, target):
            continue
        errors.append(f"shared/src/{rel}:{n}: the {layer} layer imports {target} ({line.strip()})")
    return errors


def used_exceptions(root=ROOT):
    """Exceptions no import needs any more: the table must not outlive the code."""
    seen = [(module, target) for _, module, _, _, _, target in references(root)]
    return [
        f"EXCEPTIONS[({a!r}, {b!r})] is no longer needed: remove it"
        for a, b in EXCEPTIONS
        if not any(within(module, a) and within(target, b) for module, target in seen)
    ]


if __name__ == "__main__":
    problems = check() + used_exceptions()
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"layers: every import of shared/src goes down the layers ({len(EXCEPTIONS)} exceptions, each with its reason)")
