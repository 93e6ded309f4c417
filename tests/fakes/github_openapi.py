"""GitHub's official OpenAPI description as a checker for the fake GitHub (`github_fake.py`).

The fake checks every request it receives against the description, and its own answers against
the description's response schemas, so that neither cellbridge nor the fake can drift from what
GitHub documents. The description is the npm package `@octokit/openapi` (non-dereferenced files:
`api.github.com.json` for github.com, `ghes-3.19.json` for GitHub Enterprise Server 3.19); only
the standard library and `jsonschema` (with `referencing`) are used.

    desc = Description.load(".../generated/api.github.com.json", "api.github.com")
    op, violations = desc.check_request("PATCH", "/repos/o/r/git/refs/heads/main", "",
                                        headers, body)
    op.check_response(200, "application/json; charset=utf-8", answer)
    answer = op.complete_response(200, answer)   # fills what GitHub requires but the fake omits

Loading parses the JSON file and indexes the routes: about 0.3-0.4 s for either description
(13 MB for github.com, of which json.load is 0.2 s). Everything else (converted schemas,
validators, placeholders) is built per operation on first use and memoised, so no cache file is
needed.

Where a rule comes from is said next to it. "Looked up" means the text was read while writing
this module (GitHub's docs in the github/docs repository, issue threads quoting GitHub's answers).

How OpenAPI 3.0 becomes JSON Schema (Draft 2020-12, which `jsonschema` validates):
- `nullable: true` adds "null" to `type` (or wraps the schema in `anyOf: [{type: null}, ...]`
  when it has no plain type), and `null` to an `enum` (OpenAPI 3.0.3, Schema Object, `nullable`).
- `$ref: "#/components/schemas/X"` becomes a `urn:cellbridge-openapi:...` reference resolved
  through a `referencing.Registry` holding the converted component (memoised per variant).
- Annotation-only and OpenAPI-only keywords (`example`, `examples`, `description`, `title`,
  `x-*`, `discriminator`, `readOnly`, `writeOnly`, `deprecated`, `externalDocs`, `xml`,
  `default`) are dropped.
- Request bodies are closed: an object schema with `properties` that does not state
  `additionalProperties` gets `unevaluatedProperties: false`. Draft 2020-12's
  `unevaluatedProperties` sees the properties evaluated by `allOf` branches and by the `oneOf` /
  `anyOf` branch that matched, so a schema is closed once, where it is used, and the branches of
  an `allOf` are left open (closing each would reject the other branches' properties). GitHub
  itself rejects undocumented body fields with a 422 ("... is not a permitted key", see
  `Operation._check_body` for the answer used here).
- Response schemas stay open (GitHub adds fields without a new API version: "Adding a response
  field" is an additive change, https://docs.github.com/en/rest/about-the-rest-api/api-versions)
  and their `oneOf` is checked as `anyOf`: the description has overlapping `oneOf` branches
  (e.g. `validation-error.errors[].value` is `oneOf` three nullable schemas, so `null` matches
  all three) and a response check must not reject what GitHub itself sends. Request bodies keep
  `oneOf` as written.
- `x-github-breaking-changes` (github.com only): the description is written for API version
  2022-11-28 and lists, per operation or component, the patches that give 2026-03-10's shapes
  (JSON Merge Patch, RFC 7396, when the patch is an object; JSON Patch, RFC 6902, when it is a
  list). A request that asks for 2026-03-10 is checked against the patched description;
  `check_response` / `complete_response` take `api_version=` for the same.
"""
from __future__ import annotations

import copy
import json
import math
import re
import threading
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

__all__ = ["SUPPORTED_API_VERSIONS", "DEFAULT_API_VERSION", "Violation", "Description", "Operation"]

# The REST API versions each flavor serves.
# https://docs.github.com/en/rest/about-the-rest-api/api-versions ("Supported API versions"):
# github.com supports 2026-03-10 and 2022-11-28 (2026-03-10 announced in
# https://github.blog/changelog/2026-03-12-rest-api-version-2026-03-10-is-now-available, looked
# up); GitHub Enterprise Server 3.19 supports 2022-11-28 only
# (https://docs.github.com/en/enterprise-server@3.19/rest/about-the-rest-api/api-versions).
# The ghes-3.19 description carries no `x-github-breaking-changes` at all, which agrees.
SUPPORTED_API_VERSIONS: dict[str, tuple[str, ...]] = {
    "api.github.com": ("2022-11-28", "2026-03-10"),
    "ghes": ("2022-11-28",),
}
# "Requests without the X-GitHub-Api-Version header will default to use the 2022-11-28 version"
# (https://docs.github.com/en/rest/about-the-rest-api/api-versions, "Specifying an API version").
DEFAULT_API_VERSION = "2022-11-28"

DOCS_API_VERSIONS = "https://docs.github.com/en/rest/about-the-rest-api/api-versions"
DOCS_USER_AGENT = "https://docs.github.com/en/rest/using-the-rest-api/getting-started-with-the-rest-api#user-agent"
DOCS_CLIENT_ERRORS = "https://docs.github.com/en/rest/overview/resources-in-the-rest-api#client-errors"
DOCS_MEDIA_TYPES = "https://docs.github.com/en/rest/using-the-rest-api/getting-started-with-the-rest-api#media-types"

# Media types every operation accepts in `Accept`, besides the ones it documents.
# "The most common media types supported by the GitHub REST API are application/vnd.github+json
# and application/json." (DOCS_MEDIA_TYPES, github/docs getting-started-with-the-rest-api.md,
# looked up.) "application/vnd.github.v3+json" is the older spelling with the version: "In the
# past, we recommended including v3 in your Accept header. This is no longer required and will
# have no impact on your API requests." (the media types page of GHES 3.4,
# https://docs.github.com/enterprise-server@3.4/rest/overview/media-types, looked up).
# "*/*" and "application/*" accept anything (RFC 9110 §12.5.1). Several media types may be
# listed, comma-separated ("Accept: application/vnd.github+json,application/vnd.github.diff",
# same getting-started page): one that this operation serves is enough.
BASIC_ACCEPT = frozenset({"application/vnd.github+json", "application/json", "*/*", "application/*"})
# A custom media type named in an operation's description, e.g. "application/vnd.github.sha" for
# repos/get-commit or "application/vnd.github.raw+json" for pulls/get.
_VND_IN_TEXT = re.compile(r"application/vnd\.github\.[\w.+-]+")


@dataclass
class Violation:
    """One way a request (or one of the fake's answers) departs from the description.

    check: "route", "path-param", "query", "body", "content-type", "accept", "api-version",
           "user-agent" or "response".
    detail: for people: names the operation, the field, parameter or header and what is wrong.
            It never carries the value of an Authorization header (no check reads that header).
    status / message: what GitHub answers in this case (the JSON error body's `message`); for a
           "response" violation (the fake's own answer is wrong) 500 "Server Error".
    """

    check: str
    detail: str
    status: int
    message: str


# --- small helpers ------------------------------------------------------------------------------

def _header_lines(headers, name: str) -> list[str]:
    """Every line of header `name` (case-insensitive, RFC 9110 §5.1), values trimmed of OWS."""
    name = name.lower()
    return [str(v).strip() for k, v in headers or () if str(k).lower() == name]


def _media_type(value: str | None) -> str | None:
    """`type/subtype` of a Content-Type or media range, lower-cased, without parameters
    (RFC 9110 §8.3.1: type, subtype and parameter names are case-insensitive)."""
    if value is None:
        return None
    mt = value.split(";", 1)[0].strip().lower()
    return mt or None


def _normalize_vnd(mt: str) -> str:
    """`application/vnd.github.v3.raw+json` -> `application/vnd.github.raw+json` and
    `application/vnd.github.v3+json` -> `application/vnd.github+json`: the version in a GitHub
    media type "is no longer required and will have no impact" (media types doc, above)."""
    if mt.startswith("application/vnd.github.v3"):
        rest = mt[len("application/vnd.github.v3"):]
        if rest.startswith("."):
            return "application/vnd.github." + rest[1:]
        return "application/vnd.github" + rest
    return mt


def _json_path(path) -> str:
    out = "$"
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _json_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _short(v, n=120) -> str:
    s = v if isinstance(v, str) else repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def _show(v, n=60) -> str:
    """A JSON value as JSON text (strings quoted), shortened."""
    try:
        text = json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(v)
    return _short(text, n)


def _reject_constant(c):
    raise ValueError(f"{c} is not JSON")  # RFC 8259 §6: NaN and Infinity are not permitted


def _pointer_tokens(pointer: str) -> list[str]:
    # RFC 6901 §4: ~1 is "/", ~0 is "~"
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _merge_patch(target: dict, patch: dict) -> None:
    """RFC 7396 JSON Merge Patch, in place: null removes a member, objects merge, the rest
    replaces (a `required` list is replaced whole, which is how the description uses it)."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            _merge_patch(target[k], v)
        else:
            target[k] = copy.deepcopy(v)


def _json_patch(target, ops: list) -> None:
    """RFC 6902 JSON Patch, in place; the description uses "remove" and "replace" ("add" too
    for completeness). Operations apply in order (§3), so later indices see earlier removals."""
    for op in ops:
        tokens = _pointer_tokens(op["path"])
        parent = target
        for t in tokens[:-1]:
            parent = parent[int(t)] if isinstance(parent, list) else parent[t]
        last = tokens[-1]
        kind = op["op"]
        if isinstance(parent, list):
            idx = len(parent) if last == "-" else int(last)
            if kind == "remove":
                del parent[idx]
            elif kind == "replace":
                parent[idx] = copy.deepcopy(op["value"])
            elif kind == "add":
                parent.insert(idx, copy.deepcopy(op["value"]))
        else:
            if kind == "remove":
                parent.pop(last, None)
            elif kind in ("replace", "add"):
                parent[last] = copy.deepcopy(op["value"])


def _has_breaking(node) -> bool:
    if isinstance(node, dict):
        return "x-github-breaking-changes" in node or any(_has_breaking(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_breaking(v) for v in node)
    return False


def _apply_breaking(node, version: str) -> None:
    """Applies, in place and bottom-up, every `x-github-breaking-changes` entry whose version is
    at most `version` (the versions are ISO dates, so they compare as strings)."""
    if isinstance(node, dict):
        for v in node.values():
            _apply_breaking(v, version)
        for change in node.pop("x-github-breaking-changes", None) or ():
            if change.get("version", "9999") > version:
                continue
            patch = change.get("patch")
            if isinstance(patch, dict):
                _merge_patch(node, patch)
            elif isinstance(patch, list):
                _json_patch(node, patch)
    elif isinstance(node, list):
        for v in node:
            _apply_breaking(v, version)


# Schema keywords kept when converting: the ones that validate, plus `format` (not asserted by
# the validator, used by complete_response for placeholders).
_KEEP = frozenset({
    "type", "enum", "const", "required", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems",
    "minProperties", "maxProperties", "format",
})
_COMPOSITE = ("allOf", "anyOf", "oneOf", "not", "$ref")
_URN = "urn:cellbridge-openapi:"
_PLACEHOLDER_STRINGS = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "uri": "https://github.example/placeholder",
    "uri-template": "https://github.example/placeholder",
    "email": "placeholder@example.invalid",
}


def _allow_null(s: dict) -> dict:
    """OpenAPI 3.0.3 `nullable: true`: "A true value adds "null" to the allowed values"."""
    if any(k in s for k in _COMPOSITE):
        return {"anyOf": [{"type": "null"}, s]}
    if "type" in s:
        t = s["type"]
        types = list(t) if isinstance(t, list) else [t]
        if "null" not in types:
            s["type"] = types + ["null"]
    if "enum" in s and None not in s["enum"]:
        s["enum"] = list(s["enum"]) + [None]
    return s


class _Route:
    __slots__ = ("template", "regex", "names", "key", "ops")

    def __init__(self, template: str, multi: set[str]):
        self.template = template
        parts = re.split(r"\{([^}]+)\}", template)
        rx, names, literal, n_multi = "", [], 0, 0
        for i, part in enumerate(parts):
            if i % 2 == 0:
                rx += re.escape(part)
                literal += len(part)
            else:
                names.append(part)
                # A parameter is one path segment, except the ones the description marks
                # `x-multi-segment: true` (git refs like heads/cellbridge/prod-eu-west-1, commit
                # refs, file paths), which may span several.
                if part in multi:
                    rx += "(.+)"
                    n_multi += 1
                else:
                    rx += "([^/]+)"
        self.regex = re.compile(rx)
        self.names = names
        segs = [s for s in template.split("/") if s]
        # The most specific template wins: more literal segments, then more literal characters,
        # then fewer multi-segment parameters.
        self.key = (sum(1 for s in segs if "{" not in s), literal, -n_multi)
        self.ops: dict[str, Operation] = {}


# --- the description -----------------------------------------------------------------------------

class Description:
    """One flavor's OpenAPI description: routes, operations and converted schemas."""

    def __init__(self, doc: dict, flavor: str, path: str = ""):
        if flavor not in SUPPORTED_API_VERSIONS:
            raise ValueError(f"unknown flavor {flavor!r}: expected one of {sorted(SUPPORTED_API_VERSIONS)}")
        self.flavor = flavor
        self.path = path
        self.versions = SUPPORTED_API_VERSIONS[flavor]
        self._doc = doc
        self._components = doc.get("components", {})
        self.prefix = self._server_prefix(doc)
        self._lock = threading.RLock()
        self._patched: dict = {}        # (kind, name, version) -> raw node patched for the version
        self._converted: dict = {}      # uri -> converted component schema
        self._registered: set = set()   # uris in self._registry
        self._registry = Registry()
        self._placeholders: dict = {}   # uri -> placeholder value
        self._ops: dict[str, Operation] = {}
        self._routes: dict[str, list[_Route]] = {}
        for template, item in doc.get("paths", {}).items():
            self._add_route(template, item)
        for routes in self._routes.values():
            routes.sort(key=lambda r: r.key, reverse=True)

    @classmethod
    def load(cls, path: str, flavor: str) -> "Description":
        with open(path, "rb") as f:
            doc = json.load(f)
        return cls(doc, flavor, path)

    @staticmethod
    def _server_prefix(doc: dict) -> str:
        servers = doc.get("servers") or [{"url": ""}]
        url = servers[0].get("url", "")
        for name, var in (servers[0].get("variables") or {}).items():
            url = url.replace("{" + name + "}", str(var.get("default", name)))
        if "://" not in url:
            url = "http://host" + url
        return urlsplit(url).path.rstrip("/")

    def _add_route(self, template: str, item: dict) -> None:
        item_params = item.get("parameters") or []
        multi = set()
        ops = []
        for method, raw in item.items():
            if method not in ("get", "put", "post", "delete", "patch", "head", "options", "trace"):
                continue
            params = self._merge_params(item_params, raw.get("parameters") or [])
            for p in params:
                if p.get("in") == "path" and p.get("x-multi-segment"):
                    multi.add(p["name"])
            ops.append((method.upper(), raw, params))
        route = _Route(template, multi)
        for method, raw, params in ops:
            op = Operation(self, method, template, raw, params)
            route.ops[method] = op
            self._ops[op.id] = op
        segs = template.split("/")
        first = segs[1] if len(segs) > 1 and "{" not in segs[1] else "*"
        self._routes.setdefault(first, []).append(route)

    def _merge_params(self, item_params, op_params) -> list[dict]:
        """Path-item parameters overridden by the operation's, by (name, in) (OpenAPI 3.0.3,
        Operation Object, `parameters`)."""
        out: dict = {}
        for p in list(item_params) + list(op_params):
            p = self.resolve(p)
            out[(p.get("name"), p.get("in"))] = p
        return list(out.values())

    def resolve(self, node):
        """Follows local `$ref`s ("#/components/...") in the raw description."""
        seen = 0
        while isinstance(node, dict) and "$ref" in node and seen < 20:
            ref = node["$ref"]
            if not ref.startswith("#/"):
                raise ValueError(f"non-local $ref {ref!r}")
            target = self._doc
            for t in _pointer_tokens(ref[1:]):
                target = target[t]
            node, seen = target, seen + 1
        return node

    # --- operations and routes ------------------------------------------------------------------

    def operation(self, op_id: str) -> "Operation | None":
        return self._ops.get(op_id)

    @property
    def operations(self) -> "dict[str, Operation]":
        return dict(self._ops)

    def _candidates(self, raw_path: str):
        """(route, groups) for every template the path matches, most specific first."""
        if not raw_path.startswith("/"):
            return []
        first = raw_path.split("/")[1]
        out = []
        for bucket in (self._routes.get(first, ()), self._routes.get("*", ())):
            for route in bucket:
                m = route.regex.fullmatch(raw_path)
                if m:
                    out.append((route, m.groups()))
        out.sort(key=lambda rg: rg[0].key, reverse=True)
        return out

    def match(self, method: str, raw_path: str) -> "tuple[Operation, dict[str, str]] | None":
        """The documented operation for `method` and `raw_path` (after the prefix, without the
        query, still percent-encoded), with its path parameters percent-decoded; None if no
        template documents that method for that path."""
        method = method.upper()
        if method == "HEAD":
            # "HEAD: Can be issued against any resource to get just the HTTP header info."
            # (DOCS_CLIENT_ERRORS page, "HTTP verbs", looked up)
            method = "GET"
        raw_path = raw_path.split("?", 1)[0]
        for route, groups in self._candidates(raw_path):
            op = route.ops.get(method)
            if op is not None:
                return op, {n: unquote(g) for n, g in zip(route.names, groups)}
        return None

    # --- request checks -------------------------------------------------------------------------

    def check_request(self, method: str, raw_path: str, query: str, headers, body: bytes | None):
        """Checks one request: `raw_path` after the prefix, without the query, still
        percent-encoded; `query` the raw query string; `headers` every header line as received
        ((name, value) pairs, duplicates kept); `body` the raw bytes (None or b"" for none).
        Returns (operation or None when no route matches, violations). The violations come in
        the order the checks run - User-Agent, API version, route, path parameters, Accept,
        query, Content-Type, body - and the first is the one to answer with."""
        headers = list(headers or ())
        violations: list[Violation] = []
        violations += self._check_user_agent(headers)
        version, v = self._check_api_version(headers)
        violations += v
        raw_path = raw_path.split("?", 1)[0]
        m = self.match(method, raw_path)
        if m is None:
            violations.append(self._route_violation(method, raw_path))
            return None, violations
        op, params = m
        violations += op._check_path_params(params, version)
        violations += op._check_accept(headers)
        violations += op._check_query(query or "", version)
        if isinstance(body, str):
            body = body.encode()
        violations += op._check_body(headers, body, version)
        return op, violations

    def _route_violation(self, method: str, raw_path: str) -> Violation:
        # GitHub answers 404 {"message": "Not Found"} for a path it has no route for, and also for
        # a documented path with a method it does not serve there (no doc page states it; it is
        # GitHub's answer as clients see it, and what the fake already does).
        known = sorted({m for route, _ in self._candidates(raw_path) for m in route.ops})
        if known:
            templates = sorted({route.template for route, _ in self._candidates(raw_path)})
            detail = (f"{method.upper()} {raw_path}: the description documents only {', '.join(known)} "
                      f"for {' / '.join(templates)}")
        else:
            detail = f"{method.upper()} {raw_path}: no operation in the {self.flavor} description matches this path"
        return Violation("route", detail, 404, "Not Found")

    def _check_user_agent(self, headers) -> list[Violation]:
        # "All API requests must include a valid User-Agent header ... Requests with no
        # User-Agent header will be rejected. If you provide an invalid User-Agent header, you
        # will receive a 403 Forbidden response." (DOCS_USER_AGENT; github/docs
        # content/rest/using-the-rest-api/getting-started-with-the-rest-api.md, looked up. That
        # section is rendered for github.com and GHEC only, not for GHES; the rule is applied to
        # both flavors here so the product keeps sending one everywhere.) GitHub's own
        # wording for a request without one (quoted in gitlab-org/gitlab!43852, looked up) is
        # "Request forbidden by administrative rules. Please make sure your request has a
        # User-Agent header (...)" (sent as text/plain there; here as the JSON message).
        lines = _header_lines(headers, "user-agent")
        msg = f"Request forbidden by administrative rules. Please make sure your request has a User-Agent header ({DOCS_USER_AGENT})."
        if not lines:
            return [Violation("user-agent", "the request has no User-Agent header", 403, msg)]
        if len(lines) > 1:
            # User-Agent is one product list, not a comma-separated list (RFC 9110 §10.1.5), so a
            # sender must not split it over several lines (RFC 9110 §5.3).
            return [Violation("user-agent", f"the request has {len(lines)} User-Agent lines; exactly one is allowed", 403, msg)]
        if not lines[0]:
            return [Violation("user-agent", "the User-Agent header is empty", 403, msg)]
        return []

    def _check_api_version(self, headers) -> tuple[str, list[Violation]]:
        lines = _header_lines(headers, "x-github-api-version")
        if not lines:
            return DEFAULT_API_VERSION, []  # missing: GitHub uses 2022-11-28 (DOCS_API_VERSIONS)
        # A recipient may combine field lines of one name into one value, "separated by a comma
        # and optional whitespace" (RFC 9110 §5.3); GitHub does, then checks that value, so two
        # lines "2022-11-28" give "2022-11-28, 2022-11-28", which is no version.
        value = ", ".join(lines)
        if value in self.versions:
            return value, []
        # A value that is no API version at all gets 400 Bad Request with this message, quoted
        # from GitHub in expipiplus1/update-nix-fetchgit#79 (looked up): 'The version you
        # specified in the "X-GitHub-API-Version" request header, "v3", is not a supported
        # version. The following versions are currently supported: "2022-11-28" (most recent).'
        # (How GitHub lists two versions is not quoted anywhere; newest first is our guess.)
        # DOCS_API_VERSIONS (github/docs content/rest/about-the-rest-api/api-versions.md, looked
        # up) adds that a version whose support has ended gets 410 Gone (its older translations
        # said 400); no version has ended yet (2022-11-28 is the oldest and still supported), so
        # every unsupported value here is of the first kind.
        supported = sorted(self.versions, reverse=True)
        listed = ", ".join(f'"{v}"' + (" (most recent)" if i == 0 else "") for i, v in enumerate(supported))
        message = (f'The version you specified in the "X-GitHub-API-Version" request header, "{_short(value, 60)}", '
                   f"is not a supported version. The following versions are currently supported: {listed}.")
        how = f"{len(lines)} lines joined" if len(lines) > 1 else "value"
        detail = (f"X-GitHub-Api-Version {how} {_short(value, 60)!r} is not one of {', '.join(self.versions)} "
                  f"({self.flavor})")
        return DEFAULT_API_VERSION, [Violation("api-version", detail, 400, message)]

    # --- schemas --------------------------------------------------------------------------------

    def _patched_node(self, kind: str, name: str, raw, version: str):
        """`raw` as it is for `version` (x-github-breaking-changes applied), memoised."""
        if version <= DEFAULT_API_VERSION:
            return raw
        key = (kind, name, version)
        with self._lock:
            if key not in self._patched:
                node = raw
                if _has_breaking(raw):
                    node = copy.deepcopy(raw)
                    _apply_breaking(node, version)
                self._patched[key] = node
            return self._patched[key]

    def _component_schema(self, name: str, version: str):
        raw = self._components.get("schemas", {}).get(name)
        if raw is None:
            raise KeyError(f"#/components/schemas/{name} is not in the description")
        return self._patched_node("schema", name, raw, version)

    def _uri(self, version: str, variant: str, name: str) -> str:
        return f"{_URN}{version}:{variant}:{name}"

    def convert(self, node, version: str, mode: str, close: bool):
        """An OpenAPI 3.0 schema as JSON Schema 2020-12 (see the module doc). mode "req" closes
        object schemas that are in a closable place (`close`), mode "resp" leaves them open."""
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            return {}
        if "$ref" in node:
            ref = node["$ref"]
            prefix = "#/components/schemas/"
            if not ref.startswith(prefix):
                return self.convert(self.resolve(node), version, mode, close)
            variant = "r" if mode == "resp" else ("qc" if close else "qo")
            return {"$ref": self._uri(version, variant, ref[len(prefix):])}
        out: dict = {}
        has_props = bool(node.get("properties"))
        for k, v in node.items():
            if k == "properties":
                out[k] = {p: self.convert(s, version, mode, True) for p, s in v.items()}
            elif k == "items":
                out[k] = self.convert(v, version, mode, True)
            elif k == "additionalProperties":
                out[k] = v if isinstance(v, bool) else self.convert(v, version, mode, True)
            elif k == "not":
                out[k] = self.convert(v, version, mode, False)
            elif k == "allOf":
                # Branches of an allOf describe one object together: never closed one by one.
                out[k] = [self.convert(b, version, mode, False) for b in v]
            elif k in ("oneOf", "anyOf"):
                # Alternatives are closed each on its own, unless the schema itself has properties
                # (then the schema closes over its own and the matched branch's properties).
                branches = [self.convert(b, version, mode, close and not has_props) for b in v]
                key = "anyOf" if mode == "resp" else k
                if key in out:
                    out.setdefault("allOf", []).append({key: branches})
                else:
                    out[key] = branches
            elif k == "pattern":
                # OpenAPI patterns are ECMA 262 regexes; keep the ones Python's re can run
                # (all of them in the 23.0.2 descriptions).
                try:
                    re.compile(v)
                    out[k] = v
                except (re.error, TypeError):
                    pass
            elif k in _KEEP:
                out[k] = v
        if mode == "req" and close and "additionalProperties" not in node and self._closable(node, version):
            out["unevaluatedProperties"] = False
        if node.get("nullable") is True:
            out = _allow_null(out)
        return out

    def _closable(self, node: dict, version: str, depth: int = 0) -> bool:
        """An object schema whose properties are documented: it has `properties`, or it is an
        `allOf` whose branches document properties and none of which is a free-form object."""
        if node.get("properties"):
            return True
        if "allOf" not in node or depth > 10:
            return False
        found = False
        for b in node["allOf"]:
            b = self._raw_deref(b, version)
            if not isinstance(b, dict):
                continue
            if b.get("type") == "object" and not b.get("properties") and "allOf" not in b \
                    and b.get("additionalProperties", True) is not False:
                return False  # a free-form object: the description allows any member
            if self._closable(b, version, depth + 1):
                found = True
        return found

    def _raw_deref(self, node, version: str):
        for _ in range(20):
            if not (isinstance(node, dict) and "$ref" in node):
                break
            ref = node["$ref"]
            if ref.startswith("#/components/schemas/"):
                node = self._component_schema(ref[len("#/components/schemas/"):], version)
            else:
                node = self.resolve(node)
        return node

    def _converted_uri(self, uri: str):
        """The converted component schema a `urn:cellbridge-openapi:` URI names, memoised."""
        with self._lock:
            s = self._converted.get(uri)
            if s is None:
                version, variant, name = uri[len(_URN):].split(":", 2)
                raw = self._component_schema(name, version)
                mode = "resp" if variant == "r" else "req"
                s = self.convert(raw, version, mode, variant == "qc")
                self._converted[uri] = s
            return s

    def deref(self, schema):
        """Follows converted `$ref`s to the schema they name."""
        for _ in range(50):
            if isinstance(schema, dict) and "$ref" in schema and schema["$ref"].startswith(_URN):
                schema = self._converted_uri(schema["$ref"])
            else:
                break
        return schema

    def _register(self, schema) -> None:
        """Puts every component `schema` refers to (transitively) into the registry."""
        pending = []

        def collect(node):
            if isinstance(node, dict):
                ref = node.get("$ref")
                if isinstance(ref, str) and ref.startswith(_URN) and ref not in self._registered:
                    self._registered.add(ref)
                    pending.append(ref)
                for v in node.values():
                    collect(v)
            elif isinstance(node, list):
                for v in node:
                    collect(v)

        with self._lock:
            collect(schema)
            added = []
            while pending:
                uri = pending.pop()
                s = self._converted_uri(uri)
                added.append((uri, Resource.from_contents(s, default_specification=DRAFT202012)))
                collect(s)
            if added:
                self._registry = self._registry.with_resources(added)

    def validator(self, schema) -> Draft202012Validator:
        self._register(schema)
        return Draft202012Validator(schema, registry=self._registry)

    def types_of(self, schema, depth=0) -> set[str]:
        """The JSON types a converted schema can accept ("number" includes "integer")."""
        schema = self.deref(schema)
        if not isinstance(schema, dict) or depth > 20:
            return set()
        out: set[str] = set()
        t = schema.get("type")
        if t is not None:
            out |= set(t) if isinstance(t, list) else {t}
        elif schema.get("properties"):
            out.add("object")
        elif "items" in schema:
            out.add("array")
        for key in ("anyOf", "oneOf"):
            if key in schema:
                branch_types = [self.types_of(b, depth + 1) for b in schema[key]]
                if all(branch_types):
                    u = set().union(*branch_types)
                    out = (out & u) if t is not None else (out | u)
                else:
                    return out if t is not None else set()
        for b in schema.get("allOf", ()):
            bt = self.types_of(b, depth + 1)
            if bt:
                out = (out & bt) if out else bt
        if "enum" in schema and not out:
            out = {_json_type(e) for e in schema["enum"]}
        return out


# --- operations --------------------------------------------------------------------------------

class Operation:
    """One documented operation (method + path template)."""

    def __init__(self, desc: Description, method: str, template: str, raw: dict, params: list[dict]):
        self._desc = desc
        self._raw = raw
        self._params = params
        self.id: str = raw.get("operationId", f"{method} {template}")
        self.method: str = method
        self.template: str = template
        self.doc_url: str = (raw.get("externalDocs") or {}).get("url", "")
        self.summary: str = raw.get("summary", "")
        self._memo: dict = {}
        self._lock = threading.RLock()

    def __repr__(self):
        return f"<Operation {self.id} {self.method} {self.template}>"

    def _cached(self, key, build):
        with self._lock:
            if key not in self._memo:
                self._memo[key] = build()
            return self._memo[key]

    def spec(self, version: str = DEFAULT_API_VERSION) -> dict:
        """The raw operation object, with version's breaking changes applied."""
        return self._desc._patched_node("op", self.id, self._raw, version)

    def parameters(self, where: str, version: str = DEFAULT_API_VERSION) -> dict[str, dict]:
        """{name: {"required": bool, "schema": converted schema, "raw": param}} for `in: where`."""
        def build():
            params = self._params
            if version > DEFAULT_API_VERSION:
                params = self._desc._merge_params([], self.spec(version).get("parameters") or [])
            out = {}
            for p in params:
                if p.get("in") != where:
                    continue
                schema = p.get("schema")
                if schema is None:
                    schema = {"type": "string"}  # a `content` parameter: taken as text
                out[p["name"]] = {"required": bool(p.get("required")) or where == "path",
                                  "schema": self._desc.convert(schema, version, "resp", False),
                                  "raw": p}
            return out
        return self._cached(("params", where, version), build)

    @property
    def accept_types(self) -> frozenset[str]:
        """Media types this operation serves besides the basic ones: every content type its
        responses list and every application/vnd.github.* type its description names."""
        def build():
            out = set()
            for resp in (self._raw.get("responses") or {}).values():
                resp = self._desc.resolve(resp)
                for ct in resp.get("content") or {}:
                    out.add(_normalize_vnd(ct.lower()))
            for mt in _VND_IN_TEXT.findall(self._raw.get("description", "")):
                out.add(_normalize_vnd(mt.rstrip(".").lower()))
            return frozenset(out)
        return self._cached("accept", build)

    # --- request parts --------------------------------------------------------------------------

    def _value_violation(self, check, what, raw, schema, status, message) -> Violation | None:
        """Validates one textual value (path or query) against its schema after converting it
        from text: integers, numbers, booleans "true"/"false", else the string itself."""
        desc = self._desc
        types = desc.types_of(schema) or {"string"}
        candidates = []
        if "integer" in types and re.fullmatch(r"[+-]?\d+", raw):
            candidates.append(int(raw))
        if "number" in types:
            try:
                f = float(raw)
                if math.isfinite(f) and re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", raw):
                    candidates.append(int(f) if f.is_integer() and re.fullmatch(r"[+-]?\d+", raw) else f)
            except ValueError:
                pass
        if "boolean" in types and raw in ("true", "false"):
            candidates.append(raw == "true")
        if "string" in types:
            candidates.append(raw)
        v = desc.validator(schema)
        first_error = None
        for c in candidates:
            err = best_match(v.iter_errors(c))
            if err is None:
                return None
            first_error = first_error or err
        why = first_error.message if first_error is not None else f"is not of type {' or '.join(sorted(types))}"
        return Violation(check, f"{self.id}: {what} {_short(raw, 80)!r}: {_short(why, 200)}", status, message)

    def _check_path_params(self, params: dict[str, str], version: str) -> list[Violation]:
        # A path parameter that is not what the description says (pull_number "abc") means no
        # route on GitHub's side either: 404 Not Found.
        out = []
        for name, p in self.parameters("path", version).items():
            if name not in params:
                continue
            v = self._value_violation("path-param", f"path parameter {name}", params[name], p["schema"], 404, "Not Found")
            if v:
                out.append(v)
        return out

    def _check_query(self, query: str, version: str) -> list[Violation]:
        # Query parameters are the operation's `in: query` parameters (OpenAPI 3.0.3, Parameter
        # Object; style "form", explode true by default: arrays repeat the key). GitHub documents
        # no answer to a query key it does not know (it is not known to reject one); an
        # undocumented key is flagged here so that the product cannot come to rely on one, with
        # the answer GitHub documents for invalid fields, 422 "Validation Failed"
        # (DOCS_CLIENT_ERRORS), as for a documented key with a bad value.
        documented = self.parameters("query", version)
        values: dict[str, list[str]] = {}
        for k, v in parse_qsl(query, keep_blank_values=True):
            # "To send an array in the query string, use the query parameter once per array
            # item, and append [] after the query parameter name" (getting-started doc, above).
            if k.endswith("[]") and k[:-2] in documented and "array" in self._desc.types_of(documented[k[:-2]]["schema"]):
                k = k[:-2]
            values.setdefault(k, []).append(v)
        out = []
        for name, vals in values.items():
            p = documented.get(name)
            if p is None:
                known = ", ".join(sorted(documented)) or "none"
                out.append(Violation("query", f"{self.id}: query parameter {name!r} is not documented (documented: {known})",
                                     422, "Validation Failed"))
                continue
            schema = p["schema"]
            types = self._desc.types_of(schema)
            if "array" in types and (len(vals) > 1 or types == {"array"}):
                if p["raw"].get("explode", True) is False:
                    vals = [x for v in vals for x in v.split(",")]  # style form, explode false
                items = self._array_items(schema)
                for i, item in enumerate(vals):
                    viol = self._value_violation("query", f"query parameter {name}[{i}]", item, items, 422, "Validation Failed")
                    if viol:
                        out.append(viol)
                continue
            if len(vals) > 1:
                out.append(Violation("query", f"{self.id}: query parameter {name!r} given {len(vals)} times; it takes one value",
                                     422, "Validation Failed"))
                continue
            viol = self._value_violation("query", f"query parameter {name}", vals[0], schema, 422, "Validation Failed")
            if viol:
                out.append(viol)
        for name, p in documented.items():
            if p["required"] and name not in values:
                out.append(Violation("query", f"{self.id}: required query parameter {name!r} is missing", 422, "Validation Failed"))
        return out

    def _array_items(self, schema, depth=0):
        """The `items` schema of an array schema (looked for in anyOf/oneOf alternatives too)."""
        s = self._desc.deref(schema)
        if not isinstance(s, dict) or depth > 10:
            return {}
        if "items" in s:
            return s["items"]
        for key in ("anyOf", "oneOf", "allOf"):
            for b in s.get(key, ()):
                if "array" in self._desc.types_of(b):
                    return self._array_items(b, depth + 1)
        return {}

    def _check_accept(self, headers) -> list[Violation]:
        lines = _header_lines(headers, "accept")
        if not lines:
            return []  # no Accept: GitHub answers its default JSON
        ranges = [r.strip() for line in lines for r in line.split(",") if r.strip()]
        allowed = BASIC_ACCEPT | self.accept_types
        for r in ranges:
            q = re.search(r";\s*q\s*=\s*([0-9.]+)", r)
            if q and float(q.group(1) or 0) == 0:
                continue  # q=0: "not acceptable" (RFC 9110 §12.4.2)
            mt = _media_type(r)
            if mt and _normalize_vnd(mt) in allowed:
                return []
        # GitHub answers a media type it cannot serve with 415, e.g. 'Unsupported 'Accept'
        # header: [...application/vnd.heroku+json...]. Must accept 'application/json'.'
        # (quoted in devspace-sh/devspace#282, looked up; 415s for missing preview media types
        # are quoted in google/go-github#1291). The docs list the media types at DOCS_MEDIA_TYPES.
        value = ", ".join(lines)
        return [Violation("accept", f"{self.id}: Accept {_short(value, 120)!r} names no media type this operation serves "
                                    f"(basic: application/vnd.github+json, application/json; this operation: "
                                    f"{', '.join(sorted(self.accept_types)) or 'none'})",
                          415, f"Unsupported 'Accept' header: {_short(value, 120)!r}. Must accept 'application/json'.")]

    def request_body(self, version: str = DEFAULT_API_VERSION):
        """(requestBody object or None, converted closed schema of its application/json or None)."""
        def build():
            rb = self.spec(version).get("requestBody")
            if rb is None:
                return None, None
            rb = self._desc.resolve(rb)
            media = (rb.get("content") or {}).get("application/json")
            if media is None or "schema" not in media:
                return rb, None
            return rb, self._desc.convert(media["schema"], version, "req", True)
        return self._cached(("body", version), build)

    def _check_body(self, headers, body: bytes | None, version: str) -> list[Violation]:
        rb, schema = self.request_body(version)
        present = body is not None and len(body) > 0
        if rb is None:
            if present:
                # GitHub rejects members an operation does not take, e.g. a PUT with a body to an
                # endpoint that takes none: 422 'Invalid request. "enabled" is not a permitted key.'
                # (observed answers quoted in public repositories, looked up).
                return [Violation("body", f"{self.id} takes no request body; got {len(body)} bytes", 422, "Validation Failed")]
            return []
        if not present:
            if rb.get("required"):
                return [Violation("body", f"{self.id}: the request body is required (requestBody.required) but absent",
                                  422, "Validation Failed")]
            return []
        out = []
        # Content-Type: "For POST, PATCH, PUT, and DELETE requests, parameters not included in the
        # URL should be encoded as JSON with a Content-Type of 'application/json'"
        # (DOCS_CLIENT_ERRORS page, "Parameters", looked up), or a type the operation's
        # requestBody lists. GitHub documents no answer to another type; 415 Unsupported Media
        # Type is RFC 9110 §15.5.16's ("the content is in a format not supported by this method
        # on the target resource"). Real GitHub is more lenient: that same page's example sends
        # `curl -d '{"scopes":...}'`, which curl labels application/x-www-form-urlencoded. This
        # check is stricter on purpose, to keep the product exact.
        listed = {k.lower() for k in rb.get("content") or {}}
        ct_lines = _header_lines(headers, "content-type")
        mt = _media_type(ct_lines[0]) if len(ct_lines) == 1 else None
        if len(ct_lines) != 1 or mt not in ({"application/json"} | listed):
            what = ("no Content-Type" if not ct_lines else
                    f"{len(ct_lines)} Content-Type lines" if len(ct_lines) > 1 else f"Content-Type {_short(ct_lines[0], 80)!r}")
            out.append(Violation("content-type", f"{self.id}: a request body with {what}; expected application/json"
                                 + (f" or {', '.join(sorted(listed - {'application/json'}))}" if listed - {"application/json"} else ""),
                                 415, "Unsupported Media Type"))
            # and the body is still checked as JSON below
        elif mt != "application/json":
            return out  # a non-JSON body the operation documents (text/plain, octet-stream): not parsed
        if schema is None:
            return out
        # "Sending invalid JSON will result in a 400 Bad Request response." {"message":"Problems
        # parsing JSON"}; "Sending the wrong type of JSON values will result in a 400 Bad Request
        # response." {"message":"Body should be a JSON object"}; "Sending invalid fields will
        # result in a 422 Unprocessable Entity response." {"message": "Validation Failed",
        # "errors": [{"resource", "field", "code": "missing_field"}]} - DOCS_CLIENT_ERRORS
        # (github/docs content/rest/overview/resources-in-the-rest-api.md, "Client errors",
        # looked up at commit 015d8c38). Observed GitHub answers to schema failures carry
        # 'Invalid request.\n\n"x" is not a permitted key.' / '"x" wasn't supplied.' as the
        # message; `detail` uses that wording, `message` the documented one.
        try:
            value = json.loads(body, parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError) as e:
            out.append(Violation("body", f"{self.id}: the request body is not JSON ({_short(str(e), 120)})", 400, "Problems parsing JSON"))
            return out
        types = self._desc.types_of(schema)
        jt = _json_type(value)
        if types and jt not in types and not (jt == "integer" and "number" in types):
            out.append(Violation("body", f"{self.id}: the request body is a JSON {jt}; the description wants "
                                 f"{' or '.join(sorted(types))}", 400, "Body should be a JSON object"))
            return out
        validator = self._cached(("body-validator", version), lambda: self._desc.validator(schema))
        for err in sorted(validator.iter_errors(value), key=lambda e: _json_path(e.absolute_path))[:10]:
            out.append(Violation("body", f"{self.id}: {_describe(err)}", 422, "Validation Failed"))
        return out

    # --- responses ------------------------------------------------------------------------------

    def _response(self, status: int, version: str):
        responses = self.spec(version).get("responses") or {}
        for key in (str(status), f"{status // 100}XX", f"{status // 100}xx", "default"):
            if key in responses:
                return self._desc.resolve(responses[key])
        return None

    def documented_statuses(self, version: str = DEFAULT_API_VERSION) -> list[str]:
        return sorted((self.spec(version).get("responses") or {}).keys())

    def response_schema(self, status: int, media_type: str = "application/json", version: str = DEFAULT_API_VERSION):
        """The converted (open) schema of the response `status` in `media_type`, or None."""
        def build():
            resp = self._response(status, version)
            if resp is None:
                return None
            media = (resp.get("content") or {}).get(media_type)
            if media is None or "schema" not in media:
                return None
            return self._desc.convert(media["schema"], version, "resp", False)
        return self._cached(("resp", status, media_type, version), build)

    def check_response(self, status: int, content_type: str | None, body, *, api_version: str | None = None,
                       headers=None) -> list[Violation]:
        """Checks one of the fake's answers. `body` is the parsed JSON (or None, or bytes for a
        non-JSON answer). `headers` (optional, (name, value) pairs or a dict) lets redirects be
        checked for their Location."""
        version = api_version if api_version in self._desc.versions else DEFAULT_API_VERSION

        def bad(detail):
            return Violation("response", f"{self.id} {status}: {detail}", 500, "Server Error")

        resp = self._response(status, version)
        if resp is None:
            return [bad(f"status {status} is not documented (documented: {', '.join(self.documented_statuses(version))})")]
        out = []
        content = resp.get("content") or {}
        empty = body is None or body in (b"", "")
        if 300 <= status < 400 and headers is not None:
            pairs = headers.items() if isinstance(headers, dict) else headers
            # A redirect carries the target in Location (RFC 9110 §15.4, §10.2.2); the
            # description documents it for e.g. repos/download-tarball-archive's 302.
            if status != 304 and not _header_lines(list(pairs), "location"):
                out.append(bad("a redirect without a Location header"))
        if not content:
            # No documented content: a 2xx/3xx answer has no body (204 and 304 never have one,
            # RFC 9110 §15.3.5, §15.4.5); an error answer may carry GitHub's usual JSON error.
            if not empty and status < 400:
                out.append(bad(f"the description documents no body for {status}, the fake sent one"))
            return out
        if empty:
            if status not in (204, 304):
                out.append(bad(f"the description documents a body ({', '.join(content)}), the fake sent none"))
            return out
        mt = _media_type(content_type)
        if mt is None:
            out.append(bad("a body without a Content-Type"))
            return out
        if mt not in content:
            out.append(bad(f"Content-Type {mt} is not documented (documented: {', '.join(content)})"))
            return out
        schema = self.response_schema(status, mt, version)
        if schema is None:
            return out
        value = body
        if isinstance(value, (bytes, bytearray)):
            try:
                text = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                return out  # binary content: nothing to validate
            if mt == "application/json" or mt.endswith("+json"):
                try:
                    value = json.loads(text)
                except ValueError:
                    out.append(bad("the body is not JSON"))
                    return out
            else:
                value = text
        validator = self._cached(("resp-validator", status, mt, version), lambda: self._desc.validator(schema))
        for err in sorted(validator.iter_errors(value), key=lambda e: _json_path(e.absolute_path))[:10]:
            out.append(bad(_describe(err)))
        return out

    def complete_response(self, status: int, body, *, api_version: str | None = None):
        """`body` with every property the documented JSON response schema requires but `body`
        lacks filled with a schema-conforming placeholder (recursively, also inside nested
        objects and array items `body` already has). What the fake set is never overwritten;
        `body` itself is not modified (a completed copy is returned)."""
        version = api_version if api_version in self._desc.versions else DEFAULT_API_VERSION
        schema = self.response_schema(status, "application/json", version)
        if schema is None or body is None or isinstance(body, (bytes, bytearray, str)):
            return body
        return _Filler(self._desc).fill(copy.deepcopy(body), schema, 0)


def _describe(err) -> str:
    """A validation error in GitHub's words where there are any, with the JSON path."""
    path = _json_path(err.absolute_path)
    if err.validator in ("oneOf", "anyOf") and err.context:
        inner = best_match(err.context)
        if inner is not None:
            return f"{_describe(inner)} (no alternative of {err.validator} at {path} matched)"
    if err.validator == "oneOf":
        # The description's oneOf alternatives overlap for this value (e.g. `{}` for
        # issues/set-labels, whose two alternatives both only document `labels`).
        return f"{path}: {_show(err.instance)} matches more than one alternative of oneOf."
    if err.validator == "required":
        m = re.match(r"'(.+)' is a required property", err.message)
        name = m.group(1) if m else err.message
        return f'{path}: "{name}" wasn\'t supplied.'
    if err.validator in ("unevaluatedProperties", "additionalProperties"):
        names = re.findall(r"'([^']+)'", err.message.split("(", 1)[-1]) if "(" in err.message else []
        keys = ", ".join(f'"{n}"' for n in names) or _short(err.message)
        verb = "is not a permitted key" if len(names) <= 1 else "are not permitted keys"
        return f"{path}: {keys} {verb}."
    if err.validator == "type":
        want = err.validator_value if isinstance(err.validator_value, str) else " or ".join(err.validator_value)
        return f"{path}: {_show(err.instance)} is not of type {want}."
    if err.validator == "enum":
        return f"{path}: {_show(err.instance)} is not one of {_show(err.validator_value, 160)}."
    return f"{path}: {_short(err.message, 200)}"


class _Filler:
    """Fills required members from converted (open) response schemas."""

    MAX_DEPTH = 40

    def __init__(self, desc: Description):
        self.desc = desc

    def _collect(self, schema, value, props: dict, required: list, depth: int) -> None:
        s = self.desc.deref(schema)
        if not isinstance(s, dict) or depth > self.MAX_DEPTH:
            return
        for k, v in (s.get("properties") or {}).items():
            props.setdefault(k, v)
        for r in s.get("required") or ():
            if r not in required:
                required.append(r)
        for b in s.get("allOf") or ():
            self._collect(b, value, props, required, depth + 1)
        for key in ("anyOf", "oneOf"):
            if key in s:
                b = self._pick(s[key], value)
                if b is not None:
                    self._collect(b, value, props, required, depth + 1)

    def _pick(self, branches, value):
        """The alternative that fits `value` best (its type admits it and it documents most of
        its members); the first non-null one when nothing tells them apart."""
        jt = _json_type(value)
        best, best_score = None, None
        for i, b in enumerate(branches):
            types = self.desc.types_of(b)
            if types and jt not in types and not (jt == "integer" and "number" in types):
                continue
            if types == {"null"} and value is not None:
                continue
            score = 0
            if isinstance(value, dict):
                props: dict = {}
                req: list = []
                self._collect(b, value, props, req, 0)
                score = sum(1 for k in value if k in props) - sum(1 for r in req if r not in value and r not in props)
            key = (score, -i)
            if best_score is None or key > best_score:
                best, best_score = b, key
        return best

    def fill(self, value, schema, depth: int):
        if depth > self.MAX_DEPTH:
            return value
        s = self.desc.deref(schema)
        if not isinstance(s, dict):
            return value
        if isinstance(value, dict):
            props: dict = {}
            required: list = []
            self._collect(s, value, props, required, depth)
            for name in required:
                if name not in value:
                    value[name] = self.placeholder(props.get(name, {}), depth + 1)
            for name in list(value):
                if name in props:
                    value[name] = self.fill(value[name], props[name], depth + 1)
            return value
        if isinstance(value, list):
            items = self._items(s, value)
            if items is not None:
                return [self.fill(x, items, depth + 1) for x in value]
        return value

    def _items(self, s, value, depth=0):
        s = self.desc.deref(s)
        if not isinstance(s, dict) or depth > 10:
            return None
        if "items" in s:
            return s["items"]
        for key in ("anyOf", "oneOf"):
            if key in s:
                b = self._pick(s[key], value)
                if b is not None:
                    return self._items(b, value, depth + 1)
        for b in s.get("allOf") or ():
            it = self._items(b, value, depth + 1)
            if it is not None:
                return it
        return None

    def placeholder(self, schema, depth: int):
        uri = schema.get("$ref") if isinstance(schema, dict) else None
        if uri is not None:
            cached = self.desc._placeholders.get(uri)
            if cached is None:
                cached = (self._placeholder(schema, depth),)
                self.desc._placeholders[uri] = cached
            return copy.deepcopy(cached[0])
        return self._placeholder(schema, depth)

    def _placeholder(self, schema, depth: int):
        s = self.desc.deref(schema)
        if not isinstance(s, dict) or depth > self.MAX_DEPTH:
            return None
        t = s.get("type")
        types = list(t) if isinstance(t, list) else ([t] if t else [])
        if "null" in types:
            return None  # a nullable member: null is what GitHub sends when it has nothing
        for key in ("anyOf", "oneOf"):
            if any(isinstance(b, dict) and b.get("type") == "null" for b in s.get(key, ())):
                return None
        if "const" in s:
            return s["const"]
        if s.get("enum"):
            return next((e for e in s["enum"] if e is not None), None)
        if not types:
            if s.get("properties") or s.get("allOf") and "object" in self.desc.types_of(s):
                types = ["object"]
            elif "items" in s:
                types = ["array"]
        if not types:
            for key in ("allOf", "anyOf", "oneOf"):
                if s.get(key):
                    return self.placeholder(s[key][0], depth + 1)
            return None
        kind = types[0]
        if kind == "object":
            return self.fill({}, s, depth + 1)
        if kind == "array":
            n = int(s.get("minItems") or 0)
            return [self.placeholder(s.get("items", {}), depth + 1) for _ in range(n)]
        if kind == "string":
            low = int(s.get("minLength") or 0)
            text = _PLACEHOLDER_STRINGS.get(s.get("format"), "")
            if len(text) < low:
                text = text + "x" * (low - len(text))
            pattern = s.get("pattern")
            if pattern and not re.search(pattern, text):
                # A few shapes that satisfy the patterns GitHub uses (hex SHAs, names, numbers).
                for cand in ("0" * max(low, 40), "0" * max(low, 1), "a" * max(low, 1), "placeholder", "A" * max(low, 1)):
                    if re.search(pattern, cand):
                        return cand
            return text
        if kind in ("integer", "number"):
            low = s.get("minimum")
            return int(low) if isinstance(low, (int, float)) and low > 0 else 0
        if kind == "boolean":
            return False
        return None
