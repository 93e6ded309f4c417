"""A stateful fake of the GitHub REST API endpoints cellbridge uses.

Prints `PORT=<n>` once bound to 127.0.0.1 and serves until its stdin closes.

It keeps real git semantics in memory: blobs, trees and commits get the SHA-1 ids GitHub would
give them, refs move only by fast-forward unless forced, a second open pull request from the
same head is refused with GitHub's 422, a pull request merges three ways as GitHub merges it
(refused with 405 only on a conflict: `merge_pull`), a branch merges into another as `POST
/merges` does (`merge_branches`), two commits compare as `GET /compare/{basehead}` does
(`compare_commits`), and so on. Plain issues share the pull requests' numbers and are listed
with them (`list_issues`). Installation tokens and fine-grained personal access tokens are held to
their permissions as GitHub holds them (`PERMISSIONS`: 403 "Resource not accessible by
integration" / "... by personal access token" with `X-Accepted-GitHub-Permissions`, 404 for a
repository outside the installation's selection); classic personal access tokens are not checked.
Errors follow GitHub's shapes (`{"message": ..., "documentation_url": ...}`) and status codes
(401, 403, 404, 409, 410, 422).

GraphQL (`POST /graphql`, `/api/graphql` on GitHub Enterprise Server): the documents cellbridge
sends, checked against GitHub's GraphQL schema (`github_graphql.py`), over the same state: a pull
request's merge state (`mergeStateStatus` derived from branch protection, statuses, reviews),
and GitHub's auto-merge, enabled and disabled by mutation and fired when the requirements are met
(`settle`; see "branch protection, merge state, auto-merge"); `pullRequests(headRefName:)` with
their labels. Every call is held to GitHub's GraphQL limits ("Rate limits and query limits for
the GraphQL API"): its point value and node count computed from the document
(`github_graphql.limits`), charged to a budget per user or per installation (`x-ratelimit-*`
headers with `x-ratelimit-resource: graphql`, `rateLimit { cost limit remaining used resetAt
nodeCount }`, a spent budget answered 200 with a `RATE_LIMITED` error; see "GraphQL's primary rate
limit"), more than 500,000 nodes refused (`MAX_NODE_LIMIT_EXCEEDED`), a connection's page outside
1-100 or missing refused at its field (`EXCESSIVE_PAGINATION`, `INVALID_PAGINATION`,
`MISSING_PAGINATION_BOUNDARIES`), and a field the token may not read null with a `FORBIDDEN` error
at its path (`GRAPHQL_FIELD_PERMISSIONS`).

Control API (never used by the product; tests and the bench drive it):

- `POST /_fake/seed` `{"repo": "o/r", "branch": "main", "files": {path: text}, "message": "..",
  "replace": true}`: creates the repository if needed (its default branch is the first branch
  seeded; `"has_issues": false` disables its issues: creating one is 410) and commits the files
  on the branch (the whole tree when `replace`, else laid over the
  branch's tree; a value of null deletes; a value `{"text": ..., "mode": "100755"}` sets the
  mode, `"120000"` making a symlink whose text is its target). Returns `{"sha": ...}`.
  `"dir": "/abs/path"` (with or without `files`, which are laid over it) takes every file below
  that local directory as Git would commit it (executables 100755, symlinks 120000, not
  followed): a large fleet seeded without sending its text through the control API.
- `POST /_fake/faults` `{"match": "POST /repos/*/git/refs*", "status": 502, "times": 2}`,
  `{"secondary_rate_limit": true, "retry_after": 1, "times": 1, "match": ...}`,
  `{"delay_ms": 3000, "match": ..., "times": 1}` (a slow answer, for timeouts),
  `{"cut_after": 4096, "match": "GET /_codeload/*", "times": 1}` (the answer's headers announce
  the whole body, then the connection closes after that many bytes of it: a download cut in
  transit, which HTTP/1.1 clients see as a body shorter than its Content-Length, RFC 9112
  section 6.3 "incomplete message") or
  `{"lose_race": {"ref": "heads/main", "files": {...}}, "match": "PATCH ...", "times": 1}`
  (or `{"lose_race": {"merge_pull": 3}, ...}`: a person merges pull request #3 first)
  (another writer commits on `ref` just before the matched request is handled). `match` is
  `METHOD glob` on the path without query (`*` matches anything, `...` too); omitted, any API
  request. `"operation": "openCellPulls"` narrows a fault on `/graphql` to that GraphQL
  operation; there `{"timeout": true}` answers GitHub's 502 for a query it gave up on, and
  `{"graphql_errors": [...]}` answers 200 with those `errors` (a field refused, a field missing,
  GitHub's own failure), and `{"answer_patch": {"path": [...], "value": ..., "errors": [...]}}`
  runs the query, then sets `data` at `path` to `value` and adds `errors` (a field refused with
  the rest of `data` answered; an enum value added since the client was written).
  `DELETE /_fake/faults` clears them.
- `POST /_fake/schema` `{"lacks": ["Ref.rules"]}`: GraphQL fields this GitHub does not have (a
  GitHub Enterprise Server older than them): a document asking one is refused whole with
  `extensions.code: undefinedField`; `{"lacks": []}` gives them back.
- `POST /_fake/graphql_limits` `{"points_per_hour": 10, "timeout_nodes": 1000, "timeout_status": 502,
  "rate_limited_type": "RATE_LIMITED"}`: GraphQL's limits, each key given replacing its value.
  `points_per_hour` replaces every budget's documented size (null: 5,000 for a user, 5,000 and 50
  per repository past 20 up to 12,500 for the installation, none on GitHub Enterprise Server);
  `timeout_nodes`: a call asking more nodes than that times out (`timeout_status`, 502 or 504, with
  GitHub's "Something went wrong while executing your query. This may be the result of a timeout
  ..." and its points charged), so a client's retry with a smaller page can be tested;
  `rate_limited_type` `"RATE_LIMIT"`: a spent budget answered with the newer error shape (`"code":
  "graphql_rate_limit"`). `GET` answers them and the budgets (`{key: {"used", "reset"}}`);
  `DELETE` restores the defaults and fills every budget.
- `GET /_fake/requests`: `{"requests": [{"method","path","status","write","user_agent"}], "count": n,
  "writes": n}` (`user_agent`: every User-Agent line the request carried; a GraphQL request also
  has `graphql`, its operation, and `points`, what it cost of the primary rate limit by
  `github_graphql.Limits`: 0 for one refused before it ran); `DELETE /_fake/requests` resets the
  log.
- `POST /_fake/pulls` `{"repo": "o/r", "base": "main", "pulls": [{"head": "cellbridge/c",
  "files": {path: text}, "title": "..", "body": "..", "state": "open" | "closed",
  "statuses": {context: "success" | "failure" | ...}}]}`: many pull requests at once, each on a
  new branch `head` holding one commit over the base that lays `files` over its tree, the
  statuses posted on that commit; a closed one is closed unmerged at that head. Answers
  `{"pulls": [{"number", "sha"}]}` in order. For seeding a fleet's worth in one request.
- `GET /_fake/state?repo=o/r`: branches, pull requests (with labels, head sha, statuses,
  `comments`: the bodies of their comments, oldest first, and `closed_by`: the User-Agent of the
  request that closed or merged it, null while open), `issues` (plain issues only, by number:
  `[{"number", "title", "body", "labels": [names], "state", "state_reason", "comments":
  [bodies]}]`) and the files of every branch, for assertions.
- `POST /_fake/rulesets` `{"repo": "o/r", "branch": "main", "message": "Changes must be made
  through a pull request."}`: a ruleset refusing every ref update of matching branches (`branch`
  a GitHub fnmatch pattern, `~DEFAULT_BRANCH` or `~ALL`) with 422 "Repository rule violations
  found\n\n<message>\n\n" (`check_rules`); `DELETE /_fake/rulesets` (`{"repo"}` optional)
  removes them, `GET` lists them.
  `{"repo": "o/r", "branch": "main", "required_signatures": true}` is a ruleset requiring signed
  commits instead (no update refused: see "signed commits"), listed by `GET
  /repos/{o}/{r}/rules/branches/{b}`.
- `POST /_fake/fork_pull` `{"repo": "o/r", "branch": "b", "fork": "someone/fleet", "state":
  "open" | "closed"}`: someone's pull request from their fork's branch `b` (see "forks' pull
  requests"); 201 `{"number"}`.
- `POST /_fake/update_branch` `{"repo": "o/r", "number": n}`: a person pressing the pull
  request's "Update branch" button: base merged into the head branch as
  `PUT /pulls/{n}/update-branch` does (`update_pull_branch`); 202 `{"message", "url", "sha"}`
  (`sha` the new head), or that operation's 422.
- `POST /_fake/settings` `{"web_commit_signing": true}`: GitHub Enterprise Server's web commit
  signing, which the site administrator turns on (off: GitHub signs nothing there).
- `POST /_fake/settings` `{"repo": "o/r", "allow_auto_merge": true}`: the repository's "Allow
  auto-merge" setting, as an administrator sets it (also `PATCH /repos/{o}/{r}` with
  `allow_auto_merge` on github.com; GitHub Enterprise Server's description does not document that
  field). The repository's branch protection, reviews and statuses are set through their real
  endpoints (`PUT .../branches/{b}/protection`, `POST .../pulls/{n}/reviews`, `POST
  .../statuses/{sha}`); `POST /_fake/tokens` takes a `"login"` for a person's token.
- `POST /_fake/merge_queue` `{"repo": "o/r", "branch": "main", "merge_method": "squash"}`: an
  administrator requires a merge queue on the branch, merging by that method (`null`: no queue;
  see "merge queues"). Nothing else drives the queue: an entry merges once the base's required
  contexts read `success` on its merge group's commit, posted with `POST /statuses/{sha}` as a
  CI would, and `GET /_fake/state` shows each entry's `merge_group` (the `merge_group` event's
  object: `head_sha`, `head_ref`, `base_sha`, `base_ref`, `head_commit`) for the CI to act on.
- `POST /_fake/merge_state` `{"repo", "number", "computed": false}`: GitHub has not computed the
  pull request's merge state yet (`mergeStateStatus: UNKNOWN`) until `"computed": true`.
- `GET /_fake/app`: the GitHub App's id, client ID, installation id and private key (PEM,
  generated at start when the `cryptography` package is there), for tests that authenticate as
  an app (the JWT's `iss` may be the client ID or the id), and its installation's `permissions`
  and `repositories`.
- `POST /_fake/app` `{"permissions": {"contents": "write", ...}, "repositories": ["o/r", ...] |
  null}`: the installation's permissions (default `DEFAULT_APP_PERMISSIONS`: metadata read,
  contents, pull_requests, issues and statuses write, checks read) and repository selection (null, the
  default: all); each key given replaces its value, and tokens already made follow (they are
  checked against the installation as it is at each request). Answers as `GET`.
- `POST /_fake/tokens` `{"token": "..."}`: accept a classic personal access token (every
  permission, nothing checked); `{"token": "...", "permissions": {"contents": "read", ...},
  "repositories": ["o/r"] (optional)}`: a fine-grained one, checked; `"expires_at":
  "2026-12-19T00:00:00Z"` (either kind) gives it an expiry: every answer to a request made with
  it carries `GitHub-Authentication-Token-Expiration` (`token_expiration_header`), and after it
  the token is refused with 401; `DELETE` revokes either (`{"installation": true}`: every
  installation token the App was given).
- `GET /_fake/conformance`: what the description check saw: `{"flavor", "operations": {id: n},
  "violations": [...]}`; `DELETE` resets it, here and in the suite report (a test that plants a
  bad request on purpose).

Conformance with GitHub's own description (`github_openapi.py`, the `@octokit/openapi` package
that `make testbed` installs): every request to the API is matched to its documented operation
and checked (path and query parameters, body schema with no undocumented field, Content-Type,
Accept, one supported `X-GitHub-Api-Version`, User-Agent) before it is served. A request that
does not conform is recorded and answered as GitHub documents for that case (see
`github_openapi.Violation.status`). Every answer this fake gives to a documented operation is
completed with the fields GitHub's schema requires and checked against that schema, so the fake
cannot drift from GitHub either; a drift is recorded as a violation too. With `--flavor ghes` the
API lives below `/api/v3` and the newest GitHub Enterprise Server description is used.

Requests outside the description, on purpose: `/_fake/*` (this control API) and
`/_codeload/*` (the archive host the tarball redirect points at: codeload.github.com on github.com,
`/_codeload/` on GitHub Enterprise Server; neither is in the REST description).

With `CELLBRIDGE_GITHUB_CONFORMANCE_DIR` set, one JSON line per API request (operation, caller's
User-Agent, violations) is appended to `github-<pid>.jsonl` there, for the suite-wide report of
`tests/github_conformance.py`.
"""
import argparse
import base64
import calendar
import fnmatch
import gzip
import hashlib
import io
import json
import os
import re
import secrets
import socket
import sys
import tarfile
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import github_graphql  # noqa: E402  (GitHub's GraphQL schema, for /graphql)
import github_openapi  # noqa: E402  (GitHub's own description of every request and answer)
import leak_registry  # noqa: E402  (secrets this fake mints, for tests/leak_check.py)

DOCS = "https://docs.github.com/rest"
LOCK = threading.RLock()


class ApiError(Exception):
    def __init__(self, status, message, headers=None, errors=None, documentation_url=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        self.errors = errors
        self.documentation_url = documentation_url


# --- git objects -------------------------------------------------------------------------------

OBJECTS = {}  # sha -> (kind, payload); blob: bytes, tree: list of (mode, name, sha), commit: dict


def _store(kind, raw, payload):
    sha = hashlib.sha1(b"%s %d\0" % (kind.encode(), len(raw)) + raw).hexdigest()
    OBJECTS[sha] = (kind, payload)
    return sha


def put_blob(data: bytes) -> str:
    return _store("blob", data, data)


def _tree_sort_key(entry):
    mode, name, _ = entry
    return name + "/" if mode == "40000" else name


def put_tree(entries) -> str:
    entries = sorted(entries, key=_tree_sort_key)
    raw = b"".join(b"%s %s\0" % (m.encode(), n.encode()) + bytes.fromhex(s) for m, n, s in entries)
    return _store("tree", raw, entries)


def put_commit(tree, parents, message, when=None, signed=False) -> str:
    """A commit; `signed`: GitHub signed it (see "signed commits"), which its id covers, as a
    `gpgsig` header is part of a git commit object."""
    when = int(when or time.time())
    ident = b"cellbridge-fake <fake@example.invalid> %d +0000" % when
    raw = b"tree %s\n" % tree.encode()
    for p in parents:
        raw += b"parent %s\n" % p.encode()
    raw += b"author " + ident + b"\ncommitter " + ident + b"\n"
    if signed:
        raw += b"gpgsig -----BEGIN PGP SIGNATURE----- web-flow -----END PGP SIGNATURE-----\n"
    raw += b"\n" + message.encode()
    return _store("commit", raw, {"tree": tree, "parents": list(parents), "message": message, "when": when,
                                  "signed": bool(signed)})


def verification_json(sha):
    """A commit's `verification` ("Signature verification object", https://docs.github.com/rest/git/commits#get-a-commit-object):
    `verified`, `reason` ("valid"; "unsigned": "The object does not include a signature"),
    `signature`, `payload`, `verified_at`."""
    c = get_obj(sha, "commit")
    if c.get("signed"):
        return {"verified": True, "reason": "valid", "signature": "-----BEGIN PGP SIGNATURE-----\nweb-flow\n-----END PGP SIGNATURE-----",
                "payload": f"tree {c['tree']}\n", "verified_at": iso_now(c["when"])}
    return {"verified": False, "reason": "unsigned", "signature": None, "payload": None, "verified_at": None}


def get_obj(sha, kind):
    o = OBJECTS.get(sha)
    if o is None or o[0] != kind:
        return None
    return o[1]


def tree_files(tree_sha, prefix=""):
    """Flattens a tree into {path: blob sha}."""
    out = {}
    for mode, name, sha in get_obj(tree_sha, "tree") or []:
        path = prefix + name
        if mode == "40000":
            out.update(tree_files(sha, path + "/"))
        else:
            out[path] = (mode, sha)
    return out


def build_tree(files) -> str:
    """{path: (mode, blob sha)} -> root tree sha, building every subtree."""
    root = {}
    for path, (mode, sha) in files.items():
        node = root
        parts = path.split("/")
        for d in parts[:-1]:
            node = node.setdefault(d, {})
            if not isinstance(node, dict):
                raise ApiError(422, f"GitRPC::BadObjectState: {path} is below a file")
        node[parts[-1]] = (mode, sha)

    def write(node):
        entries = []
        for name, v in node.items():
            if isinstance(v, dict):
                if v:
                    entries.append(("40000", name, write(v)))
            else:
                entries.append((v[0], name, v[1]))
        return put_tree(entries)

    return write(root)


def is_ancestor(anc, sha):
    seen, stack = set(), [sha]
    while stack:
        s = stack.pop()
        if s == anc:
            return True
        if s in seen:
            continue
        seen.add(s)
        c = get_obj(s, "commit")
        if c:
            stack.extend(c["parents"])
    return False


# --- merging a pull request ----------------------------------------------------------------------
#
# GitHub merges a pull request whose head is behind its base when nothing conflicts: "Merge a
# pull request" (https://docs.github.com/rest/pulls/pulls#merge-a-pull-request) answers 405
# "Pull Request is not mergeable" only "if merge cannot be performed", and a merge cannot be
# performed when there are merge conflicts: "people make different changes to the same line of
# the same file, or ... one person edits a file and another person deletes the same file. You must
# resolve all merge conflicts before you can merge a pull request on GitHub"
# (https://docs.github.com/pull-requests/collaborating-with-pull-requests/addressing-merge-conflicts/about-merge-conflicts).
# The fake merges three ways at the level of whole files (git merges lines, so two edits of
# different lines of one file conflict here but not on GitHub: stricter, never laxer): for each
# path, against the merge base, a side that did not change it takes the other side's version,
# both sides changing it identically take that version, and both changing it differently
# (editing vs deleting included) is a conflict.

NOT_MERGEABLE = "Pull Request is not mergeable"


def ancestors(sha):
    """`sha` and every commit it descends from."""
    seen, stack = set(), [sha]
    while stack:
        s = stack.pop()
        if s in seen:
            continue
        seen.add(s)
        c = get_obj(s, "commit")
        if c:
            stack.extend(c["parents"])
    return seen


def merge_base(a, b):
    """The newest common ancestor of commits `a` and `b` (as `git merge-base`: a common ancestor
    no other common ancestor descends from; after criss-cross merges there can be several, where
    git merges them into a virtual base: the fake takes the newest), or None when they share no
    history."""
    common = ancestors(a) & ancestors(b)
    dominated, stack = set(), [p for c in common for p in get_obj(c, "commit")["parents"]]
    while stack:
        s = stack.pop()
        if s not in dominated:
            dominated.add(s)
            stack.extend(get_obj(s, "commit")["parents"])
    best = [c for c in common if c not in dominated]
    if not best:
        return None
    return max(best, key=lambda c: (get_obj(c, "commit")["when"], c))


def three_way(base, ours, theirs):
    """Merges file maps ({path: (mode, blob sha)}) against their merge base `base`: (the merged
    map, the conflicting paths, sorted)."""
    merged, conflicts = {}, []
    for path in sorted(set(base) | set(ours) | set(theirs)):
        b, o, t = base.get(path), ours.get(path), theirs.get(path)
        if o == t:
            pick = o
        elif o == b:
            pick = t
        elif t == b:
            pick = o
        else:
            conflicts.append(path)
            continue
        if pick is not None:
            merged[path] = pick
    return merged, conflicts


def commit_files(sha):
    return tree_files(get_obj(sha, "commit")["tree"]) if sha else {}


def merged_tree(base_sha, head_sha, since=None):
    """The tree of `head_sha` merged into `base_sha` (against `since`, their merge base when
    None), or ApiError 405 when that cannot be performed (no common history, a conflict, a file
    where the other side has a directory)."""
    since = merge_base(base_sha, head_sha) if since is None else since
    if since is None:
        raise ApiError(405, NOT_MERGEABLE)
    files, conflicts = three_way(commit_files(since), commit_files(base_sha), commit_files(head_sha))
    if conflicts:
        raise ApiError(405, NOT_MERGEABLE)
    try:
        return build_tree(files)
    except ApiError:
        raise ApiError(405, NOT_MERGEABLE)


def mergeable(repo, pr):
    """What GET /pulls/{n} says in `mergeable` for an open pull request: whether the merge rule
    above lets it merge (https://docs.github.com/rest/pulls/pulls#get-a-pull-request: GitHub
    computes it from a test merge commit of head into base)."""
    head_sha = repo["refs"].get("heads/" + pr["head"])
    base_sha = repo["refs"].get("heads/" + pr["base"])
    if head_sha is None or base_sha is None:
        return False
    try:
        merged_tree(base_sha, head_sha)
    except ApiError:
        return False
    return True


def pull_commits(base_sha, head_sha):
    """The commits a pull request shows (reachable from head, not from base), parents first."""
    behind = ancestors(base_sha)
    order, done = [], set()

    def visit(s):
        stack = [(s, False)]
        while stack:
            c, expanded = stack.pop()
            if c in done or c in behind:
                continue
            if expanded:
                done.add(c)
                order.append(c)
                continue
            stack.append((c, True))
            stack.extend((p, False) for p in reversed(get_obj(c, "commit")["parents"]))

    visit(head_sha)
    return order


def merge_pull(full, repo, pr, body):
    """`PUT /pulls/{n}/merge` (https://docs.github.com/rest/pulls/pulls#merge-a-pull-request):
    the new head of the base branch, with the pull request merged and closed.

    - `sha` given and not the head's: 409 "Head branch was modified. Review and try the merge
      again." (the description's example for "Conflict if sha was provided and pull request head
      did not match");
    - `merge_method` (https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/configuring-pull-request-merges/about-merge-methods-on-github):
      `merge` (the default) makes a merge commit whose parents are the base and the head
      ("merged using the --no-ff option"); `squash` one commit on the base with the merged tree
      and the base as its only parent ("the pull request's commits are squashed into a single
      commit"); `rebase` replays the pull request's commits one by one on the base, without a
      merge commit (merge commits of the pull request are left out, as `git rebase` does). A
      conflict in any of them is 405 too: GitHub's own message for an unrebaseable branch is not
      in the description, so the fake answers the documented one.

    Repository settings that refuse a method (`allow_squash_merge`...) are not modelled."""
    base_ref = "heads/" + pr["base"]
    head_sha, base_sha = repo["refs"].get("heads/" + pr["head"]), repo["refs"].get(base_ref)
    if pr["state"] != "open" or head_sha is None or base_sha is None:
        raise ApiError(405, NOT_MERGEABLE)
    if body.get("sha") is not None and body["sha"] != head_sha:
        raise ApiError(409, "Head branch was modified. Review and try the merge again.")
    # Branch protection decides whoever merges (auto-merge): 405 with GitHub's words.
    unmet = protection_unmet(repo, pr)
    if unmet is not None:
        raise ApiError(405, unmet, documentation_url="https://docs.github.com/articles/about-protected-branches")
    method = body.get("merge_method") or "merge"
    number = pr["number"]
    if method == "rebase" and signature_rule(full, repo, pr["base"]) is not None:
        raise ApiError(405, REBASE_UNSIGNABLE)
    sha = merged_commit(full, pr, method, base_sha, head_sha, body)
    repo["refs"][base_ref] = sha
    merged(full, repo, pr, head_sha, base_sha, sha)
    return sha


def merged(full, repo, pr, head_sha, base_sha, sha):
    """Pull request `pr` merged at `head_sha` into its base, which moved from `base_sha` to `sha`."""
    MERGES.append({"repo": full, "number": pr["number"], "head": head_sha, "base_before": base_sha, "commit": sha,
                   "statuses": {c: st["state"] for c, st in repo["statuses"].get(head_sha, {}).items()},
                   "approvals": len(pr.get("approvals") or ())})
    pr["state"], pr["merged"] = "closed", True
    pr["pinned_head"] = head_sha
    pr["auto_merge"] = None
    # "merged_at" and "closed_at" are the time of the merge (the `pull-request` schema of
    # https://docs.github.com/rest/pulls/pulls#get-a-pull-request; a merged pull request is closed).
    pr["merged_at"] = pr["closed_at"] = iso_now()
    touch(pr)


def merged_commit(full, pr, method, base_sha, head_sha, body=None, when=None):
    """The commit `method` makes of `head_sha` on `base_sha` for pull request `pr` (see
    `merge_pull`), at `when` (now when None), without moving any ref: 405 when it cannot be
    performed."""
    body = body or {}
    owner, number = full.split("/")[0], pr["number"]
    if method == "rebase":
        if merge_base(base_sha, head_sha) is None:
            raise ApiError(405, NOT_MERGEABLE)
        sha = base_sha
        for c in pull_commits(base_sha, head_sha):
            commit = get_obj(c, "commit")
            if len(commit["parents"]) != 1:
                continue
            tree = merged_tree(sha, c, since=commit["parents"][0])
            sha = put_commit(tree, [sha], commit["message"], when=when)
        return sha
    tree = merged_tree(base_sha, head_sha)
    if method == "squash":
        title = body.get("commit_title") or f"{pr['title']} (#{number})"
        parents = [base_sha]
    else:
        title = body.get("commit_title") or f"Merge pull request #{number} from {owner}/{pr['head']}"
        parents = [base_sha, head_sha]
    message = title + ("\n\n" + body["commit_message"] if body.get("commit_message") else "")
    return put_commit(tree, parents, message, when=when, signed=github_signs())


def iso_now(t=None):
    """GitHub's timestamps: ISO 8601 in UTC ("YYYY-MM-DDTHH:MM:SSZ",
    https://docs.github.com/rest/using-the-rest-api/timezones-and-the-rest-api)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


def token_expiration_header(expiry):
    """`GitHub-Authentication-Token-Expiration`: when the token a request carried expires, sent
    with every answer to a token that has an expiry and absent for one without ("Expiration
    options for personal access tokens",
    https://github.blog/changelog/2021-07-26-expiration-options-for-personal-access-tokens/), as
    `2021-10-07 19:07:53 UTC` (GitHub's answer as curl shows it,
    https://github.com/github/gh-aw/issues/20097)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(expiry))


def base64_lines(data: bytes) -> str:
    """Base64 in lines of 60 characters, each ending in a newline (Ruby's `Base64.encode64`)."""
    text = base64.b64encode(data).decode()
    return "".join(text[i:i + 60] + "\n" for i in range(0, len(text), 60))


def touch(pr):
    """Marks a pull request updated now (its `updated_at`, and the order `sort=updated` lists)."""
    pr["updated"] = time.time()
    pr["updated_at"] = iso_now(pr["updated"])


# --- branch protection, merge state, auto-merge -----------------------------------------
#
# Branch protection ("Update branch protection", https://docs.github.com/rest/branches/branch-protection#update-branch-protection,
# `PUT /repos/{owner}/{repo}/branches/{branch}/protection`, a person's request the fake serves):
# `required_status_checks.contexts` and `.strict` ("Require branches to be up to date before
# merging", https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#require-status-checks-before-merging),
# `required_pull_request_reviews.required_approving_review_count`. Approving reviews come from
# "Create a review for a pull request" with `event: APPROVE`
# (https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request). The
# repository's "Allow auto-merge" is `allow_auto_merge` of "Update a repository" ("Either `true`
# to allow auto-merge on pull requests, or `false` to disallow auto-merge", default false;
# https://docs.github.com/rest/repos/repos#update-a-repository).
#
# `mergeStateStatus` (https://docs.github.com/graphql/reference/enums#mergestatestatus) is derived
# from that state: DIRTY "The merge commit cannot be cleanly created" (the merge rule above),
# BEHIND "The head ref is out of date" (strict and the head lacks the base's head), BLOCKED "The
# merge is blocked" (a required status missing, pending or failing, too few approvals), UNSTABLE
# "Mergeable with non-passing commit status" (a status that is not required), else CLEAN.
# Commit statuses are the checks the fake models (CI reports them with `POST /statuses/{sha}`);
# check runs are not modelled.
#
# GitHub's auto-merge ("Automatically merging a pull request",
# https://docs.github.com/pull-requests/collaborating-with-pull-requests/incorporating-changes-from-a-pull-request/automatically-merging-a-pull-request):
# "the pull request will merge automatically when all required reviews are met and all required
# status checks have passed" (`settle`, after every write); "Before you can use auto-merge with a
# pull request, auto-merge must be enabled for the repository"; closing the pull request cancels
# it. `enablePullRequestAutoMerge` refuses, with the messages GitHub gives as clients quote them:
# a pull request that can merge now, "Pull request is in clean status" / "... unstable status"
# (https://github.com/peter-evans/enable-pull-request-automerge/issues/343, /issues/1118); a
# repository that does not allow it, "Auto merge is not allowed for this repository"
# (https://github.com/indexable-inc/index/issues/2948); a pull request that is not open, "Can't
# enable auto-merge for this pull request." (https://github.com/peter-evans/enable-pull-request-automerge/issues/310);
# a head that is not `expectedHeadOid` ("The expected head OID of the pull request", the input's
# description; GitHub's message for it is not documented, the fake's names both heads). Not
# modelled: auto-merge disabled by a push from someone without write permission.
#
# "Merge a pull request" is held to the protection: 405 `Required status check "X" is expected.`
# (https://github.com/claroline/Distribution/issues/492), "At least 1 approving review is required
# by reviewers with write access." (https://github.com/Reviewable/Reviewable/issues/561), "N of N
# required status checks are expected." for a head behind a strict base
# (https://github.com/RakuenSoftware/aimee/pull/2460).

MERGES = []  # every merge of a pull request: {"repo", "number", "head", "base_before", "commit", "statuses", "approvals"}


def protection_of(repo, branch):
    return (repo.get("protection") or {}).get(branch)


def protection_unmet(repo, pr):
    """GitHub's 405 message when the base's protection does not let `pr` merge, else None."""
    if unsigned_in_pull(repo["full_name"], repo, pr) is not None:
        return UNSIGNED_MESSAGE
    p = protection_of(repo, pr["base"])
    if p is None:
        return None
    head_sha, base_sha = repo["refs"].get("heads/" + pr["head"]), repo["refs"].get("heads/" + pr["base"])
    contexts = p.get("contexts") or []
    if p.get("strict") and contexts and not is_ancestor(base_sha, head_sha):
        return f"{len(contexts)} of {len(contexts)} required status checks are expected."
    statuses = repo["statuses"].get(head_sha, {})
    for ctx in contexts:
        state = statuses.get(ctx, {}).get("state")
        if state in ("failure", "error"):
            return f'Required status check "{ctx}" is failing.'
        if state != "success":
            return f'Required status check "{ctx}" is expected.'
    need = p.get("approvals", 0)
    if len(pr.get("approvals") or ()) < need:
        return f"At least {need} approving review{' is' if need == 1 else 's are'} required by reviewers with write access."
    return None


def merge_state(repo, pr):
    """The pull request's `mergeStateStatus` (see above). `UNKNOWN`, "The state cannot currently
    be determined", while GitHub computes it: it does so in the background after a push to the
    pull request or its base ("Get a pull request": "If the value is `null`, then GitHub has
    started a background job to compute the mergeability. After giving the job time to complete,
    resubmit the request", https://docs.github.com/rest/pulls/pulls#get-a-pull-request); `POST /_fake/merge_state
    {"repo", "number", "computed": false}` holds a pull request there."""
    head_sha, base_sha = repo["refs"].get("heads/" + pr["head"]), repo["refs"].get("heads/" + pr["base"])
    if head_sha is None or base_sha is None or pr.get("merge_state_pending"):
        return "UNKNOWN"
    if not mergeable(repo, pr):
        return "DIRTY"
    p = protection_of(repo, pr["base"])
    if p is not None and p.get("strict") and p.get("contexts") and not is_ancestor(base_sha, head_sha):
        return "BEHIND"
    if protection_unmet(repo, pr) is not None:
        return "BLOCKED"
    if any(st["state"] != "success" for st in repo["statuses"].get(head_sha, {}).values()):
        return "UNSTABLE"
    return "CLEAN"


def settle(full, repo, triggered=True):
    """GitHub's auto-merge: every open pull request whose auto-merge is on and whose
    requirements are met merges, by its method, as whoever enabled it. `triggered`: the change
    can trigger auto-merge into a merge queue (a rule relaxed or a queue required cannot)."""
    # Where a queue is required, auto-merge adds to the queue instead ("merge queues").
    settle_queues(full, repo, triggered)
    while True:
        ready = [pr for pr in repo["pulls"].values()
                 if pr["state"] == "open" and pr.get("auto_merge") and not queue_of(repo, pr)
                 and merge_state(repo, pr) in ("CLEAN", "HAS_HOOKS", "UNSTABLE")]
        if not ready:
            return
        pr = ready[0]
        am = pr["auto_merge"]
        try:
            merge_pull(full, repo, pr, {"merge_method": am["merge_method"].lower()})
            pr["closed_by"] = "auto-merge"
            pr["merged_by"] = am["enabled_by"]
        except ApiError:
            pr["auto_merge"] = None


def repo_node_id(repo):
    """A repository's GraphQL node id (REST `node_id`; opaque to clients)."""
    return f"R_kgDO{repo['id']}"


def node_id(repo, pr):
    """A pull request's GraphQL node id (opaque to clients)."""
    return f"PR_kwDO{repo['id']}_{pr['number']}"


def given_fields(info, arg):
    """The fields of the input object argument `arg` as the request wrote them (the executor fills
    in the schema's defaults, `mergeMethod: MERGE` among them, so the document tells what was sent)."""
    for node in info.field_nodes:
        for a in node.arguments or ():
            if a.name.value != arg:
                continue
            if a.value.kind == "object_value":
                return {f.name.value for f in a.value.fields}
            if a.value.kind == "variable":
                return set((info.variable_values.get(a.value.name.value) or {}).keys())
    return set()


def pull_of_node(node):
    """(repository, pull request) of a node id, or (None, None)."""
    for full, repo in REPOS.items():
        for pr in repo["pulls"].values():
            if node_id(repo, pr) == node:
                return full, repo, pr
    return None, None, None


def set_protection(repo, branch, body):
    """`PUT /branches/{branch}/protection`: what the fake keeps of it, and its answer."""
    checks = body.get("required_status_checks") or {}
    reviews = body.get("required_pull_request_reviews") or {}
    contexts = list(checks.get("contexts") or []) + [c["context"] for c in checks.get("checks") or [] if c.get("context")]
    repo.setdefault("protection", {})[branch] = {
        "contexts": contexts, "strict": bool(checks.get("strict")),
        "approvals": int(reviews.get("required_approving_review_count") or 0) if body.get("required_pull_request_reviews") else 0,
    }
    out = {"url": f"https://api.github.example/repos/branches/{branch}/protection"}
    # The `protected-branch` schema's `required_status_checks` is an object when there are
    # required checks, and absent (not null) when there are none.
    if body.get("required_status_checks"):
        out["required_status_checks"] = {"strict": bool(checks.get("strict")), "contexts": contexts,
                                         "checks": [{"context": c, "app_id": None} for c in contexts]}
    return out


# --- merge queues ------------------------------------------------------------------------------------
#
# A base branch can require a merge queue (branch protection's or a ruleset's "Require merge
# queue"): "If a merge queue is required by the branch protection setting for the branch, you can
# add your pull requests to a merge queue and GitHub will merge the pull requests for you once all
# required checks have passed" ("Incorporating changes from a pull request",
# https://docs.github.com/articles/incorporating-changes-from-a-pull-request). What the fake keeps:
#
# - an entry is tested as a merge group: "The merge queue creates temporary branches with a
#   special prefix to validate pull request changes. The changes in the pull request are then
#   grouped into a `merge_group` with the latest version of the `base_branch` ... GitHub will merge
#   all these changes into `base_branch` once the checks required by the branch protections of
#   `base_branch` pass" ("Managing a merge queue", github/docs
#   content/repositories/configuring-branches-and-merges-in-your-repository/configuring-pull-request-merges/managing-a-merge-queue.md).
#   The fake makes the group's commit as the queue's method would merge the entry's head on the
#   base's head (`merged_commit`), on the branch `gh-readonly-queue/<base>/pr-<number>-<base sha>`
#   ("other CI providers ... run when a branch that begins with the special prefix
#   `gh-readonly-queue/{base_branch}` is created", ibid.; the full name as CI systems see it,
#   `gh-readonly-queue/master/pr-18479-698d5ab6...`, https://github.com/pulumi/pulumi/pull/18488,
#   `refs/heads/gh-readonly-queue/master/pr-232-07a0f6a9...`, https://github.com/moka-rs/moka/issues/233),
#   a branch like any other: its commit and tree are read through the git data, contents and
#   archive endpoints. What the `merge_group` event says of it (`merge_group_event`) has the
#   `merge-group` schema's fields: `head_sha` "The SHA of the merge group", `head_ref` "The full
#   ref of the merge group", `base_sha` "The SHA of the merge group's parent commit", `base_ref`
#   "The full ref of the branch the merge group will be merged into" (GitHub's REST description,
#   components/schemas/merge-group). CI reports on `head_sha` through the commit status API
#   (`POST /statuses/{sha}`; check runs are not modelled, as for heads). Once every context the
#   base's protection requires reads `success` there, the base fast-forwards to the group's
#   commit and the pull request reads merged, by the entry's enqueuer; "if there are failed
#   required status checks or conflicts with the base branch, the pull request will be removed
#   from the queue" ("Managing a merge queue", failing CI, quoted in
#   https://github.com/aranya-project/aranya-core/pull/363): a required context `failure` or
#   `error` on the group, or a group that cannot be made, ends the entry, and its branch is
#   deleted. A base that moved while the group awaited its checks (a push outside the queue)
#   makes a new group on the new base, which CI must check again. Being behind the base is no
#   reason to wait: the queue tests the merge with the latest base. Not modelled: groups of more
#   than one entry (each entry is tested on the base alone, the next one after a merge on the
#   moved base), the status check timeout;
# - auto-merge queues a pull request when a requirement turns met (a status passing, an approval),
#   not on a passive change: "GitHub only enqueues a PR on specific triggers (new commit, review,
#   label, or an explicit `enable-auto-merge` call) — not on a passive change to *why* a PR became
#   mergeable" such as a ruleset relaxed (https://github.com/osac-project/osac/pull/924): branch
#   protection changed or a queue required leaves an armed pull request out of the queue;
# - an entry is for the head it was added with: a push takes it out ("GitHub also auto-dequeues
#   on a later push", https://github.com/cncf/prow-github-actions/pull/166);
# - `enablePullRequestAutoMerge` with a `mergeMethod` is refused: "The merge strategy for main is
#   set by the merge queue" (https://github.com/osac-project/osac/pull/924,
#   https://github.com/kunchenguid/firstmate/pull/3335; the input's description says a method "is
#   ignored" with a queue, but GitHub refuses one the queue does not use, and the fake refuses any
#   given). Without one, it adds the pull request to the queue once every requirement is met
#   (`settle`; at once when only being up to date is missing), the entry's enqueuer being whoever
#   enabled it and
#   `autoMergeRequest` gone ("OPEN plus autoMergeRequest false plus an active merge-queue entry",
#   https://github.com/vanillagreencom/kendex/issues/608; "once a PR is in the merge queue, REST
#   `pull.auto_merge` reads `null`", https://github.com/objectstack-ai/objectstack/issues/14605,
#   however it got there). It still needs "Allow auto-merge"
#   ("GraphQL: Auto merge is not allowed for this repository (enablePullRequestAutoMerge)" where a
#   queue is required, https://github.com/cli/cli/pull/14379). A pull request with nothing to wait
#   for is refused as without a queue ("... is in clean status"): GitHub's own client adds such a
#   one with `enqueuePullRequest` ("If required checks have not yet passed, auto-merge will be
#   enabled. If required checks have passed, the pull request will be added to the merge queue",
#   `gh pr merge --help`, quoted in https://github.com/stella/stella/pull/2985, where GitHub "can
#   reject it because the pull request is already clean";
#   https://github.com/rust-lang/triagebot/pull/2450);
# - `enqueuePullRequest` needs no "Allow auto-merge" (the same pull request) but every requirement
#   met, refusing with "Pull request " and what is missing ("Pull request Waiting on code owner
#   review from ...", https://github.com/github/app/issues/93; "Pull request Required workflow
#   '...' is not satisfied", https://github.com/devantler-tech/platform/pull/3138), and twice with
#   "Pull request is already in the queue" (https://github.com/ClickHouse/ClickHouse/pull/109183);
#   `expectedHeadOid` not the head is refused like auto-merge's;
# - the `enqueuer` of an entry auto-merge made is whoever enabled auto-merge: GitHub's answer for
#   that case is not documented; the fake takes the enabler, as it does for `merged_by`;
# - `dequeuePullRequest` of a pull request not in the queue: GitHub's words are not documented,
#   the fake's are "Pull request is not in the merge queue";
# - "Merge a pull request" is 405 "Changes must be made through the merge queue."
#   (https://github.com/cncf/prow-github-actions/pull/166,
#   https://github.com/pascalgn/automerge-action/issues/235);
# - `mergeStateStatus` is read as without a queue: "an enqueued PR keeps answering CLEAN"
#   (https://github.com/netresearch/git-workflow-skill/pull/134).

THROUGH_THE_QUEUE = "Changes must be made through the merge queue."


def queue_of(repo, pr):
    """The method of the queue `pr`'s base requires ("MERGE", "SQUASH", "REBASE"), or None."""
    return (repo.get("merge_queues") or {}).get(pr["base"])


def entry_of(repo, pr):
    """`pr`'s queue entry while it stands: open, its base still queued, its head the one added."""
    e = pr.get("queue_entry")
    if e and pr["state"] == "open" and queue_of(repo, pr) and repo["refs"].get("heads/" + pr["head"]) == e["head"]:
        return e
    return None


def queue_unmet(repo, pr):
    """Why `pr` cannot enter its queue yet (GitHub's words after "Pull request "), or None: every
    requirement met but being up to date, which the queue sees to."""
    state = merge_state(repo, pr)
    if state in ("CLEAN", "HAS_HOOKS", "UNSTABLE"):
        return None
    if state == "DIRTY":
        return "Merge conflict"
    if state == "BEHIND":
        p = protection_of(repo, pr["base"]) or {}
        head_sha = repo["refs"].get("heads/" + pr["head"])
        statuses = repo["statuses"].get(head_sha, {})
        for ctx in p.get("contexts") or []:
            if statuses.get(ctx, {}).get("state") != "success":
                return f'Required status check "{ctx}" is expected.'
        need = p.get("approvals", 0)
        if len(pr.get("approvals") or ()) < need:
            return f"At least {need} approving review is required."
        return None
    return protection_unmet(repo, pr) or "is not mergeable"


GROUP_CLOCK = [0]  # the time of the newest merge group's commit


def settle_queues(full, repo, triggered=True, groups=True):
    """Entries whose head moved or whose pull request closed are gone; after a change that can
    trigger it (`triggered`), pull requests whose auto-merge is on and whose requirements are met
    enter their queue as their enabler's; then every entry's merge group is made (again, on a
    moved base) and judged by the base's required checks on its commit (see above), unless not
    `groups`."""
    for pr in repo["pulls"].values():
        if pr.get("queue_entry") and entry_of(repo, pr) is None:
            leave_queue(repo, pr)
        am = pr.get("auto_merge")
        if triggered and am and pr["state"] == "open" and queue_of(repo, pr) and queue_unmet(repo, pr) is None:
            pr["queue_entry"] = {"enqueuer": am["enabled_by"], "head": repo["refs"]["heads/" + pr["head"]],
                                 "at": iso_now()}
            pr["auto_merge"] = None
            touch(pr)
    for pr in sorted(repo["pulls"].values(), key=lambda p: p["queue_entry"]["at"] if p.get("queue_entry") else ""):
        if groups and pr.get("queue_entry"):
            run_group(full, repo, pr)


def leave_queue(repo, pr):
    """`pr`'s entry ends: out of the queue, its merge group's branch deleted."""
    group = (pr.get("queue_entry") or {}).get("group")
    if group:
        repo["refs"].pop(group["head_ref"][len("refs/"):], None)
    pr["queue_entry"] = None
    touch(pr)


def run_group(full, repo, pr):
    """The queue's work on `pr`'s entry: its merge group made on the base's head, then merged or
    dropped by the required checks reported on it (see above)."""
    e = pr["queue_entry"]
    base_ref = "heads/" + pr["base"]
    base_sha = repo["refs"].get(base_ref)
    group = e.get("group")
    if base_sha is None:
        leave_queue(repo, pr)  # the base branch is gone
        return
    if group is None or group["base_sha"] != base_sha:
        if group:
            repo["refs"].pop(group["head_ref"][len("refs/"):], None)
        # Each group is a commit of its own, as GitHub's are (their times differ): a status
        # reported on an earlier group of the same head and base is not this one's.
        GROUP_CLOCK[0] = max(int(time.time()), GROUP_CLOCK[0] + 1)
        try:
            sha = merged_commit(full, pr, queue_of(repo, pr).lower(), base_sha, e["head"], when=GROUP_CLOCK[0])
        except ApiError:
            leave_queue(repo, pr)  # a conflict with the base
            return
        ref = f"heads/gh-readonly-queue/{pr['base']}/pr-{pr['number']}-{base_sha}"
        repo["refs"][ref] = sha
        e["group"] = group = {"head_sha": sha, "head_ref": "refs/" + ref, "base_sha": base_sha,
                              "base_ref": "refs/" + base_ref}
    states = repo["statuses"].get(group["head_sha"], {})
    required = (protection_of(repo, pr["base"]) or {}).get("contexts") or []
    reported = [states.get(c, {}).get("state") for c in required]
    if any(st in ("failure", "error") for st in reported):
        leave_queue(repo, pr)
        return
    if any(st != "success" for st in reported):
        return  # awaiting its checks
    # A requirement of the pull request's own that no longer holds (an approval dismissed, a
    # required status of its head failed since) ends the entry as a failed check does.
    if queue_unmet(repo, pr) is not None:
        leave_queue(repo, pr)
        return
    repo["refs"][base_ref] = group["head_sha"]
    repo["refs"].pop(group["head_ref"][len("refs/"):], None)
    pr["queue_entry"] = None
    merged(full, repo, pr, e["head"], base_sha, group["head_sha"])
    pr["closed_by"] = "merge queue"
    pr["merged_by"] = e["enqueuer"]


def merge_group_event(repo, pr):
    """The `merge_group` object of the `merge_group` event GitHub sends for `pr`'s entry while
    its group awaits checks (see above), or None."""
    e = entry_of(repo, pr)
    group = (e or {}).get("group")
    if group is None:
        return None
    c = get_obj(group["head_sha"], "commit")
    # `head_commit` is a `simple-commit` (the `merge-group` schema).
    ident = {"name": "GitHub", "email": "noreply@github.com"}
    head_commit = {"id": group["head_sha"], "tree_id": c["tree"], "message": c["message"],
                   "timestamp": iso_now(c["when"]), "author": ident, "committer": ident}
    event = {**group, "head_commit": head_commit}
    errors = schema_errors("merge-group", event)
    if errors:
        raise ApiError(500, f"the fake's merge_group event drifted from GitHub's merge-group schema: {errors}")
    return event


def enqueue(repo, pr, login):
    """`enqueuePullRequest` for `login` (see above): the entry (its merge group is made by
    `settle`, after the mutation)."""
    Refused = github_graphql.Refused
    if entry_of(repo, pr):
        raise Refused("UNPROCESSABLE", "Pull request is already in the queue")
    why = queue_unmet(repo, pr)
    if why is not None:
        raise Refused("UNPROCESSABLE", f"Pull request {why}")
    pr["queue_entry"] = {"enqueuer": login, "head": repo["refs"]["heads/" + pr["head"]], "at": iso_now()}
    pr["auto_merge"] = None  # in the queue, auto-merge is over (see above)
    touch(pr)
    return pr["queue_entry"]


# --- comparing two commits -------------------------------------------------------------------------
#
# "Compare two commits" (https://docs.github.com/rest/commits/commits#compare-two-commits):
# `GET /repos/{owner}/{repo}/compare/{basehead}`, `basehead` being `BASE...HEAD` (branch names or
# commit SHAs; `USERNAME:BASE...USERNAME:HEAD` names branches of the same network). "This endpoint
# is equivalent to running the `git log BASE..HEAD` command, but it returns commits in a different
# order ... the API returns commits in chronological order", and "When calling this endpoint
# without any paging parameter (`per_page` or `page`), the returned list is limited to 250
# commits, and the last commit in the list is the most recent of the entire comparison"; with
# paging, "The list of changed files is only shown on the first page of results, and it includes
# up to 300 changed files" (the operation's description in GitHub's OpenAPI description).
# `status` says where HEAD stands relative to BASE: `ahead` (commits only on HEAD since their
# merge base), `behind` (only on BASE), `diverged` (both), `identical` (the same commit); the
# schema `commit-comparison` lists these four. `files` is the three-dot diff: what changed between
# the merge base and HEAD, as the compare view shows it ("three-dot Git diff comparison",
# https://docs.github.com/pull-requests/collaborating-with-pull-requests/proposing-changes-to-your-work-with-pull-requests/about-comparing-branches-in-pull-requests#three-dot-and-two-dot-git-diff-comparisons).

COMPARE_COMMITS_CAP = 250
COMPARE_FILES_CAP = 300


def line_changes(old, new):
    """(additions, deletions) between two blobs' texts, line by line as `git diff --numstat`
    counts them (difflib's matching, not git's Myers diff: a line moved among equal lines can be
    counted differently, the totals of an edit are the same); binary content counts 0 / 0, as
    GitHub shows no line counts for it."""
    import difflib
    if b"\0" in old or b"\0" in new:
        return 0, 0
    a, b = old.decode("utf-8", "replace").splitlines(), new.decode("utf-8", "replace").splitlines()
    adds = dels = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op in ("replace", "delete"):
            dels += i2 - i1
        if op in ("replace", "insert"):
            adds += j2 - j1
    return adds, dels


def diff_entries(full, since_sha, head_sha):
    """The `diff-entry` list of the files that differ between commits `since_sha` and
    `head_sha`, sorted by path: `added`, `removed` or `modified` (a mode change is `modified`;
    renames are not detected, a renamed file is a removal and an addition). `sha` is the blob at
    HEAD, the removed blob for `removed`."""
    old, new = commit_files(since_sha), commit_files(head_sha)
    out = []
    for path in sorted(set(old) | set(new)):
        o, n = old.get(path), new.get(path)
        if o == n:
            continue
        status = "added" if o is None else "removed" if n is None else "modified"
        sha = (n or o)[1]
        # A gitlink's entry names a commit no blob holds: listed like a file, with no lines. That a
        # comparison lists a submodule change at all, with the submodule's commit as `sha`, is a
        # belief (GitHub's web diff shows it as "Subproject commit"; the REST description does
        # not say): the product does not rely on it either way, since a listed path whose blob
        # the repository lacks sends it to the trees, and an unlisted one is no file to check.
        adds, dels = line_changes((get_obj(o[1], "blob") or b"") if o else b"", (get_obj(n[1], "blob") or b"") if n else b"")
        ref = head_sha if n else since_sha
        out.append({"sha": sha, "filename": path, "status": status, "additions": adds, "deletions": dels,
                    "changes": adds + dels,
                    "blob_url": f"https://github.example/{full}/blob/{ref}/{path}",
                    "raw_url": f"https://github.example/{full}/raw/{ref}/{path}",
                    "contents_url": f"https://api.github.example/repos/{full}/contents/{path}?ref={ref}"})
    return out


def compare_commits(full, repo, basehead, per_page=None, page=None):
    """`GET /compare/{basehead}` (see above): the `commit-comparison` answer, or ApiError 404
    when `basehead` is not `BASE...HEAD`, names an unknown ref, or the two share no history."""
    owner = full.split("/")[0]
    base, sep, head = basehead.partition("...")
    if not sep:
        raise ApiError(404, "Not Found")

    def side(ref):
        # `USERNAME:BRANCH` names a branch of a repository of the network; only this one is modelled.
        if ":" in ref:
            who, _, ref = ref.partition(":")
            if who != owner:
                raise ApiError(404, "Not Found")
        sha = resolve(repo, ref)
        if sha is None:
            raise ApiError(404, "Not Found")
        return sha

    base_sha, head_sha = side(base), side(head)
    since = merge_base(base_sha, head_sha)
    if since is None:
        raise ApiError(404, f"No common ancestor between {base} and {head}.")
    ahead = ancestors(head_sha) - ancestors(base_sha)
    behind = ancestors(base_sha) - ancestors(head_sha)
    if not ahead and not behind:
        status = "identical"
    elif ahead and behind:
        status = "diverged"
    else:
        status = "ahead" if ahead else "behind"
    commits = pull_commits(base_sha, head_sha)
    paged = per_page is not None or page is not None
    if paged:
        size, number = min(max(per_page or 30, 1), 100), max(page or 1, 1)
        shown = commits[(number - 1) * size:number * size]
    else:
        shown = commits[-COMPARE_COMMITS_CAP:]
    files = diff_entries(full, since, head_sha)[:COMPARE_FILES_CAP] if not paged or (page or 1) == 1 else []
    web = f"https://github.example/{full}/compare/{basehead}"
    return {
        "url": f"https://api.github.example/repos/{full}/compare/{basehead}",
        "html_url": web,
        "permalink_url": f"https://github.example/{full}/compare/{owner}:{base_sha}...{owner}:{head_sha}",
        "diff_url": web + ".diff",
        "patch_url": web + ".patch",
        "base_commit": commit_json(full, base_sha),
        "merge_base_commit": commit_json(full, since),
        "status": status,
        "ahead_by": len(ahead),
        "behind_by": len(behind),
        "total_commits": len(ahead),
        "commits": [commit_json(full, c) for c in shown],
        "files": files,
    }


# --- signed commits --------------------------------------------------------------------------------
#
# Who GitHub signs for (each commit's `verification`, see `verification_json`):
#
# - "Create a commit" (Git data API) and "Merge a branch" (`POST /merges`), by a GitHub App's
#   installation token naming no author, committer or signature: signed ("Signature verification
#   for bots will only work if the request is verified and authenticated as the GitHub App or bot
#   and contains no custom author information, custom committer information, and no custom
#   signature information, such as Commits API", GitHub's "About commit signature verification",
#   quoted in https://github.com/Nautilus-Cyberneering/pygithub/blob/main/docs/how_to_sign_automatic_commits_in_github_actions.md);
#   by a personal access token: unsigned (`verified: false, reason: "unsigned"` for the REST Git
#   data API, https://github.com/anthropics/claude-code-action/issues/1511). That a token's
#   `POST /merges` merge is unsigned too is the fake's belief (GitHub does not document it): it is
#   made by the same API for the same credentials.
# - GraphQL `createCommitOnBranch`: signed for both (Renovate's `platformCommit` commits so,
#   https://github.com/renovatebot/renovate/discussions/44085; with a token, "signer: web-flow",
#   https://github.com/helium/HIP/pull/1226; both token kinds, https://github.com/babarot/gh-infra/pull/139),
#   every file written 100644 ("The createCommitOnBranch GraphQL mutation creates all files as
#   mode 100644", https://github.com/babarot/gh-infra/pull/167), no symlink, no merge commit (one
#   parent: the branch's head), and `expectedHeadOid` checked.
# - "Update branch" (`PUT /pulls/{n}/update-branch`) and the merge or squash of a pull request:
#   commits GitHub makes itself, signed whoever asks (a merge-commit update is signed,
#   https://github.com/orgs/community/discussions/64125). A rebase merge is not ("Signature
#   verification for rebase and merge", https://github.com/github/docs/pull/18216; "GitHub rebase
#   merges cannot be signed", https://github.com/pulseengine/temper/pull/7): onto a base
#   requiring signatures it is refused (405, the fake's words: GitHub's are not documented).
# - People's commits seeded here: unsigned.
# - GitHub Enterprise Server (`--flavor ghes`) signs only where the site administrator enabled web
#   commit signing ("Commit signing on GitHub Enterprise requires web commit signing to be
#   enabled. Otherwise commits from GitHub apps will be unverified",
#   https://github.com/sourcegraph/docs/pull/618, citing
#   https://docs.github.com/enterprise-server@3.14/admin/configuring-settings/configuring-user-applications-for-your-enterprise/configuring-web-commit-signing):
#   `POST /_fake/settings {"web_commit_signing": true}` turns it on.
#
# What requires signatures: a ruleset's `required_signatures` rule ("Commits pushed to matching
# refs must have verified signatures", the `repository-rule-required-signatures` schema;
# `POST /_fake/rulesets {"repo", "branch", "required_signatures": true}`), listed by "Get rules for
# a branch"; classic protection's "Require signed commits" (`POST
# .../branches/{b}/protection/required_signatures`, on a protected branch), which GraphQL's
# `Ref.refUpdateRule.requiresSignatures` shows to non-administrators. Either checks every commit
# of a pull request into the branch: one unverified commit and the pull request is `BLOCKED`,
# every check green ("Pull requests with unsigned commits cannot be merged", CIS GitHub
# benchmark 1.1.12, https://hub.steampipe.io/mods/turbot/github_compliance/controls/control.cis_supply_chain_v100_1_1_12;
# helium/HIP#1226: an unsigned commit and the pull request read BLOCKED), and its merge refused
# with 405 "Commits must have verified signatures." (GitHub's words for a push it refuses so).

UNSIGNED_MESSAGE = "Commits must have verified signatures."
REBASE_UNSIGNABLE = "Rebase merges cannot be signed by GitHub, and the base branch requires signed commits."
SETTINGS = {"web_commit_signing": False}


def github_signs():
    """Whether GitHub signs the commits it makes at all: always on github.com; on GitHub
    Enterprise Server only with web commit signing enabled."""
    flavor = getattr(SPEC["description"], "flavor", "github")
    return flavor != "ghes" or SETTINGS["web_commit_signing"]


def signs_git_data(token, body):
    """Whether a Git-data commit (or a `POST /merges` merge) by `token` with `body` is signed."""
    named = any(k in (body or {}) for k in ("author", "committer", "signature"))
    return github_signs() and bool(token) and token.startswith("ghs_") and not named


def signature_rule(full, repo, branch):
    """How `branch` requires signatures: "ruleset", "protection" or None."""
    for rule in RULESETS:
        if rule.get("repo") == full and rule.get("required_signatures") and _ruleset_matches(rule, repo, branch):
            return "ruleset"
    if (protection_of(repo, branch) or {}).get("signatures"):
        return "protection"
    return None


def unsigned_in_pull(full, repo, pr):
    """The oldest commit of `pr` GitHub did not verify, when its base requires signatures."""
    if signature_rule(full, repo, pr["base"]) is None:
        return None
    head_sha, base_sha = repo["refs"].get("heads/" + pr["head"]), repo["refs"].get("heads/" + pr["base"])
    if head_sha is None or base_sha is None:
        return None
    return next((c for c in pull_commits(base_sha, head_sha) if not get_obj(c, "commit").get("signed")), None)


def branch_rules_json(full, repo, branch):
    """`GET /rules/branches/{branch}` ("Get rules for a branch", https://docs.github.com/rest/repos/rules#get-rules-for-a-branch):
    every active rule of the rulesets matching `branch`, `repository-rule-detailed` items. A ruleset
    refusing every update is an `update` rule ("Only allow users with bypass permission to update
    matching refs")."""
    out = []
    for i, rule in enumerate(RULESETS):
        if rule.get("repo") != full or not _ruleset_matches(rule, repo, branch):
            continue
        kind = "required_signatures" if rule.get("required_signatures") else "update"
        out.append({"type": kind, "ruleset_source_type": "Repository", "ruleset_source": full, "ruleset_id": i + 1})
    return out


# --- rulesets ------------------------------------------------------------------------------------
#
# A ruleset can forbid updating matching branches other than through a pull request ("Require a
# pull request before merging": "Require all commits be made to a non-target branch and submitted
# via a pull request before they can be merged";
# https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-rulesets/about-rulesets
# and .../managing-rulesets/available-rules-for-rulesets). GitHub then refuses every push to such
# a branch, through the API too: "Update a reference"
# (https://docs.github.com/rest/git/refs#update-a-reference) answers 422 with the message
# "Repository rule violations found\n\nChanges must be made through a pull request.\n\n"
# (as clients quote it, e.g. https://github.com/satisfactory-factories/application/issues/67 with
# that page as documentation_url). The fake refuses so every ref update of a matching branch:
# PATCH/POST/DELETE of `git/refs`, a `POST /merges` into it and the merge of `PUT
# /pulls/{n}/update-branch` into a matching head branch (each is a push to the branch). Merging a
# pull request into it (`PUT /pulls/{n}/merge`) is what the rule asks for and stays allowed.
# Patterns are GitHub's fnmatch with File::FNM_PATHNAME ("the * wildcard does not match
# directory separators (/)", `**/` spans them;
# https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-rulesets/creating-rulesets-for-a-repository#using-fnmatch-syntax),
# plus the ruleset editor's `~DEFAULT_BRANCH` and `~ALL`.

RULESETS = []  # {"repo": "o/r", "branch": pattern, "message": text}
RULE_MESSAGE = "Changes must be made through a pull request."


def _fnmatch_pathname(pattern, name):
    rx, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            rx, i = rx + "(?:[^/]*/)*", i + 3
        elif pattern.startswith("**", i):
            rx, i = rx + "[^/]*", i + 2
        elif c == "*":
            rx, i = rx + "[^/]*", i + 1
        elif c == "?":
            rx, i = rx + "[^/]", i + 1
        elif c == "[" and "]" in pattern[i + 1:]:
            j = pattern.index("]", i + 1)
            rx, i = rx + "(?!/)[" + pattern[i + 1:j].replace("\\", "\\\\") + "]", j + 1
        else:
            rx, i = rx + re.escape(c), i + 1
    return re.fullmatch(rx, name) is not None


def _ruleset_matches(rule, repo, branch):
    pat = rule.get("branch", "~ALL")
    return pat == "~ALL" or (pat == "~DEFAULT_BRANCH" and branch == repo["default_branch"]) \
        or _fnmatch_pathname(pat, branch)


def branch_rule(full, repo, short_ref):
    """The message of the first ruleset of `full` refusing updates of the ref `short_ref`
    (`heads/x`), or None. A `required_signatures` ruleset refuses no update of its own here: it
    governs what merges into its branches (see "signed commits")."""
    if not short_ref.startswith("heads/"):
        return None
    branch = short_ref[len("heads/"):]
    for rule in RULESETS:
        if rule.get("repo") != full or rule.get("required_signatures"):
            continue
        if _ruleset_matches(rule, repo, branch):
            return rule.get("message") or RULE_MESSAGE
    return None


def check_rules(full, repo, short_ref):
    """ApiError 422 "Repository rule violations found ..." when a ruleset protects `short_ref`."""
    message = branch_rule(full, repo, short_ref)
    if message is not None:
        raise ApiError(422, f"Repository rule violations found\n\n{message}\n\n")


# --- merging a branch, updating a pull request's branch ------------------------------------------

def merge_branches(full, repo, body, signed=False):
    """`POST /merges` ("Merge a branch", https://docs.github.com/rest/branches/branches#merge-a-branch):
    merges `head` (a branch name or a commit SHA) into the branch `base` with a merge commit
    whose parents are base's head and head (the description: 201 "The resulting merge commit").
    Returns the merge commit's SHA, or None when base already contains head (204 "Response when
    already merged"). 404 "Base does not exist" / "Head does not exist" ("Not Found when the base
    or head does not exist"), 409 "Merge conflict" ("Conflict when there is a merge conflict",
    the file-level merge of `merged_tree`), 422 when a ruleset protects `base` (after the conflict
    check). The default message "Merge {head} into {base}" is the fake's: the docs say only "a
    default message will be used"."""
    base, head = body.get("base", ""), body.get("head", "")
    base_ref = "heads/" + base
    base_sha = repo["refs"].get(base_ref)
    if base_sha is None:
        raise ApiError(404, "Base does not exist")
    head_sha = resolve(repo, head) if head else None
    if head_sha is None:
        raise ApiError(404, "Head does not exist")
    if is_ancestor(head_sha, base_sha):
        return None
    try:
        tree = merged_tree(base_sha, head_sha)
    except ApiError:
        raise ApiError(409, "Merge conflict")
    check_rules(full, repo, base_ref)
    sha = put_commit(tree, [base_sha, head_sha], body.get("commit_message") or f"Merge {head} into {base}", signed=signed)
    repo["refs"][base_ref] = sha
    return sha


NO_NEW_BASE_COMMITS = "There are no new commits on the base branch."
HEAD_MOVED = "expected head sha didn't match current head ref."
UPDATE_CONFLICT = "merge conflict between base and head"


def update_pull_branch(full, repo, pr, body):
    """`PUT /pulls/{n}/update-branch` ("Update a pull request branch",
    https://docs.github.com/rest/pulls/pulls#update-a-pull-request-branch): "Updates the pull
    request branch with the latest upstream changes by merging HEAD from the base branch into the
    pull request branch", as the "Update branch" button does. GitHub answers 202 and merges
    asynchronously; the fake merges before answering. The merge commit's parents are the head
    and the base, its message the button's "Merge branch '{base}' into {head}". Returns the new
    head SHA. Refusals, all 422 (the only refusal the description lists):

    - `expected_head_sha` not the head: "If the expected SHA does not match the pull request's
      HEAD, you will receive a `422 Unprocessable Entity` status" (the description); the message
      "expected head sha didn't match current head ref." is GitHub's as public scripts match it
      (not in GitHub's docs);
    - a conflict: "merge conflict between base and head" (GitHub's message as `gh pr
      update-branch` prints it, quoted in
      https://github.com/rorkai/App-Store-Connect-CLI/pull/2198);
    - the head already contains the base: "There are no new commits on the base branch." (the
      message another public GitHub double gives; GitHub's own is not documented);
    - a closed pull request or a deleted branch: "Validation Failed" (GitHub's exact message for
      these is not documented);
    - a ruleset protecting the head branch (see `check_rules`)."""
    head_ref, base_ref = "heads/" + pr["head"], "heads/" + pr["base"]
    head_sha, base_sha = repo["refs"].get(head_ref), repo["refs"].get(base_ref)
    if pr["state"] != "open" or head_sha is None or base_sha is None:
        raise ApiError(422, "Validation Failed", errors=[{"resource": "PullRequest", "code": "custom",
                                                          "message": "the pull request is not open or a branch is gone"}])
    expected = (body or {}).get("expected_head_sha")
    if expected is not None and expected != head_sha:
        raise ApiError(422, HEAD_MOVED)
    if is_ancestor(base_sha, head_sha):
        raise ApiError(422, NO_NEW_BASE_COMMITS)
    try:
        tree = merged_tree(head_sha, base_sha)
    except ApiError:
        raise ApiError(422, UPDATE_CONFLICT)
    check_rules(full, repo, head_ref)
    sha = put_commit(tree, [head_sha, base_sha], f"Merge branch '{pr['base']}' into {pr['head']}", signed=github_signs())
    repo["refs"][head_ref] = sha
    touch(pr)
    return sha


# --- repositories ------------------------------------------------------------------------------

REPOS = {}  # "o/r" -> repo dict
NEXT_ID = [1000]
TOKENS = {}  # token -> expiry (None: forever)
# Tokens given an expiry through `POST /_fake/tokens` (`expires_at`): every answer to a request
# made with one carries `GitHub-Authentication-Token-Expiration` (see `token_expiration_header`).
EXPIRING = set()
# token -> the login it acts as (GraphQL `viewer`, who enabled auto-merge, who approved);
# installation tokens act as the App's bot.
LOGINS = {}
DEFAULT_LOGIN = "cellbridge-machine-user"
APP_BOT = "cellbridge[bot]"


def login_of(token):
    return LOGINS.get(token) or (APP_BOT if token and token.startswith("ghs_") else DEFAULT_LOGIN)
# The App's client ID is what GitHub recommends as its JWT's issuer ("The client ID or
# application ID of your GitHub App ... Use of the client ID is recommended", "Generating a JSON
# Web Token (JWT) for a GitHub App",
# https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app);
# its numeric ID is accepted too.
APP = {"app_id": 4242, "client_id": "Iv23liCe11br1dgeFake", "installation_id": 777, "private_key": None, "public_key": None}


# --- permissions of fine-grained actors ----------------------------------------------------------
#
# GitHub Apps' installation tokens and fine-grained personal access tokens carry permissions, and
# GitHub checks them on every request: "If your app makes a REST API request with insufficient
# permissions, the API will return a `403` response"
# (https://docs.github.com/apps/creating-github-apps/registering-a-github-app/choosing-permissions-for-a-github-app),
# with the message "Resource not accessible by integration" (by an installation token) or
# "Resource not accessible by personal access token" (by a fine-grained PAT): "Insufficient
# permission errors" in https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api.
# Every answer to such an actor carries `X-Accepted-GitHub-Permissions`, "the list of permissions
# required to access the endpoint ... Multiple sets of permissions may also be valid ... All valid
# sets are included in the header, each set separated by a semicolon (;)", e.g.
# `repository_projects=write; organization_projects=admin`
# (https://github.blog/changelog/2023-08-10-x-accepted-github-permissions-header-for-fine-grained-permission-actors).
# Classic personal access tokens have scopes, not these permissions: they are not checked here.
#
# A repository the actor cannot see is 404, never 403: "GitHub uses a 404 Not Found response
# instead of a 403 Forbidden response to avoid confirming the existence of private repositories"
# (https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api#404-not-found-for-an-existing-resource);
# an installation sees the repositories it was given ("All repositories" or "Only select
# repositories", `repository_selection` "all" / "selected" of the `installation` schema).
#
# The table: the permission sets each operation the fake serves accepts, as "Permissions required
# for GitHub Apps" lists them (https://docs.github.com/rest/authentication/permissions-required-for-github-apps,
# the page generated from github/docs' src/github-apps/data/fpt-2022-11-28/server-to-server-permissions.json).
# An endpoint listed under two permissions accepts either: `GET /pulls/{n}` is under "Contents"
# and "Pull requests"; the issue endpoints for comments, labels, getting and updating are under
# "Issues" and "Pull requests" ("Every pull request is an issue"); `PUT /pulls/{n}/merge` is under
# "Contents" (write) only. Write access implies read ("read" < "write" < "admin"), and any
# repository permission implies "metadata": read ("If you set the metadata permission to No
# access and select a permission that requires repository access, GitHub will override your
# selection and set the metadata permission back to Read-only",
# https://docs.github.com/enterprise-server@2.20/v3/apps/permissions).

# With "checks": "read", which cellbridge asks for where the installation grants it (README,
# "Auto-merge"): the merge state's check runs.
DEFAULT_APP_PERMISSIONS = {"metadata": "read", "contents": "write", "pull_requests": "write", "issues": "write",
                           "statuses": "write", "checks": "read"}
APP["permissions"] = dict(DEFAULT_APP_PERMISSIONS)
APP["repositories"] = None  # None: all repositories; else the "owner/repo" names selected
ACTORS = {}  # token -> {"kind": "installation" | "fine_grained", "permissions", "repositories"}; absent: a classic PAT

_R, _W = "read", "write"
PERMISSIONS = {
    "repos/get": [{"metadata": _R}],
    "repos/download-tarball-archive": [{"contents": _R}],
    "repos/compare-commits": [{"contents": _R}],
    "repos/get-commit": [{"contents": _R}],
    "repos/merge": [{"contents": _W}],
    "git/get-ref": [{"contents": _R}],
    "git/create-ref": [{"contents": _W}],
    "git/update-ref": [{"contents": _W}],
    "git/delete-ref": [{"contents": _W}],
    "git/create-blob": [{"contents": _W}],
    "git/get-blob": [{"contents": _R}],
    "git/create-tree": [{"contents": _W}],
    "git/get-tree": [{"contents": _R}],
    "git/create-commit": [{"contents": _W}],
    "git/get-commit": [{"contents": _R}],
    "repos/get-combined-status-for-ref": [{"statuses": _R}],
    "repos/list-commit-statuses-for-ref": [{"statuses": _R}],
    "repos/create-commit-status": [{"statuses": _W}],
    "pulls/list": [{"pull_requests": _R}],
    "pulls/create": [{"pull_requests": _W}],
    "pulls/get": [{"pull_requests": _R}, {"contents": _R}],
    "pulls/update": [{"pull_requests": _W}],
    "pulls/merge": [{"contents": _W}],
    "pulls/update-branch": [{"pull_requests": _W}],
    "issues/list-for-repo": [{"issues": _R}],
    "issues/create": [{"issues": _W}],
    "issues/get": [{"issues": _R}, {"pull_requests": _R}],
    "issues/update": [{"issues": _W}, {"pull_requests": _W}],
    "issues/list-comments": [{"issues": _R}, {"pull_requests": _R}],
    "issues/create-comment": [{"issues": _W}, {"pull_requests": _W}],
    "issues/list-labels-on-issue": [{"issues": _R}, {"pull_requests": _R}],
    "issues/add-labels": [{"issues": _W}, {"pull_requests": _W}],
    "issues/set-labels": [{"issues": _W}, {"pull_requests": _W}],
    # auto-merge: a person's settings and reviews.
    "repos/update": [{"administration": _W}],
    "repos/update-branch-protection": [{"administration": _W}],
    "repos/delete-branch-protection": [{"administration": _W}],
    "pulls/create-review": [{"pull_requests": _W}],
    # signatures: "Get rules for a branch" is under "Metadata"; a person's protection setting.
    "repos/get-branch-rules": [{"metadata": _R}],
    "repos/create-commit-signature-protection": [{"administration": _W}],
    "repos/delete-commit-signature-protection": [{"administration": _W}],
}
# GraphQL's operations, by what they read and write: a pull request (pull_requests), and for
# auto-merge what merging writes too (contents), as auto-merge's clients document them
# (https://github.com/peter-evans/enable-pull-request-automerge: "pull_requests: write,
# contents: write").
GRAPHQL_PERMISSIONS = {
    "graphql/pullRequestMergeState": [{"pull_requests": _R}],
    "graphql/enablePullRequestAutoMerge": [{"pull_requests": _W, "contents": _W}],
    "graphql/disablePullRequestAutoMerge": [{"pull_requests": _W, "contents": _W}],
    "graphql/branchRequiresSignatures": [{"contents": _R}],
    "graphql/createCommitOnBranch": [{"contents": _W}],
    # A cell's reading: each part is the REST read it replaces (pulls/list, issues/list-for-repo,
    # git/get-commit), so their permissions together.
    "graphql/cellReading": [{"contents": _R, "issues": _R, "pull_requests": _R}],
    "graphql/labelledIssues": [{"issues": _R}],
    # The dashboard's reads: pull requests as pulls/list; a head's status is the field
    # `Commit.status` (below).
    "graphql/openCellPulls": [{"pull_requests": _R}],
    "graphql/newestPulls": [{"pull_requests": _R}],
    "graphql/branchPulls": [{"pull_requests": _R}],
    # Merge queues: what merging writes, as auto-merge's.
    "graphql/enablePullRequestAutoMergeInQueue": [{"pull_requests": _W, "contents": _W}],
    "graphql/enqueuePullRequest": [{"pull_requests": _W, "contents": _W}],
    "graphql/dequeuePullRequest": [{"pull_requests": _W, "contents": _W}],
}
# Fields a query may ask that need more than the operation's permission: GitHub answers each
# with `null` and a FORBIDDEN error at its path, the rest of `data` answered ("Resource not
# accessible by integration" at `["repository", "refs", "edges", 3, "node",
# "associatedPullRequests"]`, https://github.com/fpicalausa/remove-stale-branches/issues/49; at
# `[..., "commit", "statusCheckRollup"]`, https://github.com/facebook/sapling/issues/993). Which
# permission a GraphQL field needs is not published: each is the REST permission of the same read
# ("Permissions required for GitHub Apps": check suites under "Checks", an issue list under
# "Issues", a pull request list under "Pull requests", a combined status under "Commit statuses").
# `statusCheckRollup` mixes statuses and check runs: which of the two GitHub asks is not
# documented, so it is not checked here.
GRAPHQL_FIELD_PERMISSIONS = {
    ("Commit", "checkSuites"): [{"checks": _R}],
    # A check run's fields, under "Checks" as REST's check runs are: a token without it is refused
    # them at the node of the rollup's contexts ("GraphQL: Resource not accessible by integration
    # (repository.pullRequest...statusCheckRollup.contexts.nodes.14)",
    # https://github.com/philips-software/pull-request-report-action/issues/557; fixed by granting
    # checks: read, https://github.com/poseidon/wait-for-status-checks/issues/63).
    ("CheckRun", "name"): [{"checks": _R}],
    ("CheckRun", "status"): [{"checks": _R}],
    ("CheckRun", "conclusion"): [{"checks": _R}],
    ("CheckRun", "isRequired"): [{"checks": _R}],
    ("Commit", "status"): PERMISSIONS["repos/get-combined-status-for-ref"],
    ("Repository", "issues"): PERMISSIONS["issues/list-for-repo"],
    ("Repository", "issue"): [{"issues": _R}],
    ("Repository", "pullRequests"): PERMISSIONS["pulls/list"],
}
LEVELS = {"read": 1, "write": 2, "admin": 3}


def permission_level(perms, name):
    if name == "metadata" and any(k != "metadata" and LEVELS.get(v, 0) for k, v in perms.items()):
        return max(LEVELS["read"], LEVELS.get(perms.get("metadata"), 0))
    return LEVELS.get(perms.get(name), 0)


def grants(perms, sets):
    """Whether `perms` ({name: level}) satisfies one of the accepted `sets`."""
    return any(all(permission_level(perms, k) >= LEVELS[v] for k, v in s.items()) for s in sets)


def accepted_header(sets):
    """`X-Accepted-GitHub-Permissions`: sets separated by "; ", the members of a set by ","."""
    return "; ".join(",".join(f"{k}={v}" for k, v in s.items()) for s in sets)


def actor_of(token):
    """What a token may do: None for a classic PAT (not checked), else {"kind", "permissions",
    "repositories"} with an installation token's permissions and repositories as the
    installation has them now, narrowed to what the token was created with."""
    a = ACTORS.get(token)
    if a is None:
        return None
    if a["kind"] != "installation":
        return a
    perms = {k: v for k, v in APP["permissions"].items() if LEVELS.get(v, 0)}
    if a.get("permissions") is not None:
        perms = {k: min(v, a["permissions"][k], key=lambda x: LEVELS.get(x, 0))
                 for k, v in perms.items() if k in a["permissions"]}
    repos = APP["repositories"]
    if a.get("repositories") is not None:
        repos = [r for r in (repos if repos is not None else a["repositories"]) if r in a["repositories"]]
    return {"kind": "installation", "permissions": perms, "repositories": repos}


def installation_json():
    """The `installation` schema's answer for the fake's one installation (the fields the fake
    has; the schema's other required ones are completed by the description check). Its account
    is the owner of the first selected repository, "acme" when all are selected: the fake does
    not model accounts, an installation here reaches repositories of any owner."""
    iid = APP["installation_id"]
    selected = APP["repositories"]
    owner = selected[0].split("/")[0] if selected else "acme"
    return {"id": iid, "app_id": APP["app_id"], "app_slug": "cellbridge", "target_id": 1, "target_type": "Organization",
            "account": {"login": owner, "id": 1, "type": "Organization"},
            "repository_selection": "selected" if selected is not None else "all",
            "permissions": {k: v for k, v in APP["permissions"].items() if LEVELS.get(v, 0)},
            "events": [], "single_file_name": None, "suspended_by": None, "suspended_at": None,
            "access_tokens_url": f"https://api.github.example/app/installations/{iid}/access_tokens",
            "repositories_url": "https://api.github.example/installation/repositories",
            "html_url": f"https://github.example/organizations/{owner}/settings/installations/{iid}",
            "created_at": iso_now(0), "updated_at": iso_now(0)}
FAULTS = []
REQUESTS = []


# --- GraphQL's primary rate limit ----------------------------------------------------------------
#
# "The GraphQL API assigns points to each query and limits the points that you can use within a
# specific amount of time" (LIMITS_DOCS below, "Primary rate limit"); a query's points are
# `github_graphql.Limits.points`. Budgets, per hour:
#
# - "_For users_: 5,000 points per hour per user. This includes requests made with a personal
#   access token": classic and fine-grained tokens of one login share one budget;
# - "_For GitHub App installations not on a GitHub Enterprise Cloud organization_: 5,000 points
#   per hour per installation. Installations that have more than 20 repositories receive another
#   50 points per hour for each repository. ... The rate limit cannot increase beyond 12,500
#   points per hour": every token of the installation shares one budget. The fake's installation
#   is on no Enterprise Cloud organization and has no organization members (the "more than 20
#   users" raise is not modelled); "for each repository" is read as each of its repositories;
# - GitHub Enterprise Server: "Rate limits are disabled by default for GitHub Enterprise Server":
#   no budget, no `x-ratelimit-*` header and a null `rateLimit`, unless `POST
#   /_fake/graphql_limits {"points_per_hour": n}` sets one (a site administrator's).
#
# The window: the fake opens an hour at a budget's first charge (GitHub documents only "The time
# at which the current rate limit window resets").
LIMITS_DOCS = "https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api"
GRAPHQL_LIMITS_DEFAULT = {"points_per_hour": None, "timeout_nodes": None, "timeout_status": 502,
                          "rate_limited_type": "RATE_LIMITED"}
GRAPHQL_LIMITS = dict(GRAPHQL_LIMITS_DEFAULT)
# GraphQL fields this GitHub lacks ("Type.field"; `POST /_fake/schema {"lacks": ["Ref.rules"]}`): a
# GitHub Enterprise Server older than them, which refuses a document asking one
# (`github_graphql.undefined_fields`).
SCHEMA_LACKS = set()
BUDGETS = {}  # budget key -> {"used": points, "reset": epoch seconds}


def graphql_budget(token):
    """(budget key, points per hour or None when none applies, who it is in GitHub's message)."""
    actor = actor_of(token)
    if actor is not None and actor["kind"] == "installation":
        iid = APP["installation_id"]
        key, who = f"installation:{iid}", f"installation ID {iid}"
        n = len(APP["repositories"]) if APP["repositories"] is not None else len(REPOS)
        limit = min(12_500, 5_000 + (50 * n if n > 20 else 0))
    else:
        login = login_of(token)
        key, who = f"user:{login}", f"user ID {zlib.crc32(login.encode()) % 10**8}"
        limit = 5_000
    if GRAPHQL_LIMITS["points_per_hour"] is not None:
        limit = int(GRAPHQL_LIMITS["points_per_hour"])
    elif SPEC["description"] is not None and SPEC["description"].flavor == "ghes":
        limit = None
    return key, limit, who


def budget_window(key, now=None):
    """The budget's current window, a new one when the last has reset."""
    now = now or time.time()
    b = BUDGETS.get(key)
    if b is None or b["reset"] <= now:
        b = BUDGETS[key] = {"used": 0, "reset": int(now) + 3600}
    return b


def rate_limit_headers(limit, b):
    """"You can use the headers that are sent with each response to determine the current status
    of your primary rate limit": `x-ratelimit-limit`, `-remaining`, `-used`, `-reset` ("in UTC
    epoch seconds") and `-resource` ("For GraphQL requests, this will always be `graphql`")."""
    return {"x-ratelimit-limit": limit, "x-ratelimit-remaining": max(0, limit - b["used"]),
            "x-ratelimit-used": b["used"], "x-ratelimit-reset": b["reset"], "x-ratelimit-resource": "graphql"}
# The description every request is checked against, and what the checks saw.
SPEC = {"description": None, "log": None, "graphql": None}


def graphql_path():
    """Where GraphQL is: `/graphql` beside github.com's REST API, `/api/graphql` on GitHub
    Enterprise Server, whose REST API is below `/api/v3`."""
    prefix = SPEC["description"].prefix if SPEC["description"] else ""
    return (prefix[: -len("/v3")] if prefix.endswith("/v3") else prefix) + "/graphql"
CONFORMANCE = {"operations": {}, "violations": []}
# When a request breaks several rules, the answer is the one GitHub gives first: routing, then
# the version and client headers, then the body.
VIOLATION_ORDER = ["route", "api-version", "user-agent", "content-type", "accept", "path-param", "query", "body"]


def new_id():
    NEXT_ID[0] += 1
    return NEXT_ID[0]


def repo_or_404(full):
    r = REPOS.get(full)
    if r is None:
        raise ApiError(404, "Not Found")
    return r


def resolve(repo, ref):
    """A branch name, `heads/x`, `refs/heads/x` or a commit sha -> commit sha, or None."""
    for cand in (ref, "heads/" + ref, ref.removeprefix("refs/")):
        if cand in repo["refs"]:
            return repo["refs"][cand]
    if re.fullmatch(r"[0-9a-f]{40}", ref) and get_obj(ref, "commit"):
        return ref
    return None


def seed(body):
    full = body["repo"]
    branch = body.get("branch", "main")
    repo = REPOS.setdefault(
        full,
        {"id": new_id(), "default_branch": branch, "refs": {}, "pulls": {}, "issues": {}, "next_number": 1,
         "labels": {}, "statuses": {}, "status_log": {}, "has_issues": True, "allow_auto_merge": False,
         "protection": {}, "full_name": full},
    )
    if "has_issues" in body:
        # Issues disabled in the repository's settings (https://docs.github.com/articles/disabling-issues/).
        repo["has_issues"] = bool(body["has_issues"])
    ref = "heads/" + branch
    parent = repo["refs"].get(ref)
    files = {} if body.get("replace", True) or parent is None else tree_files(get_obj(parent, "commit")["tree"])
    if body.get("dir"):
        files.update(dir_files(body["dir"]))
    for path, text in body.get("files", {}).items():
        if text is None:
            files.pop(path, None)
        elif isinstance(text, dict) and "gitlink" in text:
            # A submodule: a tree entry of mode 160000 naming a commit of another repository,
            # which this one does not store ("Git Tools - Submodules", https://git-scm.com/book/en/v2/Git-Tools-Submodules).
            files[path] = ("160000", text["gitlink"])
        elif isinstance(text, dict) and "base64" in text:
            files[path] = (text.get("mode", "100644"), put_blob(base64.b64decode(text["base64"])))
        elif isinstance(text, dict):
            files[path] = (text.get("mode", "100644"), put_blob(text["text"].encode()))
        else:
            files[path] = ("100644", put_blob(text.encode()))
    tree = build_tree(files)
    sha = put_commit(tree, [parent] if parent else [], body.get("message", "seed"))
    repo["refs"][ref] = sha
    # A push the queue sees at once: an entry of a moved head leaves, a moved base's groups are
    # made again.
    settle_queues(body["repo"], repo, triggered=False)
    return {"sha": sha}


def tree_with(tree_sha, parts, mode, blob):
    """`tree_sha` with the file at `parts` (a path split on `/`) set: only the trees along the
    path are written again, so a branch over a large fleet costs what its path does."""
    entries = {name: (m, sha) for m, name, sha in (get_obj(tree_sha, "tree") or [])} if tree_sha else {}
    if len(parts) == 1:
        entries[parts[0]] = (mode, blob)
    else:
        below = entries.get(parts[0])
        entries[parts[0]] = ("40000", tree_with(below[1] if below and below[0] == "40000" else None, parts[1:], mode, blob))
    return put_tree([(m, name, sha) for name, (m, sha) in entries.items()])


def seed_pulls(body):
    """`POST /_fake/pulls` (see the control API): pull requests made directly in the fake's
    state, as `_create_pull` and the status endpoint would leave them."""
    full = body["repo"]
    repo = REPOS[full]
    base = body.get("base", repo["default_branch"])
    base_sha = repo["refs"]["heads/" + base]
    base_tree = get_obj(base_sha, "commit")["tree"]
    out = []
    for p in body["pulls"]:
        tree = base_tree
        for path, text in p.get("files", {}).items():
            tree = tree_with(tree, path.split("/"), "100644", put_blob(text.encode()))
        sha = put_commit(tree, [base_sha], p.get("message", "seed"))
        repo["refs"]["heads/" + p["head"]] = sha
        number = repo["next_number"]
        repo["next_number"] += 1
        pr = {"id": new_id(), "number": number, "state": "open", "title": p.get("title") or p["head"],
              "body": p.get("body") or "", "head": p["head"], "base": base, "labels": list(p.get("labels", [])),
              "merged": False, "created_at": iso_now(), "comments": []}
        if p.get("state") == "closed":
            pr["state"], pr["closed_at"], pr["pinned_head"] = "closed", iso_now(), sha
        touch(pr)
        repo["pulls"][number] = pr
        for ctx, state in p.get("statuses", {}).items():
            sid, now = new_id(), iso_now()
            st = {"state": state, "context": ctx, "description": p.get("description", ""), "target_url": None,
                  "id": sid, "node_id": f"SC_{sid}", "url": f"https://api.github.example/repos/{full}/statuses/{sha}",
                  "avatar_url": None, "created_at": now, "updated_at": now, "creator": {"login": "cellbridge[bot]", "id": 2}}
            repo["statuses"].setdefault(sha, {})[ctx] = st
            repo.setdefault("status_log", {}).setdefault(sha, []).append(st)
        out.append({"number": number, "sha": sha})
    return {"pulls": out}


def dir_files(root):
    """{path: (mode, blob sha)} of every file below the local directory `root`, as Git commits
    them: an executable 100755, a symlink 120000 holding its target (not followed)."""
    out = {}
    for d, subdirs, names in os.walk(root):
        for name in names + [s for s in subdirs if os.path.islink(os.path.join(d, s))]:
            full_path = os.path.join(d, name)
            rel = os.path.relpath(full_path, root).replace(os.sep, "/")
            if os.path.islink(full_path):
                out[rel] = ("120000", put_blob(os.readlink(full_path).encode()))
            else:
                with open(full_path, "rb") as f:
                    data = f.read()
                out[rel] = ("100755" if os.stat(full_path).st_mode & 0o111 else "100644", put_blob(data))
    return out


def repo_json(full, repo):
    owner, name = full.split("/")
    return {"id": repo["id"], "node_id": repo_node_id(repo), "name": name, "full_name": full, "owner": {"login": owner, "id": 1},
            "default_branch": repo["default_branch"], "private": True,
            "html_url": f"https://github.example/{full}"}


def commit_json(full, sha):
    c = get_obj(sha, "commit")
    return {"sha": sha, "node_id": "C_" + sha[:8],
            "commit": {"message": c["message"], "tree": {"sha": c["tree"]},
                       "author": {"name": "cellbridge-fake", "email": "fake@example.invalid",
                                  "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(c["when"]))},
                       "verification": verification_json(sha)},
            "parents": [{"sha": p} for p in c["parents"]],
            "url": f"/repos/{full}/commits/{sha}"}


def git_commit_json(sha):
    c = get_obj(sha, "commit")
    return {"sha": sha, "tree": {"sha": c["tree"]}, "message": c["message"],
            "parents": [{"sha": p} for p in c["parents"]],
            "author": {"name": "cellbridge-fake", "email": "fake@example.invalid", "date": ""},
            "verification": verification_json(sha)}


# --- forks' pull requests ---------------------------------------------------------------------------
#
# A pull request from a fork (`pr["head_repo"]`, e.g. "someone/fleet"; `POST /_fake/fork_pull`) has
# its head branch in the fork, not here: this repository's refs never move it, and its head commit
# is the one it was opened with (`pr["head_sha"]`). GitHub tells such a pull request apart by its
# head: REST's `head.label` is "owner:branch" of the fork and `head.repo` the fork ("Get a pull
# request", https://docs.github.com/rest/pulls/pulls#get-a-pull-request); "List pull requests"
# filters `head` "by head user or head organization and branch name in the format of
# `user:ref-name`" (https://docs.github.com/rest/pulls/pulls#list-pull-requests), so `acme:branch`
# leaves a fork's out, while GraphQL's `Repository.pullRequests(headRefName:)` filters on the
# branch's name alone and does list it (forks' pull requests matching by branch name are a known
# trap: generalaction/emdash#3023, kdlbs/kandev#1182), with `isCrossRepository` true. "A pull
# request already exists for owner:branch" is per head label, so a fork's open pull request does
# not stop the repository's own branch of the same name from having its own.


def own(pr):
    """Whether `pr`'s head branch is in the repository itself (not a fork's)."""
    return not pr.get("head_repo")


def fork_pull(body):
    """`POST /_fake/fork_pull` `{"repo", "branch", "fork": "someone/fleet", "state": "open" |
    "closed"}`: someone's pull request from their fork's `branch` into the default branch, its
    head a commit of theirs on top of it; its number."""
    repo = repo_or_404(body.get("repo"))
    fork = body.get("fork") or "someone/fleet"
    base = repo["default_branch"]
    parent = repo["refs"]["heads/" + base]
    files = tree_files(get_obj(parent, "commit")["tree"])
    files["FORK.md"] = ("100644", put_blob(f"{fork} was here\n".encode()))
    head_sha = put_commit(build_tree(files), [parent], f"{fork}'s change")
    number = repo["next_number"]
    repo["next_number"] += 1
    closed = body.get("state") == "closed"
    pr = {"id": new_id(), "number": number, "state": "closed" if closed else "open", "title": f"{fork}'s change",
          "body": "", "head": body["branch"], "base": base, "labels": [], "merged": False, "created_at": iso_now(),
          "comments": [], "head_repo": fork, "head_sha": head_sha}
    if closed:
        pr["closed_at"], pr["closed_by"] = iso_now(), "a person"
    touch(pr)
    repo["pulls"][number] = pr
    return {"number": number}


def pull_head(repo, pr):
    """A pull request's head commit. An open one follows its branch; a closed or merged one keeps
    the head it had when it was closed: "a closed PR does not track pushes" (open-gsd/gsd-core
    #4426), and GitHub stores "what the head was when the pull request was closed"
    (isaacs/github#361). A pull request whose branch was deleted keeps its last head."""
    if pr["state"] == "closed" and pr.get("pinned_head"):
        return pr["pinned_head"]
    if not own(pr):
        return pr["head_sha"]
    return repo["refs"].get("heads/" + pr["head"], pr.get("head_sha"))


def pull_json(full, repo, pr):
    owner = full.split("/")[0]
    head_sha = pull_head(repo, pr)
    head_repo = pr.get("head_repo") or full
    return {
        "id": pr["id"], "node_id": node_id(repo, pr), "number": pr["number"], "state": pr["state"], "title": pr["title"],
        "body": pr["body"], "merged": pr.get("merged", False), "draft": False,
        "html_url": f"https://github.example/{full}/pull/{pr['number']}",
        "url": f"/repos/{full}/pulls/{pr['number']}",
        "labels": [{"name": n, "id": repo["labels"].setdefault(n, new_id())} for n in pr["labels"]],
        "head": {"ref": pr["head"], "sha": head_sha, "label": f"{head_repo.split('/')[0]}:{pr['head']}",
                 "repo": {"full_name": head_repo}},
        "base": {"ref": pr["base"], "sha": repo["refs"].get("heads/" + pr["base"]), "label": f"{owner}:{pr['base']}"},
        "user": {"login": "cellbridge[bot]", "id": 2} if own(pr) else {"login": head_repo.split("/")[0], "id": 3},
        # null unless merged / closed (the `pull-request` and `pull-request-simple` schemas:
        # https://docs.github.com/rest/pulls/pulls#get-a-pull-request).
        "created_at": pr.get("created_at") or iso_now(0), "updated_at": pr.get("updated_at") or pr.get("created_at") or iso_now(0),
        "closed_at": pr.get("closed_at") if pr["state"] == "closed" else None,
        "merged_at": pr.get("merged_at") if pr.get("merged") else None,
        "comments": len(pr.get("comments") or ()),
    }


def issue_json(full, repo, pr):
    j = pull_json(full, repo, pr)
    j["pull_request"] = {"url": j["url"]}
    return j


# --- plain issues --------------------------------------------------------------------------------
#
# "GitHub's REST API considers every pull request an issue, but not every issue is a pull request.
# For this reason, "Issues" endpoints may return both issues and pull requests in the response. You
# can identify pull requests by the `pull_request` key" ("List repository issues",
# https://docs.github.com/rest/issues/issues#list-repository-issues). Issues and pull requests
# share one sequence of numbers per repository (`repo["next_number"]`); a plain issue lives in
# `repo["issues"]`, a pull request in `repo["pulls"]`. Labels that do not exist yet are created
# when an issue gets them, as GitHub does for "Add labels to an issue" ("not only assigns existing
# labels but also creates a new label if it does not already exist",
# https://github.com/github/docs/issues/35718) and for "Create an issue" ("If the label doesn't
# exist in the repo, Github will create it for us", https://github.com/nerdishbynature/octokit.swift/pull/81).


def label_names(labels):
    """The names of the `labels` of a request body: strings, or objects with a `name`."""
    return [label["name"] if isinstance(label, dict) else str(label) for label in labels or []
            if not isinstance(label, dict) or label.get("name")]


def labels_json(repo, names):
    return [{"name": n, "id": repo["labels"].setdefault(n, new_id()), "node_id": f"LA_{n}", "color": "ededed",
             "default": False, "description": None, "url": ""} for n in names]


def plain_issue_json(full, repo, issue):
    """The `issue` schema's answer for a plain issue (the schema's other required fields are
    completed by the description check)."""
    n = issue["number"]
    api = f"https://api.github.example/repos/{full}/issues/{n}"
    return {
        "id": issue["id"], "node_id": f"I_{issue['id']}", "number": n, "title": issue["title"], "body": issue["body"],
        "state": issue["state"], "state_reason": issue.get("state_reason"),
        "labels": labels_json(repo, issue["labels"]), "locked": False, "assignee": None, "assignees": [],
        "milestone": None, "comments": len(issue["comments"]), "author_association": "NONE",
        "user": {"login": "cellbridge[bot]", "id": 2},
        "url": api, "repository_url": f"https://api.github.example/repos/{full}",
        "labels_url": api + "/labels{/name}", "comments_url": api + "/comments", "events_url": api + "/events",
        "html_url": f"https://github.example/{full}/issues/{n}",
        "created_at": issue["created_at"], "updated_at": issue["updated_at"],
        "closed_at": issue.get("closed_at") if issue["state"] == "closed" else None,
    }


# GitHub's limit on an issue's body, in characters: a longer one is 422 Validation Failed with
# `{"resource": "Issue", "code": "custom", "field": "body", "message": "body is too long (maximum
# is 65536 characters)"}` (GitHub's answer to "Create an issue" as clients quote it in full:
# https://github.com/PyGithub/PyGithub/issues/1906, https://github.com/trstringer/manual-approval/issues/89;
# the description only says the body is a string). Python counts characters, as the message does.
ISSUE_BODY_MAX = 65536


def check_issue_body(body):
    text = body.get("body")
    if isinstance(text, str) and len(text) > ISSUE_BODY_MAX:
        raise ApiError(422, "Validation Failed", errors=[{"resource": "Issue", "code": "custom", "field": "body",
                                                          "message": f"body is too long (maximum is {ISSUE_BODY_MAX} characters)"}])


def create_issue(full, repo, body):
    """`POST /issues` ("Create an issue", https://docs.github.com/rest/issues/issues#create-an-issue):
    410 "If issues are disabled in the repository" (the message is GitHub's as clients quote it,
    "410 Issues are disabled for this repo": https://github.com/ossf/allstar/issues/64); a
    `title` that is empty is 422 (GitHub's "Validation Failed" with a `missing_field` error; a
    missing `title` is refused by the description check before); a body over `ISSUE_BODY_MAX`
    characters is 422 (`check_issue_body`)."""
    if not repo.get("has_issues", True):
        raise ApiError(410, "Issues are disabled for this repo")
    title = body.get("title")
    if title is None or str(title).strip() == "":
        raise ApiError(422, "Validation Failed", errors=[{"resource": "Issue", "field": "title", "code": "missing_field"}])
    check_issue_body(body)
    number = repo["next_number"]
    repo["next_number"] += 1
    issue = {"id": new_id(), "number": number, "title": str(title), "body": body.get("body"), "state": "open",
             "state_reason": None, "labels": sorted(set(label_names(body.get("labels")))), "comments": [],
             "created_at": iso_now()}
    touch(issue)
    repo.setdefault("issues", {})[number] = issue
    return plain_issue_json(full, repo, issue)


def update_issue(full, repo, issue, body, agent):
    """`PATCH /issues/{n}` of a plain issue ("Update an issue",
    https://docs.github.com/rest/issues/issues#update-an-issue): `title`, `body`, `labels`
    ("Pass one or more labels to _replace_ the set of labels on this issue. Send an empty array
    (`[]`) to clear all labels"), `state` and `state_reason` ("The reason for the state change.
    Ignored unless `state` is changed"; closing without one is `completed`, as the web's "Close
    issue" button, reopening `reopened`; `duplicate` and `not_planned` as given). 410 when the
    repository's issues are turned off (the operation's documented 410 "Gone"; listing them still
    answers, https://github.com/ingydotnet/git-hub/issues/72), 422 for a body over
    `ISSUE_BODY_MAX` characters (`check_issue_body`)."""
    if not repo.get("has_issues", True):
        raise ApiError(410, "Issues are disabled for this repo")
    check_issue_body(body)
    if "title" in body and body["title"] is not None:
        if str(body["title"]).strip() == "":
            raise ApiError(422, "Validation Failed", errors=[{"resource": "Issue", "field": "title", "code": "missing_field"}])
        issue["title"] = str(body["title"])
    if "body" in body:
        issue["body"] = body["body"]
    if "labels" in body and body["labels"] is not None:
        issue["labels"] = sorted(set(label_names(body["labels"])))
    state = body.get("state")
    if state is not None and state != issue["state"]:
        issue["state"] = state
        if state == "closed":
            issue["state_reason"] = body.get("state_reason") or "completed"
            issue["closed_at"], issue["closed_by"] = iso_now(), agent
        else:
            issue["state_reason"] = "reopened"
            issue["closed_at"] = issue["closed_by"] = None
    touch(issue)
    return plain_issue_json(full, repo, issue)


def list_issues(full, repo, query):
    """`GET /issues` ("List repository issues", https://docs.github.com/rest/issues/issues#list-repository-issues):
    plain issues and pull requests (the latter with `pull_request`); `state` `open` (the
    default), `closed` or `all`; `labels` "A list of comma separated label names", an item must
    carry all of them; `sort` `created` (the default, in number order), `updated` or `comments`;
    `direction` (default `desc`); `since` (updated at or after). Paged by the caller."""
    state = query.get("state", ["open"])[0]
    wanted = [n.strip() for n in query.get("labels", [""])[0].split(",") if n.strip()]
    sort = query.get("sort", ["created"])[0]
    direction = query.get("direction", ["desc"])[0]
    since = query.get("since", [None])[0]
    items = [("issue", i) for i in repo.get("issues", {}).values()] + [("pull", p) for p in repo["pulls"].values()]
    keys = {"updated": lambda it: (it[1].get("updated", 0), it[1]["number"]),
            "comments": lambda it: (len(it[1].get("comments") or ()), it[1]["number"])}
    items.sort(key=keys.get(sort, lambda it: it[1]["number"]), reverse=direction != "asc")
    out = []
    for kind, it in items:
        if state != "all" and it["state"] != state:
            continue
        if not set(wanted) <= set(it["labels"]):
            continue
        if since is not None and (it.get("updated_at") or "") < since:
            continue
        out.append(plain_issue_json(full, repo, it) if kind == "issue" else issue_json(full, repo, it))
    return out


def export_ignored(files):
    """The paths `git archive` leaves out: those the root `.gitattributes` marks `export-ignore`
    ("Files and directories with the attribute export-ignore won't be added to archive files",
    https://git-scm.com/docs/gitattributes#_creating_an_archive). GitHub's tarballs are made by
    `git archive`, so a tree computed from one can lack files the real tree has. Patterns follow
    gitattributes' rules as far as the tests need: no slash matches the name at any depth, a
    slash anchors at the root, `dir/**` takes everything below `dir`."""
    attrs = files.get(".gitattributes")
    if attrs is None:
        return set()
    patterns = []
    for line in get_obj(attrs[1], "blob").decode("utf-8", "replace").splitlines():
        parts = line.split()
        if len(parts) >= 2 and not parts[0].startswith("#") and "export-ignore" in parts[1:]:
            patterns.append(parts[0])
    out = set()
    for path in files:
        for pat in patterns:
            if "/" not in pat.rstrip("/"):
                hit = any(fnmatch.fnmatchcase(seg, pat.rstrip("/")) for seg in path.split("/"))
            else:
                p = pat.lstrip("/")
                hit = fnmatch.fnmatchcase(path, p) or (p.endswith("/**") and path.startswith(p[:-2]))
            if hit:
                out.add(path)
    return out


TARBALLS = {}  # (repo, commit sha) -> archive bytes: a commit's archive never changes
TARBALLS_KEPT = 4


def tarball(full, sha):
    key = (full, sha)
    data = TARBALLS.get(key)
    if data is None:
        data = _tarball(full, sha)
        while len(TARBALLS) >= TARBALLS_KEPT:
            TARBALLS.pop(next(iter(TARBALLS)))
        TARBALLS[key] = data
    return data


def _tarball(full, sha):
    owner, name = full.split("/")
    top = f"{owner}-{name}-{sha[:7]}"
    files = tree_files(get_obj(sha, "commit")["tree"])
    for path in export_ignored(files):
        del files[path]
    buf = io.BytesIO()
    # GitHub's archives are pax tars whose global header carries the commit id.
    # gzip's default level 6, as `git archive`'s `gzip -cn` (git-archive(1): "tar.gz and tgz
    # formats are defined automatically and use the magic command `gzip -cn` by default";
    # level 9 is five times slower on a fleet of hundreds of cells, for a few percent).
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=6) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": sha}) as tar:
            dirs = set()
            for path in sorted(files):
                parts = path.split("/")
                for i in range(len(parts)):
                    d = "/".join([top] + parts[:i])
                    if d not in dirs:
                        dirs.add(d)
                        ti = tarfile.TarInfo(d + "/")
                        ti.type, ti.mode = tarfile.DIRTYPE, 0o775
                        tar.addfile(ti)
                mode, blob = files[path]
                if mode == "160000":
                    # `git archive` writes a submodule as an empty directory (its files are
                    # another repository's).
                    ti = tarfile.TarInfo(f"{top}/{path}/")
                    ti.type, ti.mode = tarfile.DIRTYPE, 0o775
                    tar.addfile(ti)
                    continue
                data = get_obj(blob, "blob")
                ti = tarfile.TarInfo(f"{top}/{path}")
                # As `git archive` writes them under its default umask 002 (git-config(1),
                # `tar.umask`: "defaults to 002"; git-archive(1) stores a symlink as a symlink
                # entry): a link naming its target, an executable 0775, any other file 0664.
                # GitHub's tarballs are `git archive` output (docs.github.com, "Downloading
                # source code archives": "These snapshots are generated by the git archive
                # command").
                if mode == "120000":
                    ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, data.decode("utf-8", "surrogateescape"), 0o777
                    tar.addfile(ti)
                else:
                    ti.size, ti.mode = len(data), 0o775 if mode == "100755" else 0o664
                    tar.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def register_secret(what, value):
    """A secret this fake minted or was handed: checked by tests/leak_check.py."""
    leak_registry.register_secret("github_fake", what, value)


def parse_jwt(token):
    try:
        h, p, s = token.split(".")
        pad = lambda x: x + "=" * (-len(x) % 4)  # noqa: E731
        header = json.loads(base64.urlsafe_b64decode(pad(h)))
        claims = json.loads(base64.urlsafe_b64decode(pad(p)))
        sig = base64.urlsafe_b64decode(pad(s))
    except Exception:
        return None
    return header, claims, (h + "." + p).encode(), sig


def check_app_jwt(token):
    parsed = parse_jwt(token)
    if parsed is None:
        raise ApiError(401, "A JSON web token could not be decoded")
    header, claims, signed, sig = parsed
    # The signature is what makes the JWT a credential.
    register_secret("github fake: App JWT signature", token.rsplit(".", 1)[-1])
    if header.get("alg") != "RS256":
        raise ApiError(401, "'alg' must be RS256")
    iss = claims.get("iss")
    if not (iss == APP["client_id"] or str(iss) == str(APP["app_id"])):
        raise ApiError(401, "'Issuer' claim ('iss') must be an Integer or the app's client id")
    now = time.time()
    if "exp" not in claims or claims["exp"] < now or claims["exp"] - claims.get("iat", now) > 660:
        raise ApiError(401, "'Expiration time' claim ('exp') is too far in the future or expired")
    if APP["public_key"] is not None:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding
        try:
            APP["public_key"].verify(sig, signed, padding.PKCS1v15(), hashes.SHA256())
        except Exception:
            raise ApiError(401, "A JSON web token could not be decoded")


def init_app():
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError:
        return
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    APP["private_key"] = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode()
    APP["public_key"] = key.public_key()
    register_secret("github fake: GitHub App private key", APP["private_key"])


# --- GitHub's general error answers -------------------------------------------------------------

ERROR_SCHEMAS = {}


def general_error_violations(op, status, body):
    """An error status the operation's description does not list is one of GitHub's answers to
    every request: 401 for bad credentials, 404 for what does not exist or cannot be seen, 403
    and 422 for refusals ("Client errors" in https://docs.github.com/rest/overview/resources-in-the-rest-api,
    and https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api). Those answers
    have the shape of the description's `basic-error` (`validation-error` for 422)."""
    name = "validation-error" if status == 422 else "basic-error"
    desc = SPEC["description"]
    validator = ERROR_SCHEMAS.get(name)
    if validator is None:
        schema = desc.convert({"$ref": f"#/components/schemas/{name}"}, github_openapi.DEFAULT_API_VERSION, "resp", False)
        validator = ERROR_SCHEMAS[name] = desc.validator(schema)
    if status not in (401, 403, 404, 409, 422) or not isinstance(body, dict) or "message" not in body:
        return [github_openapi.Violation("response", f"{op.id} {status}: not one of GitHub's general error answers", 500, "Server Error")]
    return [github_openapi.Violation("response", f"{op.id} {status}: {e.message}", 500, "Server Error")
            for e in validator.iter_errors(body)]


def schema_errors(name, value):
    """Where `value` breaks GitHub's `#/components/schemas/<name>` (the REST description's), for
    shapes the fake serves outside an operation's answer (a webhook event's object). GitHub
    Enterprise Server's description leaves out some webhook schemas its docs describe (the
    `merge_group` event's, though its merge queues send it): github.com's description, beside
    it in the package, has them."""
    validator = ERROR_SCHEMAS.get(name)
    if validator is None:
        desc = SPEC["description"]
        if name not in desc._components.get("schemas", {}):
            if "dotcom" not in SPEC:
                path = os.path.join(os.path.dirname(desc.path), "api.github.com.json")
                SPEC["dotcom"] = github_openapi.Description.load(path, "api.github.com")
            desc = SPEC["dotcom"]
        schema = desc.convert({"$ref": f"#/components/schemas/{name}"}, github_openapi.DEFAULT_API_VERSION, "resp", False)
        validator = ERROR_SCHEMAS[name] = desc.validator(schema)
    return [e.message for e in validator.iter_errors(value)]


# --- faults ------------------------------------------------------------------------------------

# GitHub's 502 body for a GraphQL query it gave up on (request id as GitHub writes it; see
# "Timeouts" in the GraphQL endpoint).
TIMEOUT_MESSAGE = ("Something went wrong while executing your query. This may be the result of a timeout, "
                   "or it could be a GitHub bug. Please include `4A9B:716A:296B9:53EA6:64DCF39F` when reporting this issue.")

def patched(answer, patch):
    """`answer` with `data` at `patch["path"]` set to `patch["value"]` and `patch["errors"]` added:
    what GitHub answers beside a field it refused (the field `null`, "Resource not accessible by
    integration" at its path, the rest of `data` answered:
    https://github.com/philips-software/pull-request-report-action/issues/557), or an enum value
    GitHub added after the client was written ("Adding an enum value is an example of a dangerous
    change", https://docs.github.com/graphql/overview/breaking-changes)."""
    node = answer.get("data")
    *parents, last = patch["path"]
    for key in parents:
        node = node[key] if node is not None else None
    if node is not None:
        node[last] = patch.get("value")
    if patch.get("errors"):
        answer["errors"] = list(answer.get("errors") or []) + patch["errors"]
    return answer


def fault_for(method, path, operation=None):
    for f in FAULTS:
        if f.get("times", 1) <= 0:
            continue
        if f.get("operation") and f["operation"] != operation:
            continue
        m = f.get("match")
        if m:
            fm, _, fp = m.partition(" ")
            if fm not in ("*", method) or not fnmatch.fnmatchcase(path, fp.replace("...", "*")):
                continue
        f["times"] = f.get("times", 1) - 1
        return f
    return None


# --- the API -----------------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes; with Nagle's algorithm on, the second waits for
    # the client's delayed ACK of the first (about 40 ms on Linux) on every keep-alive
    # request. socketserver's own switch sets TCP_NODELAY on each connection.
    disable_nagle_algorithm = True
    server_version = "GitHub.com"

    def log_message(self, *a):
        pass

    def _send(self, status, body=None, headers=None, raw=None, ctype="application/json; charset=utf-8"):
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-GitHub-Request-Id", secrets.token_hex(8))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        if self.command != "HEAD":
            cut = getattr(self, "_cut_after", None)
            if cut is not None:
                self._cut_after = None
                self.wfile.write(data[:cut])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(data)

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def _raw_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _dispatch(self, method):
        url = urlsplit(self.path)
        path, query = unquote(url.path), parse_qs(url.query)
        raw_body = self._raw_body()
        if path.startswith("/_fake/"):
            try:
                body = json.loads(raw_body) if raw_body else {}
                status, out = self._control(method, path, query, body)
            except ValueError:
                status, out = 400, {"message": "control body is not JSON"}
            except ApiError as e:
                status, out = e.status, {"message": e.message}
            return self._send(status, out)
        spec = SPEC["description"]
        op = None
        if url.path == graphql_path() and method == "POST":
            return self._graphql(url.path, raw_body)
        if not path.startswith("/_codeload/"):
            prefix = spec.prefix
            api_path = url.path[len(prefix):] if url.path.startswith(prefix + "/") else None
            if api_path is None:
                op, violations = None, [github_openapi.Violation(
                    "route", f"{method} {url.path}: not below the API prefix {prefix!r}", 404, "Not Found")]
            else:
                op, violations = spec.check_request(method, api_path, url.query, list(self.headers.items()), raw_body or None)
                path = unquote(api_path)
            if violations:
                violations.sort(key=lambda v: VIOLATION_ORDER.index(v.check) if v.check in VIOLATION_ORDER else 99)
                self._record(method, url.path, op, violations)
                first = violations[0]
                out = {"message": first.message, "documentation_url": op.doc_url if op else DOCS}
                if first.status == 422:
                    out["errors"] = [{"resource": "Request", "code": "invalid", "message": v.detail} for v in violations]
                return self._send(first.status, out)
        try:
            body = json.loads(raw_body) if raw_body else {}
        except ValueError:
            return self._send(400, {"message": "Problems parsing JSON", "documentation_url": DOCS})
        status, out, headers, raw, ctype = 500, None, {}, None, "application/json; charset=utf-8"
        # The operation (for the permission check) and the headers every answer to this
        # request carries (X-Accepted-GitHub-Permissions), set by `_auth`.
        self._op, self._extra_headers = op, {}
        with LOCK:
            fault = fault_for(method, path)
        if fault and fault.get("delay_ms"):
            time.sleep(fault["delay_ms"] / 1000)
        if fault and fault.get("cut_after") is not None:
            self._cut_after = int(fault["cut_after"])
        try:
            if fault and fault.get("status"):
                raise ApiError(fault["status"], fault.get("message", "Server Error"), fault.get("headers"))
            if fault and fault.get("secondary_rate_limit"):
                raise ApiError(403, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                               {"Retry-After": fault.get("retry_after", 1), "X-RateLimit-Remaining": 1})
            with LOCK:
                if fault and fault.get("lose_race"):
                    self._lose_race(path, fault["lose_race"])
                result = self._api(method, path, query, body)
                if method != "GET":
                    # A write can meet the last requirement of a pull request's auto-merge (a
                    # protection changed is no trigger for auto-merge into a queue).
                    for full_name, r in list(REPOS.items()):
                        settle(full_name, r, triggered=not path.endswith("/protection"))
            status, out = result[0], result[1]
            if len(result) > 2:
                headers = result[2]
            if len(result) > 3:
                raw, ctype = result[3], result[4]
        except ApiError as e:
            status, headers = e.status, e.headers
            out = {"message": e.message, "documentation_url": e.documentation_url or DOCS}
            if e.errors:
                out["errors"] = e.errors
        headers = dict(headers or {}, **self._extra_headers)
        drift = []
        if op is not None and not (fault and (fault.get("status") or fault.get("secondary_rate_limit"))):
            # The fake's own answer, completed and checked against GitHub's schema for it.
            version = self.headers.get("X-GitHub-Api-Version")
            if raw is None and status < 300 and out is not None:
                out = op.complete_response(status, out, api_version=version)
            if status >= 400 and str(status) not in op.documented_statuses():
                drift = general_error_violations(op, status, out)
            else:
                drift = op.check_response(status, ctype if raw is not None else "application/json",
                                          out if raw is None else raw, api_version=version,
                                          headers=list(headers.items()))
        if op is not None:
            self._record(method, url.path, op, drift)
        with LOCK:
            REQUESTS.append({"method": method, "path": path, "query": url.query, "status": status,
                             "write": method != "GET", "t": time.time(), "user_agent": self._user_agents()})
        self._send(status, out, headers, raw, ctype)

    def _user_agents(self):
        """Every User-Agent line of the request, as sent: GitHub asks each request to carry one
        naming the application ("All API requests must include a valid User-Agent header ...
        use your GitHub username, or the name of your application, for the User-Agent header
        value", github_openapi.DOCS_USER_AGENT), so the request log keeps them for the tests to
        check, archive downloads (which the REST description does not cover) included."""
        return self.headers.get_all("User-Agent") or []

    def _graphql(self, path, raw_body):
        """`POST /graphql` (`/api/graphql` on GitHub Enterprise Server): checked against GitHub's
        GraphQL schema (`github_graphql.check`), then run over the fake's state."""
        op, doc, variables, problems = github_graphql.check(SPEC["graphql"], list(self.headers.items()), raw_body)
        violations = [github_openapi.Violation("graphql", f"{op.id if op else 'graphql'}: {p}", 200, p) for p in problems]
        cost = None
        if not problems:
            # GitHub's limits, computed from the document before it runs (`github_graphql.Limits`).
            # A call GitHub refuses for them (over the node limit, a page outside 1-100 or
            # missing) is answered as GitHub answers it below, and recorded here too: the
            # product's documents must never meet these refusals.
            cost = github_graphql.limits(SPEC["graphql"], doc, variables, op.id[len("graphql/"):])
            limited = [f"{'.'.join(map(str, at))}: {kind}: {message}" for at, kind, message in cost.pages]
            if cost.nodes > github_graphql.MAX_NODES:
                limited.insert(0, github_graphql.node_limit_refusal(cost.nodes)["errors"][0]["message"])
            violations += [github_openapi.Violation("graphql", f"{op.id}: {p}", 200, p) for p in limited]
        self._record("POST", path, op, violations)
        if problems:
            return self._send(200, github_graphql.refusal(problems[0]))
        try:
            token = self._auth("/graphql")
        except ApiError as e:
            return self._send(e.status, {"message": e.message, "documentation_url": "https://docs.github.com/graphql"})
        with LOCK:
            lacks = set(SCHEMA_LACKS)
        undefined = github_graphql.undefined_fields(SPEC["graphql"], doc, lacks)
        if undefined:
            # Validated before it runs: refused whole, nothing charged.
            return self._graphql_answer(path, op, 200, {"data": None, "errors": undefined}, {})
        with LOCK:
            fault = fault_for("POST", "/graphql", op.id[len("graphql/"):])
        if fault and fault.get("timeout"):
            # GitHub giving up on this query (see "Timeouts" below), whatever its size.
            return self._graphql_answer(path, op, 502, {"data": None, "errors": [{"message": TIMEOUT_MESSAGE}]}, {})
        if fault and fault.get("graphql_errors"):
            # GitHub's answer 200 with a refusal inside `errors` (a field the credentials may not
            # read: `FORBIDDEN`; one this GitHub lacks: `extensions.code: undefinedField`).
            return self._graphql_answer(path, op, 200, {"data": None, "errors": fault["graphql_errors"]}, {})
        if fault and fault.get("delay_ms"):
            # A slow answer, as REST's (a query GitHub takes long over, for timeouts).
            time.sleep(fault["delay_ms"] / 1000)
        if fault and fault.get("status"):
            return self._send(fault["status"], {"message": fault.get("message", "Server Error")})
        if fault and fault.get("secondary_rate_limit"):
            return self._send(403, {"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."},
                              {"Retry-After": fault.get("retry_after", 1)})
        actor = actor_of(token)
        # GitHub's rate limit (see "GraphQL's primary rate limit").
        key, limit, who = graphql_budget(token)
        with LOCK:
            budget = budget_window(key) if limit is not None else None
            headers = rate_limit_headers(limit, budget) if budget is not None else {}
            if cost.nodes > github_graphql.MAX_NODES:
                # "To pass schema validation, all GraphQL API calls must meet these standards
                # ... Individual calls cannot request more than 500,000 total nodes" ("Node
                # limit"): refused before it runs, nothing charged.
                return self._graphql_answer(path, op, 200, github_graphql.node_limit_refusal(cost.nodes), headers)
            if budget is not None and limit - budget["used"] < cost.points:
                # "If you exceed your primary rate limit, the response status will still be
                # `200`, but you will receive an error message, and the value of the
                # `x-ratelimit-remaining` header will be `0`. You should not retry your request
                # until after the time specified by the `x-ratelimit-reset` header" ("Exceeding
                # the rate limit"). The error GitHub sends: {"errors": [{"type": "RATE_LIMITED",
                # "message": "API rate limit exceeded for installation ID 9306189."}]}
                # (https://github.com/renovatebot/renovate/issues/21861); seen since with
                # {"type": "RATE_LIMIT", "code": "graphql_rate_limit", "message": "API rate limit
                # already exceeded for user ID xxxxx."} (https://github.com/yanyongyu/githubkit/issues/271),
                # which `"rate_limited_type": "RATE_LIMIT"` answers. A call costing more than what
                # is left is refused whole, nothing charged (the fake's choice: GitHub does not
                # say).
                kind = GRAPHQL_LIMITS["rate_limited_type"]
                already = "already " if budget["used"] >= limit else ""
                error = {"type": kind, "message": f"API rate limit {already}exceeded for {who}."}
                if kind == "RATE_LIMIT":
                    error["code"] = "graphql_rate_limit"
                return self._graphql_answer(path, op, 200, {"errors": [error]}, headers)
            if budget is not None:
                budget["used"] += cost.points
                headers = rate_limit_headers(limit, budget)
            slow = GRAPHQL_LIMITS["timeout_nodes"]
            if slow is not None and cost.nodes > slow:
                # "If GitHub takes more than 10 seconds to process an API request, GitHub will
                # terminate the request and you will receive a timeout response ... you may
                # receive either a `502` or `504` status code" and "If a timeout occurs for any
                # of your API requests, additional points will be deducted from your primary rate
                # limit" ("Timeouts"; how many is not said: the call's points here, charged
                # above). The body GitHub sends with its 502: {"data": null, "errors": [{"message":
                # "Something went wrong while executing your query. This may be the result of a
                # timeout, or it could be a GitHub bug. Please include `4A9B:716A:296B9:53EA6:64DCF39F`
                # when reporting this issue."}]} (https://github.com/liatrio/liatrio-otel-collector/issues/71).
                # Which call is slow is the fake's to decide: one asking more nodes than
                # `timeout_nodes` (POST /_fake/graphql_limits), so a client's retry with a smaller
                # page can be tested.
                return self._graphql_answer(path, op, int(GRAPHQL_LIMITS["timeout_status"]),
                                            {"data": None, "errors": [{"message": TIMEOUT_MESSAGE}]}, {}, cost.points)
        # What `rateLimit { cost limit nodeCount remaining resetAt used }` answers ("Returning the
        # point value of a query": "querying the `cost` field on the `rateLimit` object"); null
        # where no rate limit applies (GitHub Enterprise Server's default).
        self._rate_limit = None if budget is None else {
            "cost": cost.points, "limit": limit, "nodeCount": cost.nodes, "remaining": max(0, limit - budget["used"]),
            "used": budget["used"], "resetAt": iso_now(budget["reset"])}
        sets = GRAPHQL_PERMISSIONS.get(op.id)
        who_denied = "integration" if actor is not None and actor["kind"] == "installation" else "personal access token"
        if actor is not None and sets and not grants(actor["permissions"], sets):
            answer = {"data": None, "errors": [{"type": "FORBIDDEN", "message": f"Resource not accessible by {who_denied}"}]}
        else:
            def permit(type_name, field_name):
                needed = GRAPHQL_FIELD_PERMISSIONS.get((type_name, field_name))
                if actor is None or not needed or grants(actor["permissions"], needed):
                    return None
                return f"Resource not accessible by {who_denied}"

            with LOCK:
                answer = github_graphql.execute(SPEC["graphql"], doc, variables, self._graphql_root(token),
                                                middleware=[github_graphql.limits_middleware(permit)])
                for full_name, r in list(REPOS.items()):
                    settle(full_name, r)
            if fault and fault.get("answer_patch"):
                answer = patched(answer, fault["answer_patch"])
        self._graphql_answer(path, op, 200, answer, headers, cost.points)

    def _graphql_answer(self, path, op, status, answer, headers, points=0):
        """Logs the GraphQL request, with the points it cost (0: refused before it ran), and
        sends its answer."""
        with LOCK:
            REQUESTS.append({"method": "POST", "path": path, "query": "", "status": status,
                             "write": op.kind == "mutation", "t": time.time(), "graphql": op.id,
                             "points": points, "user_agent": self._user_agents(),
                             # What GitHub refused inside the answer (`extensions.code` or `type`).
                             "graphql_errors": [e.get("extensions", {}).get("code") or e.get("type")
                                                for e in answer.get("errors") or []]})
        self._send(status, answer, headers)

    def _graphql_root(self, token):
        """The root of the fake's GraphQL answers: `viewer`, `repository(owner:, name:)` and the
        two auto-merge mutations (see "branch protection, merge state, auto-merge")."""
        Refused = github_graphql.Refused
        viewer = login_of(token)

        def checks(full, repo, pr, sha):
            statuses = repo["statuses"].get(sha, {})
            if not statuses:
                return None  # GitHub's rollup is null for a commit with no status
            required = set((protection_of(repo, pr["base"]) or {}).get("contexts") or [])
            nodes = [{"__typename": "StatusContext", "context": c, "state": st["state"].upper(),
                      "isRequired": (lambda c: lambda info, **k: c in required)(c)}
                     for c, st in sorted(statuses.items())]
            return {"contexts": lambda info, **k: {"pageInfo": {"hasNextPage": False}, "nodes": nodes, "totalCount": len(nodes)}}

        def commit_status(repo, sha):
            # `Commit.status`: "Commit status information, if present" (null without one), and
            # `Status.context(name:)`: "Looks up an individual status context by context name"
            # (GraphQL reference; `StatusState` is REST's state in capitals, and
            # `StatusContext.createdAt` "Identifies the date and time when the object was
            # created": REST's `created_at` of the same status).
            sts = repo["statuses"].get(sha, {})

            def context(info, name, **k):
                st = sts.get(name)
                return None if st is None else {"context": name, "state": st["state"].upper(),
                                                "description": st.get("description"),
                                                "createdAt": st["created_at"]}

            def required(c):
                # `StatusContext.isRequired(pullRequestNumber:)`: "Whether this is required to
                # pass before merging for a specific pull request" (GraphQL reference).
                def resolve(info, pullRequestNumber=None, **k):
                    pr = repo["pulls"].get(pullRequestNumber)
                    return pr is not None and c in ((protection_of(repo, pr["base"]) or {}).get("contexts") or [])
                return resolve

            # `Status.contexts`: "The individual status contexts for this commit".
            contexts = [{"context": c, "state": st["state"].upper(), "description": st.get("description"),
                         "isRequired": required(c)} for c, st in sorted(sts.items())]
            return {"context": context, "contexts": contexts} if sts else None

        def actor(login):
            # GraphQL's `Actor` for a REST login. A GitHub App acts as a `Bot` whose GraphQL login
            # is its slug without the `[bot]` suffix that its REST login and `viewer.login` carry:
            # "In the V4 API, bot accounts have their own type, so the login string does not
            # include this suffix" (palantir/policy-bot#44; chdsbd/kodiak#288).
            if login.endswith("[bot]"):
                return {"__typename": "Bot", "login": login[: -len("[bot]")]}
            return {"__typename": "User", "login": login}

        def pull(full, repo, pr):
            # What costs (the merge state merges trees) is a resolver, computed only for a query
            # that selects it: a page of open pull requests does not merge those it skips.
            head = pull_head(repo, pr)
            am = pr.get("auto_merge")
            queue, entry = queue_of(repo, pr), entry_of(repo, pr)
            return {
                "id": node_id(repo, pr), "number": pr["number"],
                "state": "MERGED" if pr.get("merged") else pr["state"].upper(),
                "headRefOid": head, "mergeStateStatus": lambda info, **k: merge_state(repo, pr) if pr["state"] == "open" else "UNKNOWN",
                "autoMergeRequest": {"enabledBy": actor(am["enabled_by"]),
                                     "mergeMethod": am["merge_method"]} if am else None,
                # merge queues
                "isMergeQueueEnabled": bool(queue),
                "mergeQueue": {"id": f"MQ_{repo['id']}_{pr['base']}", "configuration": {"mergeMethod": queue}} if queue else None,
                "isInMergeQueue": entry is not None,
                "mergeQueueEntry": {"id": f"MQE_{repo['id']}_{pr['number']}", "state": "AWAITING_CHECKS",
                                    "enqueuer": actor(entry["enqueuer"]), "enqueuedAt": entry["at"],
                                    "position": 1, "jump": False, "solo": False} if entry else None,
                "commits": lambda info, **k: {"nodes": [{"commit": {"oid": head, "statusCheckRollup": checks(full, repo, pr, head),
                                                                     "status": commit_status(repo, head)}}]},
                "createdAt": pr.get("created_at") or iso_now(0),
                "headRefName": pr["head"], "baseRefName": pr["base"],
                "labels": lambda info, first=None, last=None, **k: page([{"name": n} for n in sorted(pr["labels"])], first, last),
                "number": pr["number"], "title": pr["title"], "body": pr["body"],
                "url": f"https://github.example/{full}/pull/{pr['number']}",
                # A fork's pull request (`pr["head_repo"]`) has its head in the fork: "Whether the
                # head ref is from a different repository than the base ref" (GraphQL reference,
                # PullRequest.isCrossRepository), and `headRepository` names the fork.
                "headRepository": {"nameWithOwner": pr.get("head_repo") or full},
                "isCrossRepository": (pr.get("head_repo") or full).lower() != full.lower(),
            }

        def page(nodes, first, last, after=None, cursor=None):
            # A connection's page: the first `first` or the last `last` of its nodes, after the
            # node whose cursor is `after` ("Using pagination in the GraphQL API": a page's
            # `pageInfo.endCursor` is passed as `after` for the next). `cursor(node)` names a
            # node's cursor (here a number: opaque to clients); a cursor no node has is an
            # empty rest, as for a node since deleted.
            total = len(nodes)  # of the whole connection, whatever the page
            if after is not None and cursor is not None:
                at = next((x for x, n in enumerate(nodes) if cursor(n) == after), None)
                nodes = nodes[at + 1:] if at is not None else []
            shown = nodes[:first] if first is not None else nodes[-last:] if last else []
            end = cursor(shown[-1]) if shown and cursor is not None else None
            return {"totalCount": total, "nodes": shown,
                    "pageInfo": {"hasNextPage": first is not None and len(nodes) > first,
                                 "hasPreviousPage": last is not None and len(nodes) > last,
                                 "endCursor": end}}

        seen = actor_of(token)

        def repository(info, owner, name, **k):
            full = f"{owner}/{name}"
            repo = REPOS.get(full)
            # A repository outside an installation's or a fine-grained token's selection is one
            # it cannot see, as REST's 404 (see "permissions of fine-grained actors"): in an
            # aliased read of many, that alias alone is null with its NOT_FOUND error.
            hidden = seen is not None and seen.get("repositories") is not None and full not in seen["repositories"]
            if repo is None or hidden:
                raise Refused("NOT_FOUND", f"Could not resolve to a Repository with the name '{full}'.")

            def pull_request(info, number, **k):
                pr = repo["pulls"].get(number)
                if pr is None:
                    raise Refused("NOT_FOUND", f"Could not resolve to a PullRequest with the number of {number}.")
                return pull(full, repo, pr)

            def ref(info, qualifiedName, **k):
                # `Ref.refUpdateRule`: "Branch protection rules that are viewable by non-admins"
                # (classic protection only; null when none matches the branch).
                if not qualifiedName.startswith("refs/heads/") or resolve(repo, qualifiedName[len("refs/heads/"):]) is None:
                    return None
                branch = qualifiedName[len("refs/heads/"):]
                p = protection_of(repo, branch)
                # `Ref.rules`: "A list of rules from active Repository and Organization rulesets
                # that apply to this ref" (GraphQL reference, Ref), as "Get rules for a branch"
                # lists them (`branch_rules_json`), its `type` GraphQL's `RepositoryRuleType`.
                kinds = [{"type": r["type"].upper()} for r in branch_rules_json(full, repo, branch)]
                return {"name": branch, "refUpdateRule": None if p is None else {"requiresSignatures": bool(p.get("signatures"))},
                        "rules": lambda info, first=None, last=None, after=None, **k: page(kinds, first, last)}

            def pull_requests(info, headRefName=None, baseRefName=None, states=None, first=None, last=None,
                              orderBy=None, after=None, **k):
                # `Repository.pullRequests`: "A list of pull requests that have been opened in the
                # repository", filtered by `headRefName` (a fork's head of that name too: the
                # filter is the branch's name alone), `baseRefName` and `states` (GraphQL
                # reference), oldest first unless `orderBy` says otherwise (numbers are given in
                # the order of creation, so CREATED_AT orders as they do).
                found = [pr for n, pr in sorted(repo["pulls"].items())
                         if (headRefName is None or pr["head"] == headRefName)
                         and (baseRefName is None or pr["base"] == baseRefName)
                         and (not states or ("MERGED" if pr.get("merged") else pr["state"].upper()) in states)]
                if orderBy and orderBy.get("direction") == "DESC":
                    found.reverse()
                return page([pull(full, repo, pr) for pr in found], first, last, after,
                            cursor=lambda node: str(node["number"]))

            def issues(info, labels=None, states=None, first=None, last=None, after=None, orderBy=None, **k):
                # `Repository.issues`: "A list of issues that have been opened in the repository"
                # (pull requests are not issues here), filtered by `labels` ("A list of label
                # names to filter the pull requests by") and `states`, paged with `after`, the
                # cursor a page's `pageInfo.endCursor` gave (GraphQL reference, "Using
                # pagination in the GraphQL API"). Cursors here are the last number shown.
                found = [i for n, i in sorted(repo["issues"].items())
                         if (not labels or any(label in i["labels"] for label in labels))
                         and (not states or i["state"].upper() in states)]
                if orderBy and orderBy.get("direction") == "DESC":
                    found.reverse()
                nodes = [{"number": i["number"], "title": i["title"], "body": i["body"],
                          "url": f"https://github.example/{full}/issues/{i['number']}",
                          "labels": (lambda i: lambda info, first=None, last=None, **k:
                                     page([{"name": n} for n in sorted(i["labels"])], first, last))(i)}
                         for i in found]
                return page(nodes, first, last, after, cursor=lambda node: str(node["number"]))

            def object_(info, expression=None, oid=None, **k):
                # `Repository.object(expression:)` / `object(oid:)`: "A Git object in the
                # repository", null when there is none; here a commit (`__typename` resolves
                # `... on Commit`) with its `tree { oid }` and `status`: "Commit status
                # information, if present", and `Status.context(name:)`: "Looks up an individual
                # status context by context name" (GraphQL reference; `StatusState` is REST's
                # state in capitals).
                sha = expression if expression is not None else oid
                c = get_obj(sha, "commit")
                if c is None:
                    return None
                return {"__typename": "Commit", "oid": sha, "tree": {"oid": c["tree"]},
                        "status": commit_status(repo, sha)}

            return {"autoMergeAllowed": bool(repo.get("allow_auto_merge")), "pullRequest": pull_request, "ref": ref,
                    "pullRequests": pull_requests, "issues": issues, "object": object_}

        def enable(info, input, **k):
            full, repo, pr = pull_of_node(input["pullRequestId"])
            if pr is None:
                raise Refused("NOT_FOUND", f"Could not resolve to a node with the global id of '{input['pullRequestId']}'")
            if pr["state"] != "open":
                raise Refused("UNPROCESSABLE", "Can't enable auto-merge for this pull request.")
            if not repo.get("allow_auto_merge"):
                raise Refused("UNPROCESSABLE", "Auto merge is not allowed for this repository")
            head = repo["refs"].get("heads/" + pr["head"])
            expected = input.get("expectedHeadOid")
            if expected is not None and expected != head:
                raise Refused("UNPROCESSABLE", f"The pull request's head {head} is not the expected head oid {expected}")
            if queue_of(repo, pr):
                if "mergeMethod" in given_fields(info, "input"):
                    raise Refused("UNPROCESSABLE", f"The merge strategy for {pr['base']} is set by the merge queue")
                if entry_of(repo, pr) is None:
                    # Nothing to wait for: refused as without a queue (see "merge queues").
                    state = merge_state(repo, pr)
                    if state in ("CLEAN", "UNSTABLE", "HAS_HOOKS"):
                        word = {"CLEAN": "clean", "UNSTABLE": "unstable", "HAS_HOOKS": "has_hooks"}[state]
                        raise Refused("UNPROCESSABLE", f"Pull request Pull request is in {word} status")
                    pr["auto_merge"] = {"enabled_by": viewer, "merge_method": queue_of(repo, pr)}
                    settle_queues(full, repo, groups=False)  # the groups after the mutation (`settle`)
                touch(pr)
                return {"pullRequest": pull(full, repo, pr), "actor": actor(viewer)}
            state = merge_state(repo, pr)
            if state in ("CLEAN", "UNSTABLE", "HAS_HOOKS"):
                word = {"CLEAN": "clean", "UNSTABLE": "unstable", "HAS_HOOKS": "has_hooks"}[state]
                raise Refused("UNPROCESSABLE", f"Pull request Pull request is in {word} status")
            pr["auto_merge"] = {"enabled_by": viewer, "merge_method": input.get("mergeMethod") or "MERGE"}
            touch(pr)
            return {"pullRequest": pull(full, repo, pr), "actor": actor(viewer)}

        def disable(info, input, **k):
            full, repo, pr = pull_of_node(input["pullRequestId"])
            if pr is None:
                raise Refused("NOT_FOUND", f"Could not resolve to a node with the global id of '{input['pullRequestId']}'")
            pr["auto_merge"] = None
            touch(pr)
            return {"pullRequest": pull(full, repo, pr), "actor": actor(viewer)}

        def queued_pull(node, expected=None):
            full, repo, pr = pull_of_node(node)
            if pr is None:
                raise Refused("NOT_FOUND", f"Could not resolve to a node with the global id of '{node}'")
            if pr["state"] != "open":
                raise Refused("UNPROCESSABLE", "Pull request is not open")
            if not queue_of(repo, pr):
                raise Refused("UNPROCESSABLE", f"Pull request's base branch {pr['base']} has no merge queue")
            head = repo["refs"].get("heads/" + pr["head"])
            if expected is not None and expected != head:
                raise Refused("UNPROCESSABLE", f"The pull request's head {head} is not the expected head oid {expected}")
            return full, repo, pr

        def entry_json(full, repo, pr, e):
            return {"id": f"MQE_{repo['id']}_{pr['number']}", "state": "AWAITING_CHECKS", "enqueuer": actor(e["enqueuer"]),
                    "enqueuedAt": e["at"], "position": 1, "jump": False, "solo": False,
                    "pullRequest": lambda info, **k: pull(full, repo, pr)}

        def enqueue_pr(info, input, **k):
            full, repo, pr = queued_pull(input["pullRequestId"], input.get("expectedHeadOid"))
            e = enqueue(repo, pr, viewer)
            return {"clientMutationId": input.get("clientMutationId"), "mergeQueueEntry": entry_json(full, repo, pr, e)}

        def dequeue_pr(info, input, **k):
            full, repo, pr = pull_of_node(input["id"])
            if pr is None:
                raise Refused("NOT_FOUND", f"Could not resolve to a node with the global id of '{input['id']}'")
            e = entry_of(repo, pr)
            if e is None:
                raise Refused("UNPROCESSABLE", "Pull request is not in the merge queue")
            leave_queue(repo, pr)
            return {"clientMutationId": input.get("clientMutationId"), "mergeQueueEntry": entry_json(full, repo, pr, e)}

        def update_refs(info, input, **k):
            # "Creates, updates and/or deletes multiple refs in a repository ... performed
            # atomically, meaning that if one of them is rejected, no other ref will be modified.
            # RefUpdate.beforeOid specifies that the given reference needs to point to the given
            # value before performing any updates ... afterOid ... 0000000000000000000000000000000000000000
            # can be used to delete a reference. If RefUpdate.force is set to true, a
            # non-fast-forward updates for the given reference will be allowed" (GraphQL
            # reference, Git mutations). The refusal's words are not documented: these are the
            # fake's own.
            found = [(full, repo) for full, repo in REPOS.items() if repo_node_id(repo) == input["repositoryId"]]
            if not found:
                raise Refused("NOT_FOUND", f"Could not resolve to a node with the global id of '{input['repositoryId']}'")
            full, repo = found[0]
            zero = "0" * 40
            planned = []
            for u in input["refUpdates"]:
                name = u["name"]
                if not name.startswith("refs/heads/"):
                    raise Refused("UNPROCESSABLE", f"{name} is not a branch")
                short = "heads/" + name[len("refs/heads/"):]
                now = repo["refs"].get(short)
                before = u.get("beforeOid")
                if before is not None and (now or zero) != before:
                    raise Refused("UNPROCESSABLE", f"{name} points to {now or 'nothing'}, not {before}")
                after = u["afterOid"]
                if after != zero:
                    get_obj(after, "commit")
                    if now and not u.get("force") and not is_ancestor(now, after):
                        raise Refused("UNPROCESSABLE", f"{name}: not a fast-forward update")
                try:
                    check_rules(full, repo, short)
                except ApiError as e:
                    raise Refused("UNPROCESSABLE", e.message)
                planned.append((short, after))
            for short, after in planned:
                if after == zero:
                    gone = repo["refs"].pop(short, None)
                    for pr in repo["pulls"].values():
                        if own(pr) and "heads/" + pr["head"] == short:
                            pr["head_sha"] = gone
                            # GitHub closes open pull requests whose head branch is deleted.
                            if pr["state"] == "open":
                                pr["state"], pr["closed_at"], pr["pinned_head"] = "closed", iso_now(), gone
                                pr["auto_merge"] = None
                                touch(pr)
                else:
                    repo["refs"][short] = after
            return {"clientMutationId": input.get("clientMutationId")}

        def create_commit_on_branch(info, input, **k):
            # "Appends a commit to the given branch as the authenticated user ... whose parent is
            # the HEAD of the provided branch"; `expectedHeadOid` "The git commit oid expected at
            # the head of the branch prior to the commit"; `FileAddition.contents` "The base64
            # encoded contents of the file" (GraphQL reference). Signed, every file 100644 (see
            # "signed commits"). The refusals' words are the fake's: GitHub documents none.
            b = input["branch"]
            full = b.get("repositoryNameWithOwner")
            repo = REPOS.get(full)
            if repo is None:
                raise Refused("NOT_FOUND", f"Could not resolve to a Repository with the name '{full}'.")
            short = "heads/" + (b.get("branchName") or "")
            head = repo["refs"].get(short)
            if head is None:
                raise Refused("NOT_FOUND", f"A ref named \"{b.get('branchName')}\" does not exist")
            if head != input["expectedHeadOid"]:
                raise Refused("STALE_DATA", f"Expected branch to point to \"{input['expectedHeadOid']}\" but it did not. Pull and try again.")
            try:
                check_rules(full, repo, short)
            except ApiError as e:
                raise Refused("UNPROCESSABLE", e.message)
            files = commit_files(head)
            changes = input.get("fileChanges") or {}
            for d in changes.get("deletions") or []:
                if files.pop(d["path"], None) is None:
                    raise Refused("UNPROCESSABLE", f"A path was requested for deletion which does not exist as of commit oid `{head}`")
            for a in changes.get("additions") or []:
                files[a["path"]] = ("100644", put_blob(base64.b64decode(a["contents"])))
            msg = input["message"]
            message = msg["headline"] + ("\n\n" + msg["body"] if msg.get("body") else "")
            sha = put_commit(build_tree(files), [head], message, signed=github_signs())
            repo["refs"][short] = sha
            for pr in repo["pulls"].values():
                if pr["state"] == "open" and own(pr) and "heads/" + pr["head"] == short:
                    touch(pr)
            return {"commit": {"oid": sha}, "clientMutationId": input.get("clientMutationId")}

        return {"viewer": {"login": viewer}, "repository": repository, "rateLimit": getattr(self, "_rate_limit", None),
                "enablePullRequestAutoMerge": enable, "disablePullRequestAutoMerge": disable,
                "updateRefs": update_refs, "createCommitOnBranch": create_commit_on_branch,
                "enqueuePullRequest": enqueue_pr, "dequeuePullRequest": dequeue_pr}

    def _record(self, method, path, op, violations):
        """Counts the operation and keeps what broke GitHub's description (no credential: of the
        headers, the User-Agent and the `X-GitHub-Api-Version` asked for only)."""
        agent = self.headers.get("User-Agent", "")
        entry = {"op": op.id if op else None, "method": method, "path": path, "user_agent": agent,
                 "flavor": SPEC["description"].flavor, "api_version": self.headers.get("X-GitHub-Api-Version"),
                 "violations": [{"check": v.check, "detail": v.detail, "status": v.status} for v in violations]}
        with LOCK:
            if op is not None:
                CONFORMANCE["operations"][op.id] = CONFORMANCE["operations"].get(op.id, 0) + 1
            for v in entry["violations"]:
                CONFORMANCE["violations"].append(dict(v, op=entry["op"], method=method, path=path, user_agent=agent))
            if SPEC["log"] is not None:
                SPEC["log"].write(json.dumps(entry) + "\n")
                SPEC["log"].flush()

    def _lose_race(self, path, spec):
        m = re.match(r"/repos/([^/]+/[^/]+)/", path)
        repo = REPOS.get(m.group(1)) if m else None
        if repo is None:
            return
        if spec.get("merge_pull") is not None:
            # A person merges the pull request just before this request: what the request acts
            # on was read while it was open.
            pr = repo["pulls"].get(int(spec["merge_pull"]))
            if pr is not None and pr["state"] == "open":
                try:
                    merge_pull(m.group(1), repo, pr, {"merge_method": "merge"})
                except ApiError:
                    pass  # GitHub refused the person's merge: the request meets the pull request open
            return
        ref = spec.get("ref", "heads/" + repo["default_branch"])
        parent = repo["refs"].get(ref)
        if parent is None:
            return
        files = tree_files(get_obj(parent, "commit")["tree"])
        for p, text in (spec.get("files") or {"RACE.md": f"moved at {time.time()}\n"}).items():
            if text is None:
                files.pop(p, None)
            else:
                files[p] = ("100644", put_blob(text.encode()))
        repo["refs"][ref] = put_commit(build_tree(files), [parent], spec.get("message", "another writer"))

    def _auth(self, path):
        auth = self.headers.get("Authorization", "")
        scheme, _, cred = auth.partition(" ")
        if path.startswith("/app/"):
            if scheme.lower() != "bearer":
                raise ApiError(401, "A JSON web token could not be decoded")
            check_app_jwt(cred)
            return
        if scheme.lower() not in ("bearer", "token") or cred not in TOKENS:
            raise ApiError(401, "Bad credentials")
        exp = TOKENS[cred]
        if exp is not None and exp < time.time():
            raise ApiError(401, "Bad credentials")
        if cred in EXPIRING:
            self._extra_headers["GitHub-Authentication-Token-Expiration"] = token_expiration_header(exp)
        return cred

    def _authorize(self, token, full):
        """The checks of a fine-grained actor (see "permissions of fine-grained actors"): a
        repository outside its selection is 404, an operation none of whose accepted permission
        sets it holds is 403 with X-Accepted-GitHub-Permissions (sent on every answer to it)."""
        actor = actor_of(token)
        if actor is None:
            return
        if actor.get("repositories") is not None and full not in actor["repositories"]:
            raise ApiError(404, "Not Found")
        op = getattr(self, "_op", None)
        sets = PERMISSIONS.get(op.id) if op is not None else None
        if not sets:
            return
        self._extra_headers["X-Accepted-GitHub-Permissions"] = accepted_header(sets)
        if not grants(actor["permissions"], sets):
            who = "integration" if actor["kind"] == "installation" else "personal access token"
            raise ApiError(403, f"Resource not accessible by {who}", documentation_url=op.doc_url or DOCS)

    def _api(self, method, path, query, body):
        if path.startswith("/_codeload/"):
            # The archive host: the token travels in the query, as on codeload.
            m = re.fullmatch(r"/_codeload/([^/]+/[^/]+)/legacy\.tar\.gz/([0-9a-f]{40})", path)
            if not m or query.get("token", [""])[0] not in TOKENS:
                raise ApiError(404, "Not Found")
            data = tarball(m.group(1), m.group(2))
            return 200, None, {}, data, "application/x-gzip"
        token = self._auth(path)
        self._token = token
        m = re.fullmatch(r"/app/installations/(\d+)/access_tokens", path)
        if m and method == "POST":
            if int(m.group(1)) != APP["installation_id"]:
                raise ApiError(404, "Not Found")
            return 201, self._installation_token(body or {})
        m = re.fullmatch(r"/app/installations/(\d+)", path)
        if m and method == "GET":
            # "Get an installation for the authenticated app"
            # (https://docs.github.com/rest/apps/apps#get-an-installation-for-the-authenticated-app):
            # 404 for an installation that is not this app's.
            if int(m.group(1)) != APP["installation_id"]:
                raise ApiError(404, "Not Found")
            return 200, installation_json()
        m = re.fullmatch(r"/repos/([^/]+)/([^/]+)(/.*)?", path)
        if not m:
            raise ApiError(404, "Not Found")
        full = f"{m.group(1)}/{m.group(2)}"
        repo = repo_or_404(full)
        self._authorize(token, full)
        rest = m.group(3) or ""
        return self._repo_api(method, full, repo, rest, query, body)

    def _installation_token(self, body):
        """`POST /app/installations/{id}/access_tokens` ("Create an installation access token for
        an app", https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app):
        a token for an hour with the installation's permissions, or fewer: `permissions` "The
        permissions granted to the user access token" and `repositories` "List of repository
        names that the token should have access to" narrow it; "The installation access token
        cannot be granted access to repositories that the installation was not granted access to
        ... cannot be granted permissions that the app was not granted" (the operation's
        description, same page). Asking for more than the
        installation has is 422 "The permissions requested are not granted to this installation."
        (GitHub's message as clients meet it:
        https://github.com/peter-murray/workflow-application-token-action/issues/48, and in
        actions/create-github-app-token's log quoted in https://github.com/elastic/apm-agent-go/pull/1662); a repository
        the installation cannot see is 422 too ("There is at least one repository that does not
        exist or is not accessible to the parent installation.", GitHub's message quoted by
        clients; the docs list 422 "Validation failed" only). The token's permissions follow the
        installation's later changes (`POST /_fake/app`), never beyond what it was created with."""
        have = APP["permissions"]
        asked = body.get("permissions")
        if asked is not None:
            for k, v in asked.items():
                if LEVELS.get(v, 0) > LEVELS.get(have.get(k), 0) and not (k == "metadata" and permission_level(have, k) >= LEVELS.get(v, 0)):
                    raise ApiError(422, "The permissions requested are not granted to this installation.")
        names = body.get("repositories")
        repos = None
        if names is not None:
            owners = sorted({f.split("/")[0] for f in (APP["repositories"] if APP["repositories"] is not None else REPOS)})
            repos = []
            for n in names:
                full = next((f"{o}/{n}" for o in owners if f"{o}/{n}" in REPOS
                             and (APP["repositories"] is None or f"{o}/{n}" in APP["repositories"])), None)
                if full is None:
                    raise ApiError(422, "There is at least one repository that does not exist or is not accessible to the parent installation.")
                repos.append(full)
        tok = "ghs_" + secrets.token_hex(18)
        register_secret("github fake: installation token", tok)
        TOKENS[tok] = time.time() + 3600
        ACTORS[tok] = {"kind": "installation", "permissions": dict(asked) if asked is not None else None,
                       "repositories": repos}
        actor = actor_of(tok)
        exp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        selection = "selected" if actor["repositories"] is not None else "all"
        return {"token": tok, "expires_at": exp, "permissions": actor["permissions"], "repository_selection": selection}

    def _repo_api(self, method, full, repo, rest, query, body):
        owner = full.split("/")[0]
        host = self.headers.get("Host", "127.0.0.1")
        if rest == "" and method == "GET":
            return 200, repo_json(full, repo)
        if rest == "" and method == "PATCH":
            # "Update a repository": the fake keeps `allow_auto_merge` (auto-merge).
            if "allow_auto_merge" in body:
                repo["allow_auto_merge"] = bool(body["allow_auto_merge"])
            return 200, dict(repo_json(full, repo), allow_auto_merge=bool(repo.get("allow_auto_merge")))
        m = re.fullmatch(r"/branches/(.+)/protection", rest)
        if m and method == "PUT":
            if resolve(repo, m.group(1)) is None:
                raise ApiError(404, "Branch not found")
            return 200, set_protection(repo, m.group(1), body or {})
        if m and method == "DELETE":
            if (repo.get("protection") or {}).pop(m.group(1), None) is None:
                raise ApiError(404, "Branch not protected")
            return 204, None
        m = re.fullmatch(r"/branches/(.+)/protection/required_signatures", rest)
        if m and method in ("POST", "DELETE"):
            # "Create commit signature protection" / "Delete ..." (https://docs.github.com/rest/branches/branch-protection#create-commit-signature-protection):
            # "You must enable branch protection to require signed commits."
            p = protection_of(repo, m.group(1))
            if p is None:
                raise ApiError(404, "Branch not protected")
            p["signatures"] = method == "POST"
            if method == "DELETE":
                return 204, None
            return 200, {"url": f"https://api.github.example/repos/{full}/branches/{m.group(1)}/protection/required_signatures",
                         "enabled": True}
        m = re.fullmatch(r"/rules/branches/(.+)", rest)
        if m and method == "GET":
            return 200, branch_rules_json(full, repo, m.group(1))
        m = re.fullmatch(r"/pulls/(\d+)/reviews", rest)
        if m and method == "POST":
            pr = repo["pulls"].get(int(m.group(1)))
            if pr is None:
                raise ApiError(404, "Not Found")
            if pr["state"] != "open":
                raise ApiError(422, "Unprocessable Entity", errors=["Can not approve a closed pull request"])
            login = login_of(getattr(self, "_token", None))
            if (body or {}).get("event") == "APPROVE":
                approvals = pr.setdefault("approvals", [])
                if login not in approvals:
                    approvals.append(login)
            rid = new_id()
            head = repo["refs"].get("heads/" + pr["head"])
            return 200, {"id": rid, "node_id": f"PRR_{rid}", "user": {"login": login, "id": 3},
                         "body": (body or {}).get("body") or "", "state": "APPROVED" if (body or {}).get("event") == "APPROVE" else "COMMENTED",
                         "html_url": f"https://github.example/{full}/pull/{pr['number']}#pullrequestreview-{rid}",
                         "pull_request_url": f"https://api.github.example/repos/{full}/pulls/{pr['number']}",
                         "_links": {"html": {"href": ""}, "pull_request": {"href": ""}},
                         "submitted_at": iso_now(), "commit_id": head, "author_association": "MEMBER"}

        m = re.fullmatch(r"/tarball(?:/(.+))?", rest)
        if m and method == "GET":
            sha = resolve(repo, m.group(1) or repo["default_branch"])
            if sha is None:
                raise ApiError(404, "Not Found")
            tok = "cl_" + secrets.token_hex(8)
            # The download URL's token is a credential (anyone holding the URL reads the repo).
            register_secret("github fake: archive download token", tok)
            TOKENS[tok] = time.time() + 300
            loc = f"http://{host}/_codeload/{full}/legacy.tar.gz/{sha}?token={tok}"
            return 302, None, {"Location": loc}

        m = re.fullmatch(r"/commits/(.+)/statuses", rest)
        if m and method == "GET":
            # "List commit statuses for a reference"
            # (https://docs.github.com/rest/commits/statuses#list-commit-statuses-for-a-reference):
            # every status posted on the commit, "in reverse chronological order. The first
            # status in the list will be the latest one."
            sha = resolve(repo, m.group(1))
            if sha is None:
                raise ApiError(422, f"No commit found for SHA: {m.group(1)}")
            log = list(reversed(repo["status_log"].get(sha, [])))
            return self._page(log, query, f"/repos/{full}/commits/{m.group(1)}/statuses")

        m = re.fullmatch(r"/compare/(.+)", rest)
        if m and method == "GET":
            per_page, page = query.get("per_page", [None])[0], query.get("page", [None])[0]
            return 200, compare_commits(full, repo, m.group(1), int(per_page) if per_page else None,
                                        int(page) if page else None)

        if rest == "/merges" and method == "POST":
            sha = merge_branches(full, repo, body or {}, signed=signs_git_data(getattr(self, "_token", None), body))
            if sha is None:
                return 204, None
            return 201, commit_json(full, sha)

        m = re.fullmatch(r"/commits/(.+?)(/status)?", rest)
        if m and method == "GET":
            sha = resolve(repo, m.group(1))
            if sha is None:
                raise ApiError(422, f"No commit found for SHA: {m.group(1)}")
            if m.group(2):
                sts = repo["statuses"].get(sha, {})
                states = [s["state"] for s in sts.values()]
                overall = "failure" if any(s in ("failure", "error") for s in states) else ("pending" if not states or "pending" in states else "success")
                return 200, {"sha": sha, "state": overall, "statuses": list(sts.values()), "total_count": len(sts)}
            if "application/vnd.github.sha" in self.headers.get("Accept", ""):
                return 200, None, {}, sha.encode(), "application/vnd.github.sha"
            return 200, commit_json(full, sha)

        m = re.fullmatch(r"/git/(?:ref|refs)/(.+)", rest)
        if m and method == "GET":
            ref = m.group(1)
            if ref not in repo["refs"]:
                raise ApiError(404, "Not Found")
            return 200, {"ref": "refs/" + ref, "object": {"sha": repo["refs"][ref], "type": "commit"}}

        if rest == "/git/refs" and method == "POST":
            ref, sha = body.get("ref", ""), body.get("sha", "")
            if not ref.startswith("refs/") or ref.count("/") < 2:
                raise ApiError(422, "Reference name must start with 'refs/' and have at least two slashes.")
            if not get_obj(sha, "commit"):
                raise ApiError(422, "Object does not exist")
            short = ref[len("refs/"):]
            if short in repo["refs"]:
                raise ApiError(422, "Reference already exists")
            check_rules(full, repo, short)
            repo["refs"][short] = sha
            return 201, {"ref": ref, "object": {"sha": sha, "type": "commit"}}

        m = re.fullmatch(r"/git/refs/(.+)", rest)
        if m and method == "PATCH":
            short, sha = m.group(1), body.get("sha", "")
            if short not in repo["refs"]:
                raise ApiError(422, "Reference does not exist")
            if not get_obj(sha, "commit"):
                raise ApiError(422, "Object does not exist")
            # A ref moves by fast-forward unless `force` ("Indicates whether to force the update
            # or to make sure the update is a fast-forward update", the body's description); GitHub
            # answers 422 "Update is not a fast forward" otherwise.
            if not body.get("force") and not is_ancestor(repo["refs"][short], sha):
                raise ApiError(422, "Update is not a fast forward")
            check_rules(full, repo, short)
            repo["refs"][short] = sha
            return 200, {"ref": "refs/" + short, "object": {"sha": sha, "type": "commit"}}
        if m and method == "DELETE":
            short = m.group(1)
            if short not in repo["refs"]:
                raise ApiError(422, "Reference does not exist")
            if short == "heads/" + repo["default_branch"]:
                raise ApiError(422, "Cannot delete the default branch")
            check_rules(full, repo, short)
            gone = repo["refs"].pop(short)
            # A pull request keeps its last head commit when its branch is deleted (`head.sha`
            # is a required string of the `pull-request-simple` schema).
            for pr in repo["pulls"].values():
                if own(pr) and "heads/" + pr["head"] == short:
                    pr["head_sha"] = gone
            # GitHub closes open pull requests whose head branch is deleted.
            for pr in repo["pulls"].values():
                if pr["state"] == "open" and own(pr) and "heads/" + pr["head"] == short:
                    pr["state"], pr["closed_at"], pr["pinned_head"] = "closed", iso_now(), gone
                    pr["auto_merge"] = None
                    pr["closed_by"] = self.headers.get("User-Agent", "")
                    touch(pr)
            return 204, None

        if rest == "/git/blobs" and method == "POST":
            content = body.get("content")
            if content is None:
                raise ApiError(422, "Invalid request.\n\n\"content\" wasn't supplied.")
            data = base64.b64decode(content) if body.get("encoding") == "base64" else content.encode()
            return 201, {"sha": put_blob(data), "url": ""}
        m = re.fullmatch(r"/git/blobs/([0-9a-f]{40})", rest)
        if m and method == "GET":
            data = get_obj(m.group(1), "blob")
            if data is None:
                raise ApiError(404, "Not Found")
            # "Get a blob" (https://docs.github.com/rest/git/blobs#get-a-blob): "The `content` in
            # the response will always be Base64 encoded", broken into lines as GitHub's Ruby
            # encodes it (`Base64.encode64`: "Line feeds are added to every 60 encoded
            # characters", https://apidock.com/ruby/Base64/encode64); clients join the lines.
            return 200, {"sha": m.group(1), "size": len(data), "encoding": "base64", "content": base64_lines(data),
                         "url": f"https://api.github.example/repos/{full}/git/blobs/{m.group(1)}",
                         "node_id": "B_" + m.group(1)[:16]}

        if rest == "/git/trees" and method == "POST":
            return 201, self._create_tree(body)
        m = re.fullmatch(r"/git/trees/(.+)", rest)
        if m and method == "GET":
            sha = m.group(1)
            if not get_obj(sha, "tree"):
                c = resolve(repo, sha)
                sha = get_obj(c, "commit")["tree"] if c else None
            if not sha:
                raise ApiError(404, "Not Found")
            if query.get("recursive"):
                entries = [{"path": p, "mode": md, "type": "commit" if md == "160000" else "blob", "sha": s}
                           for p, (md, s) in sorted(tree_files(sha).items())]
            else:
                entries = [{"path": n, "mode": md, "type": "tree" if md == "40000" else "blob", "sha": s} for md, n, s in get_obj(sha, "tree")]
            return 200, {"sha": sha, "tree": entries, "truncated": False}

        if rest == "/git/commits" and method == "POST":
            tree, parents = body.get("tree", ""), body.get("parents", [])
            if not get_obj(tree, "tree"):
                raise ApiError(422, "Tree SHA does not exist")
            for p in parents:
                if not get_obj(p, "commit"):
                    raise ApiError(422, "Parent SHA does not exist or is not a commit object")
            if not body.get("message"):
                raise ApiError(422, "Invalid request.\n\n\"message\" wasn't supplied.")
            signed = signs_git_data(getattr(self, "_token", None), body)
            return 201, git_commit_json(put_commit(tree, parents, body["message"], signed=signed))
        m = re.fullmatch(r"/git/commits/([0-9a-f]{40})", rest)
        if m and method == "GET":
            if not get_obj(m.group(1), "commit"):
                raise ApiError(404, "Not Found")
            return 200, git_commit_json(m.group(1))

        if rest == "/pulls" and method == "GET":
            # "List pull requests" (https://docs.github.com/rest/pulls/pulls#list-pull-requests):
            # `state` "Either `open`, `closed`, or `all`" (default `open`); `head`
            # "`user:ref-name`"; `sort` `created` (the default), `updated`, `popularity` ("the
            # number of comments") or `long-running`; `direction` "Default: `desc` when sort is
            # `created` or sort is not specified, otherwise `asc`"; `per_page` (default 30, max
            # 100) and `page`. Pull requests are numbered in the order they are created, so
            # `created` orders by number. `long-running` is ordered as `created`, without
            # GitHub's filter ("open for more than a month and have had activity within the past
            # month"), which the fake's timeless pull requests cannot meet.
            state = query.get("state", ["open"])[0]
            head = query.get("head", [None])[0]
            base = query.get("base", [None])[0]
            sort = query.get("sort", ["created"])[0]
            direction = query.get("direction", ["desc" if sort == "created" else "asc"])[0]
            keys = {"updated": lambda p: (p.get("updated", 0), p["number"]),
                    "popularity": lambda p: (len(p.get("comments") or ()), p["number"])}
            pulls = sorted(repo["pulls"].values(), key=keys.get(sort, lambda p: p["number"]),
                           reverse=direction == "desc")
            out = []
            for pr in pulls:
                if state != "all" and pr["state"] != state:
                    continue
                if head and head != pull_json(full, repo, pr)["head"]["label"]:
                    continue
                if base and base != pr["base"]:
                    continue
                out.append(pull_json(full, repo, pr))
            return self._page(out, query, f"/repos/{full}/pulls")

        if rest == "/pulls" and method == "POST":
            return 201, self._create_pull(full, repo, body)

        if rest == "/issues" and method == "GET":
            return self._page(list_issues(full, repo, query), query, f"/repos/{full}/issues")
        if rest == "/issues" and method == "POST":
            out = create_issue(full, repo, body or {})
            return 201, out, {"Location": out["url"]}
        m = re.fullmatch(r"/issues/(\d+)", rest)
        if m and int(m.group(1)) in repo.get("issues", {}):
            # A plain issue ("Get an issue", "Update an issue"); a pull request's number goes on
            # below. `/pulls/{n}` of a plain issue's number is 404, as on GitHub.
            issue = repo["issues"][int(m.group(1))]
            if method == "GET":
                return 200, plain_issue_json(full, repo, issue)
            if method == "PATCH":
                return 200, update_issue(full, repo, issue, body or {}, self.headers.get("User-Agent", ""))

        m = re.fullmatch(r"/(pulls|issues)/(\d+)", rest)
        if m:
            pr = repo["pulls"].get(int(m.group(2)))
            if pr is None:
                raise ApiError(404, "Not Found")
            if method == "GET":
                out = (pull_json if m.group(1) == "pulls" else issue_json)(full, repo, pr)
                if m.group(1) == "pulls" and pr["state"] == "open":
                    out["mergeable"] = mergeable(repo, pr)
                return 200, out
            if method == "PATCH":
                if body.get("state") == "open" and pr["state"] != "open":
                    if "heads/" + pr["head"] not in repo["refs"]:
                        raise ApiError(422, "Validation Failed", errors=[{"resource": "PullRequest", "code": "custom", "message": "state cannot be changed. The head branch was deleted."}])
                    # "We're blocking the pull request reopen if the current head isn't a
                    # descendant of the stored head sha (which is what the head was when the pull
                    # request was closed)" (GitHub support, quoted in isaacs/github#361).
                    pinned = pr.get("pinned_head")
                    if pinned and not is_ancestor(pinned, repo["refs"]["heads/" + pr["head"]]):
                        raise ApiError(422, "Validation Failed", errors=[{"resource": "PullRequest", "code": "custom", "message": "state cannot be changed. The " + pr["head"] + " branch was force-pushed or recreated."}])
                    self._refuse_duplicate(owner, repo, pr["head"], exclude=pr["number"])
                was = pr["state"]
                for k in ("title", "body", "state"):
                    if k in body:
                        pr[k] = body[k]
                if was == "open" and pr["state"] == "closed":
                    # Closing a pull request cancels its auto-merge, and pins its head.
                    pr["auto_merge"] = None
                    pr["pinned_head"] = repo["refs"].get("heads/" + pr["head"])
                    # Who closed it, for the tests (`closed_by` in GET /_fake/state): the
                    # User-Agent of the closing request, cellbridge's (`cellbridge/...`) or a
                    # person's (the tests' client, `cellbridge-tests`).
                    pr["closed_at"], pr["closed_by"] = iso_now(), self.headers.get("User-Agent", "")
                elif was == "closed" and pr["state"] == "open":
                    pr["closed_at"] = pr["closed_by"] = pr["pinned_head"] = None
                if "labels" in body and m.group(1) == "issues":
                    pr["labels"] = sorted(set(label_names(body["labels"])))
                touch(pr)
                return 200, (issue_json if m.group(1) == "issues" else pull_json)(full, repo, pr)

        m = re.fullmatch(r"/pulls/(\d+)/merge", rest)
        if m and method == "PUT":
            pr = repo["pulls"].get(int(m.group(1)))
            if pr is None:
                raise ApiError(404, "Not Found")
            if queue_of(repo, pr):
                raise ApiError(405, THROUGH_THE_QUEUE)
            sha = merge_pull(full, repo, pr, body or {})
            pr["closed_by"] = self.headers.get("User-Agent", "")
            pr["merged_by"] = login_of(getattr(self, "_token", None))
            return 200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"}

        m = re.fullmatch(r"/pulls/(\d+)/update-branch", rest)
        if m and method == "PUT":
            pr = repo["pulls"].get(int(m.group(1)))
            if pr is None:
                raise ApiError(404, "Not Found")
            update_pull_branch(full, repo, pr, body)
            return 202, {"message": "Updating pull request branch.",
                         "url": f"https://github.example/repos/{full}/pulls/{pr['number']}"}

        m = re.fullmatch(r"/issues/(\d+)/comments", rest)
        if m and method in ("POST", "GET"):
            # "Create an issue comment" / "List issue comments"
            # (https://docs.github.com/rest/issues/comments#create-an-issue-comment,
            # https://docs.github.com/rest/issues/comments#list-issue-comments): "Every pull
            # request is an issue", so a pull request's conversation is its issue's comments;
            # listed "by ascending ID", `since` keeping those updated at or after it.
            # A pull request's or a plain issue's.
            pr = repo["pulls"].get(int(m.group(1))) or repo.get("issues", {}).get(int(m.group(1)))
            if pr is None:
                raise ApiError(404, "Not Found")
            web = "pull" if pr["number"] in repo["pulls"] else "issues"
            comments = pr.setdefault("comments", [])
            if method == "GET":
                since = query.get("since", [None])[0]
                listed = [c for c in comments if since is None or c["updated_at"] >= since]
                return self._page(listed, query, f"/repos/{full}/issues/{pr['number']}/comments")
            if not isinstance(body.get("body"), str) or not body["body"]:
                raise ApiError(422, "Validation Failed", errors=[{"resource": "IssueComment", "field": "body", "code": "missing_field"}])
            cid = new_id()
            now = iso_now()
            comment = {"id": cid, "node_id": f"IC_{cid}", "body": body["body"],
                       "url": f"https://api.github.example/repos/{full}/issues/comments/{cid}",
                       "html_url": f"https://github.example/{full}/{web}/{pr['number']}#issuecomment-{cid}",
                       "issue_url": f"https://api.github.example/repos/{full}/issues/{pr['number']}",
                       "user": {"login": "cellbridge[bot]", "id": 2}, "created_at": now, "updated_at": now,
                       "author_association": "NONE", "user_agent": self.headers.get("User-Agent", "")}
            comments.append(comment)
            touch(pr)
            out = {k: v for k, v in comment.items() if k != "user_agent"}
            return 201, out, {"Location": comment["url"]}

        m = re.fullmatch(r"/issues/(\d+)/labels", rest)
        if m and method in ("POST", "PUT", "GET"):
            pr = repo["pulls"].get(int(m.group(1))) or repo.get("issues", {}).get(int(m.group(1)))
            if pr is None:
                raise ApiError(404, "Not Found")
            if method != "GET":
                labels = body.get("labels", []) if isinstance(body, dict) else body
                labels = [label["name"] if isinstance(label, dict) else label for label in labels]
                pr["labels"] = sorted(set(labels) | (set(pr["labels"]) if method == "POST" else set()))
            return 200, [{"name": n, "id": repo["labels"].setdefault(n, new_id())} for n in pr["labels"]]

        m = re.fullmatch(r"/statuses/([0-9a-f]{40})", rest)
        if m and method == "POST":
            sha = m.group(1)
            if not get_obj(sha, "commit"):
                raise ApiError(422, f"No commit found for SHA: {sha}")
            state = body.get("state")
            if state not in ("error", "failure", "pending", "success"):
                raise ApiError(422, "Validation Failed", errors=[{"resource": "Status", "field": "state", "code": "custom"}])
            desc = body.get("description") or ""
            if len(desc) > 140:
                raise ApiError(422, "Validation Failed", errors=[{"resource": "Status", "field": "description", "code": "custom", "message": "description is too long (maximum is 140 characters)"}])
            ctx = body.get("context", "default")
            sid, now = new_id(), iso_now()
            # The `status` schema's members (https://docs.github.com/rest/commits/statuses#create-a-commit-status).
            st = {"state": state, "context": ctx, "description": desc, "target_url": body.get("target_url"), "id": sid,
                  "node_id": f"SC_{sid}", "url": f"https://api.github.example/repos/{full}/statuses/{sha}",
                  "avatar_url": None, "created_at": now, "updated_at": now,
                  "creator": {"login": "cellbridge[bot]", "id": 2}}
            # The latest per context (what the combined status shows) and every one (what the
            # list of statuses shows).
            repo["statuses"].setdefault(sha, {})[ctx] = st
            repo.setdefault("status_log", {}).setdefault(sha, []).append(st)
            return 201, st

        raise ApiError(404, "Not Found")

    def _page(self, items, query, path):
        """One page of a list (`per_page`, default 30, at most 100; `page` from 1) with the Link
        header GitHub adds when there are more ("Using pagination in the REST API",
        https://docs.github.com/rest/using-the-rest-api/using-pagination-in-the-rest-api)."""
        try:
            size = min(max(int(query.get("per_page", ["30"])[0]), 1), 100)
            number = max(int(query.get("page", ["1"])[0]), 1)
        except ValueError:
            size, number = 30, 1
        last = max((len(items) + size - 1) // size, 1)
        spec = SPEC["description"]
        base = f"http://{self.headers.get('Host', '127.0.0.1')}{spec.prefix if spec else ''}{path}"
        links = []
        other = urlencode([(k, v) for k, vs in query.items() if k not in ("page", "per_page") for v in vs])
        for rel, n in (("prev", number - 1), ("next", number + 1), ("first", 1), ("last", last)):
            if (rel == "prev" and number > 1) or (rel == "next" and number < last) or (rel in ("first", "last") and last > 1):
                links.append(f'<{base}?{other + "&" if other else ""}per_page={size}&page={n}>; rel="{rel}"')
        return 200, items[(number - 1) * size:number * size], ({"Link": ", ".join(links)} if links else {})

    def _create_tree(self, body):
        base = body.get("base_tree")
        files = {}
        if base:
            if not get_obj(base, "tree"):
                raise ApiError(422, "Invalid tree info: base_tree does not exist")
            files = tree_files(base)
        for e in body.get("tree", []):
            path = e.get("path", "")
            if not path or path.startswith("/") or ".." in path.split("/"):
                raise ApiError(422, f"tree.path contains a malformed path component")
            if "sha" in e and e["sha"] is None and "content" not in e:
                if path not in files and not any(p.startswith(path + "/") for p in files):
                    raise ApiError(422, "GitRPC::BadObjectState")
                files = {p: v for p, v in files.items() if p != path and not p.startswith(path + "/")}
                continue
            if "content" in e:
                sha = put_blob(e["content"].encode())
            else:
                sha = e.get("sha")
                if not get_obj(sha or "", "blob"):
                    raise ApiError(422, "tree.sha is not a valid blob")
            files[path] = (e.get("mode", "100644"), sha)
        sha = build_tree(files)
        return {"sha": sha, "tree": [{"path": n, "mode": md, "sha": s, "type": "tree" if md == "40000" else "blob"} for md, n, s in get_obj(sha, "tree")], "truncated": False}

    def _refuse_duplicate(self, owner, repo, head, exclude=None):
        for pr in repo["pulls"].values():
            if pr["state"] == "open" and own(pr) and pr["head"] == head and pr["number"] != exclude:
                raise ApiError(422, "Validation Failed", errors=[{"resource": "PullRequest", "code": "custom", "message": f"A pull request already exists for {owner}:{head}."}])

    def _create_pull(self, full, repo, body):
        owner = full.split("/")[0]
        head, base = body.get("head", ""), body.get("base", "")
        if ":" in head:
            head = head.split(":", 1)[1]
        if not body.get("title"):
            raise ApiError(422, "Validation Failed", errors=[{"resource": "PullRequest", "field": "title", "code": "missing_field"}])
        head_sha, base_sha = repo["refs"].get("heads/" + head), repo["refs"].get("heads/" + base)
        if head_sha is None:
            raise ApiError(422, "Validation Failed", errors=[{"resource": "PullRequest", "field": "head", "code": "invalid"}])
        if base_sha is None:
            raise ApiError(422, "Validation Failed", errors=[{"resource": "PullRequest", "field": "base", "code": "invalid"}])
        self._refuse_duplicate(owner, repo, head)
        if is_ancestor(head_sha, base_sha):
            raise ApiError(422, "Validation Failed", errors=[{"resource": "PullRequest", "code": "custom", "message": f"No commits between {base} and {head}"}])
        number = repo["next_number"]
        repo["next_number"] += 1
        pr = {"id": new_id(), "number": number, "state": "open", "title": body["title"], "body": body.get("body") or "",
              "head": head, "base": base, "labels": [], "merged": False, "created_at": iso_now(), "comments": []}
        touch(pr)
        repo["pulls"][number] = pr
        return pull_json(full, repo, pr)

    # --- control -------------------------------------------------------------------------------

    def _control(self, method, path, query, body):
        with LOCK:
            if path == "/_fake/seed" and method == "POST":
                return 201, seed(body)
            if path == "/_fake/pulls" and method == "POST":
                return 201, seed_pulls(body)
            if path == "/_fake/faults" and method == "POST":
                FAULTS.extend(body if isinstance(body, list) else [body])
                return 201, {"faults": len(FAULTS)}
            if path == "/_fake/faults" and method == "DELETE":
                FAULTS.clear()
                return 200, {}
            if path == "/_fake/faults" and method == "GET":
                return 200, {"faults": FAULTS}
            if path == "/_fake/graphql_limits" and method == "POST":
                unknown = set(body) - set(GRAPHQL_LIMITS_DEFAULT)
                if unknown:
                    return 400, {"message": f"not a GraphQL limit setting: {sorted(unknown)}"}
                if body.get("timeout_status", 502) not in (502, 504):
                    return 400, {"message": "timeout_status: 502 or 504 (\"you may receive either a `502` or `504` status code\")"}
                if body.get("rate_limited_type", "RATE_LIMITED") not in ("RATE_LIMITED", "RATE_LIMIT"):
                    return 400, {"message": "rate_limited_type: RATE_LIMITED or RATE_LIMIT"}
                GRAPHQL_LIMITS.update(body)
                return 200, dict(GRAPHQL_LIMITS, budgets=BUDGETS)
            if path == "/_fake/schema" and method == "POST":
                SCHEMA_LACKS.clear()
                SCHEMA_LACKS.update(body.get("lacks", []))
                return 200, {"lacks": sorted(SCHEMA_LACKS)}
            if path == "/_fake/graphql_limits" and method == "GET":
                return 200, dict(GRAPHQL_LIMITS, budgets=BUDGETS)
            if path == "/_fake/graphql_limits" and method == "DELETE":
                GRAPHQL_LIMITS.clear()
                GRAPHQL_LIMITS.update(GRAPHQL_LIMITS_DEFAULT)
                BUDGETS.clear()
                return 200, {}
            if path == "/_fake/requests" and method == "GET":
                reqs = list(REQUESTS)
                return 200, {"requests": reqs, "count": len(reqs), "writes": sum(r["write"] for r in reqs)}
            if path == "/_fake/requests" and method == "DELETE":
                REQUESTS.clear()
                return 200, {}
            if path == "/_fake/tokens" and method == "POST":
                TOKENS[body["token"]] = None
                EXPIRING.discard(body["token"])
                if body.get("expires_at"):
                    # A token with an expiry (ISO 8601, UTC): refused with 401 after it, and
                    # named in `GitHub-Authentication-Token-Expiration` until then.
                    TOKENS[body["token"]] = calendar.timegm(time.strptime(re.sub(r"\.\d+Z$", "Z", body["expires_at"]), "%Y-%m-%dT%H:%M:%SZ"))
                    EXPIRING.add(body["token"])
                if body.get("login"):
                    # Who the token acts as (a reviewer's own token, say).
                    LOGINS[body["token"]] = body["login"]
                if body.get("permissions") is not None:
                    # A fine-grained personal access token: its permissions are checked.
                    ACTORS[body["token"]] = {"kind": "fine_grained", "permissions": dict(body["permissions"]),
                                             "repositories": body.get("repositories")}
                else:
                    ACTORS.pop(body["token"], None)
                return 201, {}
            if path == "/_fake/tokens" and method == "DELETE":
                if body.get("installation"):
                    # Every installation token revoked (an administrator suspending and
                    # reinstating the App, say): a request with one is then 401 "Bad credentials".
                    for tok in [t for t, a in ACTORS.items() if a["kind"] == "installation"]:
                        TOKENS.pop(tok, None)
                        ACTORS.pop(tok, None)
                    return 200, {}
                TOKENS.pop(body["token"], None)
                ACTORS.pop(body["token"], None)
                return 200, {}
            if path == "/_fake/conformance" and method == "GET":
                return 200, {"flavor": SPEC["description"].flavor, "operations": dict(CONFORMANCE["operations"]),
                             "violations": list(CONFORMANCE["violations"])}
            if path == "/_fake/conformance" and method == "DELETE":
                CONFORMANCE["operations"].clear()
                CONFORMANCE["violations"].clear()
                if SPEC["log"] is not None:
                    # The suite report forgets what this fake recorded before: planted on purpose.
                    SPEC["log"].write(json.dumps({"cleared": True}) + "\n")
                    SPEC["log"].flush()
                return 200, {}
            if path == "/_fake/rulesets" and method == "POST":
                RULESETS.extend(body if isinstance(body, list) else [body])
                return 201, {"rulesets": list(RULESETS)}
            if path == "/_fake/rulesets" and method == "DELETE":
                RULESETS[:] = [r for r in RULESETS if body.get("repo") not in (None, r.get("repo"))]
                return 200, {"rulesets": list(RULESETS)}
            if path == "/_fake/rulesets" and method == "GET":
                return 200, {"rulesets": list(RULESETS)}
            if path == "/_fake/settings" and method == "POST":
                # A repository's settings as an administrator sets them in the web interface:
                # `allow_auto_merge` ("Allow auto-merge"; GHES 3.19's REST description does not
                # document it for "Update a repository", so a test of that flavor sets it here).
                # `web_commit_signing`: the site administrator's switch on GitHub Enterprise
                # Server (see "signed commits"), for the whole instance.
                if "web_commit_signing" in body:
                    SETTINGS["web_commit_signing"] = bool(body["web_commit_signing"])
                    if not body.get("repo"):
                        return 200, dict(SETTINGS)
                repo = repo_or_404(body.get("repo"))
                if "allow_auto_merge" in body:
                    repo["allow_auto_merge"] = bool(body["allow_auto_merge"])
                return 200, {"allow_auto_merge": bool(repo.get("allow_auto_merge"))}
            if path == "/_fake/merge_queue" and method == "POST":
                repo = repo_or_404(body.get("repo"))
                m = body.get("merge_method")
                if m is None:
                    (repo.get("merge_queues") or {}).pop(body.get("branch"), None)
                elif m in ("merge", "squash", "rebase"):
                    repo.setdefault("merge_queues", {})[body["branch"]] = m.upper()
                else:
                    raise ApiError(400, "merge_method must be merge, squash, rebase or null")
                settle(body["repo"], repo, triggered=False)
                return 200, {"merge_queues": dict(repo.get("merge_queues") or {})}
            if path == "/_fake/merge_state" and method == "POST":
                # GitHub not having computed a pull request's merge state yet (`computed: false`),
                # or having computed it (see `merge_state`).
                repo = repo_or_404(body.get("repo"))
                pr = repo["pulls"].get(int(body.get("number") or 0))
                if pr is None:
                    raise ApiError(404, "no such pull request")
                pr["merge_state_pending"] = not body.get("computed", True)
                return 200, {"mergeStateStatus": merge_state(repo, pr)}
            if path == "/_fake/fork_pull" and method == "POST":
                return 201, fork_pull(body)
            if path == "/_fake/update_branch" and method == "POST":
                # A person pressing "Update branch" on the pull request: the same merge as
                # `PUT /pulls/{n}/update-branch`.
                repo = repo_or_404(body.get("repo"))
                pr = repo["pulls"].get(int(body.get("number", 0)))
                if pr is None:
                    raise ApiError(404, "Not Found")
                sha = update_pull_branch(body["repo"], repo, pr, {k: v for k, v in body.items() if k == "expected_head_sha"})
                return 202, {"message": "Updating pull request branch.", "sha": sha,
                             "url": f"https://github.example/repos/{body['repo']}/pulls/{pr['number']}"}
            if path == "/_fake/app" and method == "POST":
                # The installation's permissions and repository selection (what a person sets in
                # the installation's settings); each given key replaces its value.
                if "permissions" in body:
                    perms = body["permissions"]
                    bad = {k: v for k, v in (perms or {}).items() if v not in LEVELS and v is not None}
                    if not isinstance(perms, dict) or bad:
                        raise ApiError(400, f"permissions must map names to read/write/admin: {bad or perms}")
                    APP["permissions"] = {k: v for k, v in perms.items() if v is not None}
                if "repositories" in body:
                    repos = body["repositories"]
                    if repos is not None and (not isinstance(repos, list) or not all(isinstance(r, str) and r.count("/") == 1 for r in repos)):
                        raise ApiError(400, "repositories must be null (all) or a list of \"owner/repo\"")
                    APP["repositories"] = list(repos) if repos is not None else None
            if path == "/_fake/app" and method in ("GET", "POST"):
                return 200, {"app_id": APP["app_id"], "client_id": APP["client_id"], "installation_id": APP["installation_id"],
                             "private_key": APP["private_key"],
                             "permissions": dict(APP["permissions"]), "repositories": APP["repositories"]}
            if path == "/_fake/state" and method == "GET":
                full = query.get("repo", [None])[0]
                repo = repo_or_404(full)
                branches = {r[len("heads/"):]: s for r, s in repo["refs"].items() if r.startswith("heads/")}
                files = {}
                # Modes other than 100644, per branch: {path: "100755" | "120000"}.
                modes = {}
                for b, sha in branches.items():
                    # A gitlink shows as the commit it names (no blob holds it).
                    files[b] = {p: (get_obj(s, "blob") or f"Subproject commit {s}".encode()).decode("utf-8", "replace")
                                for p, (_, s) in tree_files(get_obj(sha, "commit")["tree"]).items()}
                    modes.setdefault(b, {}).update({p: m for p, (m, _) in tree_files(get_obj(sha, "commit")["tree"]).items() if m != "100644"})
                pulls = []
                for pr in sorted(repo["pulls"].values(), key=lambda p: p["number"]):
                    j = pull_json(full, repo, pr)
                    j["labels"] = list(pr["labels"])
                    j["statuses"] = list(repo["statuses"].get(j["head"]["sha"], {}).values())
                    j["commits"] = self._commits_between(j["base"]["sha"], j["head"]["sha"])
                    j["comments"] = [c["body"] for c in pr.get("comments") or ()]
                    j["closed_by"] = pr.get("closed_by") if pr["state"] == "closed" else None
                    # auto-merge
                    am = pr.get("auto_merge")
                    j["auto_merge"] = {"enabled_by": am["enabled_by"], "merge_method": am["merge_method"]} if am else None
                    j["merged_by"] = pr.get("merged_by")
                    e = entry_of(repo, pr)
                    j["merge_queue_entry"] = {"enqueuer": e["enqueuer"], "head": e["head"],
                                              "merge_group": merge_group_event(repo, pr)} if e else None
                    j["approvals"] = list(pr.get("approvals") or [])
                    j["merge_state"] = merge_state(repo, pr) if pr["state"] == "open" else None
                    pulls.append(j)
                # Plain issues (not pull requests), by number.
                issues = [{"number": i["number"], "title": i["title"], "body": i["body"], "labels": list(i["labels"]),
                           "state": i["state"], "state_reason": i.get("state_reason"),
                           "comments": [c["body"] for c in i["comments"]]}
                          for i in sorted(repo.get("issues", {}).values(), key=lambda i: i["number"])]
                return 200, {"default_branch": repo["default_branch"], "branches": branches, "pulls": pulls, "files": files,
                             "modes": modes, "issues": issues, "allow_auto_merge": bool(repo.get("allow_auto_merge")),
                             "merges": [m for m in MERGES if m["repo"] == full]}
        raise ApiError(404, "no such control endpoint")

    @staticmethod
    def _commits_between(base, head):
        """Commits reachable from head but not from base (what the pull request shows)."""
        if head is None or base is None:
            return []
        out, stack, seen = [], [head], set()
        while stack:
            s = stack.pop()
            if s in seen or is_ancestor(s, base):
                continue
            seen.add(s)
            c = get_obj(s, "commit")
            out.append({"sha": s, "message": c["message"], "parents": c["parents"]})
            stack.extend(c["parents"])
        return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--token", action="append", default=[], help="a personal access token to accept")
    ap.add_argument("--openapi", required=True,
                    help="the folder of @octokit/openapi's generated descriptions (make testbed installs it)")
    ap.add_argument("--graphql-schema", default=None,
                    help="GitHub's GraphQL schema.json (default: @octokit/graphql-schema beside --openapi)")
    ap.add_argument("--flavor", choices=["api.github.com", "ghes"], default="api.github.com",
                    help="github.com, or GitHub Enterprise Server (API below /api/v3)")
    args = ap.parse_args()
    source = os.path.join(args.openapi, "api.github.com.json")
    if args.flavor == "ghes":
        # The newest GitHub Enterprise Server the package describes (`ghes-3.19.json` in 23.0.2).
        names = [n for n in os.listdir(args.openapi) if re.fullmatch(r"ghes-\d+\.\d+\.json", n)] if os.path.isdir(args.openapi) else []
        names.sort(key=lambda n: tuple(int(x) for x in n[5:-5].split(".")))
        source = os.path.join(args.openapi, names[-1] if names else "ghes-*.json")
    if not os.path.exists(source):
        print(f"github_fake: GitHub's description {source} is missing: run `make testbed` "
              "(it installs @octokit/openapi with npm)", file=sys.stderr, flush=True)
        return 2
    SPEC["description"] = github_openapi.Description.load(source, args.flavor)
    # GitHub's GraphQL schema (@octokit/graphql-schema, installed beside @octokit/openapi).
    SPEC["graphql"] = args.graphql_schema or github_graphql.schema_path(args.openapi)
    log_dir = os.environ.get("CELLBRIDGE_GITHUB_CONFORMANCE_DIR")
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        SPEC["log"] = open(os.path.join(log_dir, f"github-{os.getpid()}.jsonl"), "a", encoding="utf-8")
    for t in args.token:
        TOKENS[t] = None
    init_app()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"PORT={server.server_address[1]}", flush=True)
    try:
        sys.stdin.read()
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
