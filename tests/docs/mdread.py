"""The one reader of the project's markdown for the docs tests: headings and the anchors GitHub
gives them, links, fenced blocks with the marker line before them, and tables by their header.
Every check of a page in `docs/` goes through it, so a table or a heading is read one way."""

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def pages():
    """README.md and every page of docs/."""
    return [README] + sorted(DOCS.glob("*.md"))


def slug(title):
    """The anchor GitHub's renderer gives a heading: lower case, punctuation dropped but `-` and
    `_`, spaces to `-` (github/cmark-gfm's anchors, as github.com renders them)."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", title.strip())
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def _outside_code(text):
    """Lines outside fenced code, with their numbers."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)
                continue
            if line.strip().startswith(fence):
                fence = None
                continue
        if fence is None:
            yield n, line


def headings(text):
    """(level, title, anchor), in order; a repeated anchor gets `-1`, `-2`, as on GitHub."""
    seen, out = {}, []
    for _, line in _outside_code(text):
        m = re.match(r"^(#{1,6}) (.+?)\s*#*$", line)
        if not m:
            continue
        a = slug(m.group(2))
        k = seen.get(a, 0)
        seen[a] = k + 1
        out.append((len(m.group(1)), m.group(2), a if k == 0 else f"{a}-{k}"))
    return out


def anchors(path):
    return {a for _, _, a in headings(Path(path).read_text())}


def links(text):
    """(line, target) of every markdown link outside code."""
    for n, line in _outside_code(text):
        for m in re.finditer(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", line)):
            yield n, m.group(1)


@dataclass
class Block:
    path: Path
    line: int  # the opening fence's line
    lang: str
    text: str
    marker: "str | None"  # the `<!-- ... -->` right above the fence, if any


def blocks(path):
    """Every fenced block of a page, with the HTML comment on the line just above it."""
    lines = Path(path).read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+)(\S*)", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.groups()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = "\n".join(l[len(indent):] if l.startswith(indent) else l for l in lines[i + 1 : j])
        above = lines[i - 1].strip() if i > 0 else ""
        marker = above[4:-3].strip() if above.startswith("<!--") and above.endswith("-->") else None
        out.append(Block(Path(path), i + 1, lang, body, marker))
        i = j + 1
    return out


def table(text, first_header):
    """The rows of the first table whose header's first cell is `first_header`, as dicts by
    header (cells split on ` | `, backslash-escaped pipes kept)."""
    rows, header = [], None
    for _, line in _outside_code(text):
        if header is None:
            if line.startswith("| ") and split_row(line)[0] == first_header:
                header = split_row(line)
            continue
        if re.match(r"^\|[-| :]+\|$", line):
            continue
        if not line.startswith("|"):
            break
        cells = split_row(line)
        assert len(cells) == len(header), f"a row of {len(cells)} cells under {header}: {line[:80]}"
        rows.append(dict(zip(header, cells)))
    assert header, f"no table whose first column is {first_header!r}"
    return rows


def split_row(line):
    """A table row's cells: split on the pipes markdown splits on (not an escaped `\\|`)."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [c.strip() for c in re.split(r"(?<!\\)\|", inner)]


def section(text, title):
    """The text under the heading `title` up to the next heading of the same or a higher level
    (code blocks included; a `#` line inside one is no heading)."""
    code = {n for n, _ in _outside_code(text)}
    out, level = [], None
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^(#{1,6}) (.+?)\s*$", line) if n in code else None
        if level is None:
            if m and m.group(2) == title:
                level = len(m.group(1))
            continue
        if m and len(m.group(1)) <= level:
            break
        out.append(line)
    assert level is not None, f"no section {title!r}"
    return "\n".join(out)
