#!/usr/bin/env python3
"""Fails on what an operator reading cellbridge's logs and answers should never meet.

Usage: log_check.py DIR   (DIR = $CELLBRIDGE_LEAK_DIR, by default target/leak-capture)

DIR is the suite's capture (tests/support/leak.rs): each test process's tracing events in
tracing-subscriber's text format, with target and span list, and `== what` blocks holding what a
test captured otherwise: a handler's answer, an error's text, the output of a cellbridge binary
it ran (whose log lines, text or JSON, carry no target).

The product's lines are the events whose target is a crate of the workspace's default members
(cellbridge::..., state_sync::..., cluster_bootstrap::...), and a binary's lines at INFO or
above (without a target, the level is what tells: cellbridge logs nothing below INFO, its
dependencies' DEBUG and TRACE noise is out of scope). The product's answers are the other lines
of the blocks. Rules:
  debug-shape  Rust Debug output in a product line or answer: `Some(..)`, a `None` value,
               serde_json's `Object {..}`, the AWS SDK's `ServiceError(..)` and its kin, a struct
               `Name { field: .. }`, a variant's name written twice (`Namespace Namespace`).
               The check's compiler-style findings (`path.yaml:12: ...`) quote the user's YAML
               and are left out.
  multi-line   a product line whose message or a field goes on past the line's end: in the
               text format the next line is not a record; in JSON a value holds a line break.
  no-subject   a product WARN or ERROR naming neither the cell nor the cluster it concerns (a
               non-empty `cell` or `cluster` field of the event or of a span around it, as far as
               the line shows its spans: the Lambda's JSON shows the innermost only), nor saying
               what it concerns instead: `scope=fleet` (every cell: the dashboard, the sweep, the
               configuration, the fleet repo) or `scope=event` (an event naming no cell or
               cluster cellbridge can read).
A block a test wrote with a Debug rendering of its own (`== a test's Debug rendering: ...`, for
the leak check: no operator is shown it) is counted and left out.
Each finding names the capture file, the line and the offending text.
Exit status: 0 clean, 1 findings, 2 nothing to check (no capture: a broken wiring).
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHOWN = 400  # findings printed in full; the rest are counted per rule

TEXT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z +(TRACE|DEBUG|INFO|WARN|ERROR) (.*)$")
SPAN_NAME = re.compile(r"[A-Za-z_][\w.-]*")
TARGET = re.compile(r"([A-Za-z_]\w*(?:::\w+)*): ")
# A field of the text format: `key=value`, the value quoted (Debug of a str) or up to a space.
SUBJECT = re.compile(r'(?:^|\s)(cell|cluster|scope)=("(?:[^"\\]|\\.)*"|\S*)')
# What a line concerning no one cell or cluster says it concerns (shared/src/shell/lambda/mod.rs, `About`).
SCOPES = ("fleet", "event")
# A block a test wrote with a Debug rendering of its own (tests/support/leak.rs, TEST_DEBUG): for
# the leak check only, since no operator is shown it.
TEST_DEBUG = "== a test's Debug rendering: "
# A compiler-style finding of the strict check, as it is written in a plan, a status or a line
# of `cellbridge check`: `path.yaml:LINE[:COL]: message`, up to the end of the sentence list.
FINDING = re.compile(r"[\w./-]+\.ya?ml:\d+(?::\d+)?: [^;\"\n]*")
# What only Rust's Debug writes. Words an operator may legitimately read (a cell called
# "none", "None of ...", "EKS (ACTIVE)") do not match: a Debug shape is a CamelCase name
# glued to its parenthesis or brace, or a bare None in a value's place.
DEBUG_SHAPES = [
    ("Option's Some(..)", re.compile(r"\bSome\(")),
    ("None as a value", re.compile(r"(?:(?<=[=(\[])|(?<=, ))None(?=$|[\s,)}\]])|(?<=: )None(?=$|[,)}\]])")),
    ("Result's Ok(..)/Err(..)", re.compile(r"\b(?:Ok|Err)\((?!\))")),
    ("serde_json's Debug", re.compile(r"\b(?:Object \{|Array \[|String\(\"|Number\(-?\d|Bool\((?:true|false)\))")),
    ("the AWS SDK's error Debug", re.compile(
        r"\b(?:ServiceError|DispatchFailure|ConnectorError|ConstructionFailure|TimeoutError|ResponseError|ErrorMetadata|SdkError)\b")),
    ("a struct's Debug", re.compile(r"\b[A-Z][A-Za-z0-9_]*(?:::[A-Z]\w*)* \{ (?:[a-z_][a-z0-9_]*: |\.\. \})|\bError \{")),
    ("an enum's Debug", re.compile(r"\b[A-Z][a-z][A-Za-z0-9]*\((?:[A-Z][a-z][A-Za-z0-9]*(?:\)| ?[({])|\")")),
    # `{kind:?} {object}`, or `phase=Namespace object=Namespace flux-system`.
    ("a variant's name twice", re.compile(r"\b([A-Z][a-z]+(?:[A-Z][a-z]+)*) (?:[a-z_][\w.]*=\"?)?\1\b")),
]


def manifest_names(path, sections):
    """The `name = "..."` values of the given sections of a Cargo manifest (`package`, `lib`,
    `[[bin]]`...), read line by line: Python before 3.11 has no TOML reader."""
    names, section = [], None
    with open(path, encoding="utf-8") as f:
        for line in f:
            header = re.match(r"^\s*\[\[?([^\]]+)\]\]?\s*$", line)
            if header:
                section = header.group(1).strip()
                continue
            m = re.match(r'^\s*name\s*=\s*"([^"]+)"', line)
            if m and section in sections:
                names.append(m.group(1))
    return names


def crates():
    """(product crates, every crate that can be a target): the workspace's default members
    with their binaries are the product; Cargo.lock names the rest."""
    with open(os.path.join(ROOT, "Cargo.toml"), encoding="utf-8") as f:
        ws = f.read()
    m = re.search(r"^default-members\s*=\s*\[(.*?)\]", ws, re.M | re.S) or re.search(r"^members\s*=\s*\[(.*?)\]", ws, re.M | re.S)
    product = set()
    for member in re.findall(r'"([^"]+)"', m.group(1)):
        product.update(manifest_names(os.path.join(ROOT, member, "Cargo.toml"), ("package", "lib", "bin")))
    known = set(product) | set(manifest_names(os.path.join(ROOT, "Cargo.lock"), ("package",)))
    norm = lambda names: {n.replace("-", "_") for n in names}  # noqa: E731
    return norm(product), norm(known)


PRODUCT, KNOWN = crates()


def braced_end(s, i):
    """The index after the `}` closing the `{` at s[i], quotes respected; None if it never
    closes. A `%` field's unquoted text may hold a lone quote: then braces are simply counted."""
    for quotes in (True, False):
        depth, in_str, esc = 0, False, False
        for j in range(i, len(s)):
            c = s[j]
            if in_str:
                if esc:
                    esc = False
                elif c == "\\":
                    esc = True
                elif c == '"':
                    in_str = False
            elif c == '"' and quotes:
                in_str = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    return j + 1
    return None


def parse_text(rest):
    """A text-format line after its level: ([(span, its fields)], target or None, message and
    fields). tracing-subscriber writes `a{k=v}:b: target: message k=v`: the spans joined by
    `:` up to the first `: `, then the target (when the format has one) and `: `."""
    spans, i, closed = [], 0, False
    while True:
        m = SPAN_NAME.match(rest, i)
        if not m:
            break
        j, fields = m.end(), ""
        if rest.startswith("{", j):
            k = braced_end(rest, j)
            if k is None:
                break
            fields, j = rest[j + 1:k - 1], k
        if rest.startswith("::", j) or not rest.startswith(":", j):
            break
        spans.append((m.group(), fields))
        if rest.startswith(": ", j):
            i, closed = j + 2, True
            break
        i = j + 1
    if not closed:
        spans, i = [], 0
    m = TARGET.match(rest, i)
    if m and m.group(1).split("::")[0] in KNOWN:
        return spans, m.group(1), rest[m.end():]
    if len(spans) == 1 and not spans[0][1] and spans[0][0] in KNOWN:
        return [], spans[0][0], rest[i:]  # a crate's root target (`cellbridge: message`)
    return spans, None, rest[i:]


def subjects(text):
    """The non-empty cell, cluster and scope fields of a text-format field list."""
    out = {}
    for key, value in SUBJECT.findall(text):
        value = value[1:-1] if value.startswith('"') and len(value) > 1 else value
        if value:
            out.setdefault(key, value)
    return out


def json_record(line):
    if not line.startswith("{"):
        return None
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if isinstance(rec, dict) and isinstance(rec.get("level"), str) and isinstance(rec.get("fields"), dict):
        return rec
    return None


def is_product(target, level):
    if target is None:
        return level not in ("TRACE", "DEBUG")
    return target.split("::")[0] in PRODUCT


def excerpt(text, at=0, width=160):
    start = max(0, at - 40)
    s = text[start:start + width].replace("\n", "\\n")
    return ("..." if start else "") + s + ("..." if start + width < len(text) else "")


class Checker:
    def __init__(self, secrets=()):
        self.findings = []  # (file, line, rule, text)
        self.counts = {"product lines": 0, "answer lines": 0, "test Debug lines": 0}
        self.secrets = [s for s in secrets if len(s) >= 8]

    def flag(self, where, rule, text):
        for s in self.secrets:
            text = text.replace(s, "<a registered secret>")
        self.findings.append((where[0], where[1], rule, text))

    def debug_shapes(self, where, text):
        text = FINDING.sub("", text)
        for what, pattern in DEBUG_SHAPES:
            m = pattern.search(text)
            if m:
                self.flag(where, f"debug-shape ({what})", excerpt(text, m.start()))
                return  # one finding a line: the first shape is enough to find the rest

    def no_subject(self, where, level, found, message):
        if level not in ("WARN", "ERROR") or FINDING.match(message):
            return
        if found.get("cell") or found.get("cluster") or found.get("scope") in SCOPES:
            return
        why = f"scope={found['scope']} is not one of {', '.join(SCOPES)}" if "scope" in found else "neither cell nor cluster"
        self.flag(where, f"no-subject ({why})", f"{level} {excerpt(message, 0)}")

    def text_record(self, where, level, spans, body):
        self.counts["product lines"] += 1
        self.debug_shapes(where, body)
        found = subjects(body)
        for _, fields in spans:
            for k, v in subjects(fields).items():
                found.setdefault(k, v)
        self.no_subject(where, level, found, body)

    def json_record(self, where, rec):
        self.counts["product lines"] += 1
        fields = rec["fields"]
        message = str(fields.get("message", ""))
        # As the text format writes them, so that a shape spanning two fields shows too.
        self.debug_shapes(where, " ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in fields.items()))
        for key, value in fields.items():
            if not isinstance(value, str):
                continue
            if "\n" in value or "\r" in value:
                self.flag(where, f"multi-line (field {key} holds a line break)", excerpt(value))
        found = {}
        for span in [rec.get("span")] + list(rec.get("spans") or []) + [fields]:
            if isinstance(span, dict):
                for k in ("cell", "cluster", "scope"):
                    if span.get(k) not in (None, ""):
                        found[k] = str(span[k])
        self.no_subject(where, rec["level"], found, message)

    def answer(self, where, line):
        self.counts["answer lines"] += 1
        self.debug_shapes(where, line)

    def scan(self, lines, name):
        # After a record: ("harness"|"binary"|"json", is the product's, line of the record).
        last = None
        test_debug = False  # in a block a test wrote for the leak check alone
        spilled = None  # the product record whose spill was reported
        for n, raw in enumerate(lines, 1):
            line = raw.rstrip("\n")
            where = (name, n)
            if line.startswith("== "):
                last, test_debug = None, line.startswith(TEST_DEBUG)
                continue
            m = TEXT.match(line)
            if m:
                level, rest = m.groups()
                spans, target, body = parse_text(rest)
                own = is_product(target, level)
                # The capture's own lines (tests/support/leak.rs) always carry a target and end
                # a block; a binary's output inside a block never does.
                test_debug = test_debug and target is None
                last = ("harness" if target else "binary", own, n)
                if own:
                    self.text_record(where, level, spans, body)
                continue
            rec = json_record(line)
            if rec is not None:
                target = rec.get("target")
                if is_product(target, rec["level"]):
                    self.json_record(where, rec)
                last = ("json", False, n)  # a JSON record ends on its line
                continue
            kind, own, at = last if last else (None, False, 0)
            if kind == "harness":
                # Only a record or a block's header may follow a line of the capture's own.
                if own and spilled != at:
                    spilled = at
                    self.flag((name, at), "multi-line (the next line is not a record)",
                              f"line {n}: {excerpt(line)}")
                continue
            if kind == "binary" and (line[:1].isspace() or re.search(r"\s[a-z_][\w.]*=\S", line)):
                # An indented line or a field list goes on with the record above; a binary's
                # plain output (the command line's last error line, its stdout) is neither.
                if own and spilled != at:
                    spilled = at
                    self.flag((name, at), "multi-line (the next line goes on with it)", f"line {n}: {excerpt(line)}")
                continue
            last = None
            if test_debug:
                self.counts["test Debug lines"] += 1
            elif line.strip():
                self.answer(where, line)


def load_secrets(root):
    out = []
    for dirpath, _, files in os.walk(root):
        for name in files:
            if name.startswith("secrets") and name.endswith(".jsonl"):
                with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                    for line in f:
                        try:
                            v = json.loads(line).get("value")
                        except (ValueError, AttributeError):
                            continue
                        if isinstance(v, str):
                            out.append(v)
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = argv[1]
    if not os.path.isdir(root):
        print(f"log check: {root} does not exist: nothing was captured (is CELLBRIDGE_LEAK_DIR set?)")
        return 2
    checker = Checker(load_secrets(root))
    files = 0
    for dirpath, _, names in sorted(os.walk(root)):
        for name in sorted(names):
            if name.startswith("secrets") and name.endswith(".jsonl"):
                continue
            path = os.path.join(dirpath, name)
            files += 1
            with open(path, encoding="utf-8", errors="replace") as f:
                checker.scan(f, os.path.relpath(path, root))
    per_rule = {}
    for i, (f, n, rule, text) in enumerate(checker.findings):
        per_rule[rule.split(" ")[0]] = per_rule.get(rule.split(" ")[0], 0) + 1
        if i < SHOWN:
            print(f"LOG: {f}:{n}: {rule}: {text}")
    if len(checker.findings) > SHOWN:
        print(f"log check: {len(checker.findings) - SHOWN} more findings not printed")
    c = checker.counts
    print(f"log check: {c['product lines']} product log lines and {c['answer lines']} answer lines in {files} capture files "
          f"({c['test Debug lines']} lines of tests' own Debug renderings left out); "
          f"{len(checker.findings)} findings" + "".join(f", {k} {v}" for k, v in sorted(per_rule.items())))
    if checker.findings:
        return 1
    if not c["product lines"]:
        print("log check: no product log line was captured (is the capture wired?)")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
