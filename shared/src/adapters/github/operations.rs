//! Every GitHub REST operation cellbridge sends, by its `operationId` in GitHub's OpenAPI
//! description (the `@octokit/openapi` package; <https://docs.github.com/rest>). Every request to
//! the API goes through one of these; the test suite checks each request against the
//! description and that every operation here was exercised (`tests/github_conformance.py` reads
//! the `id`s of this file).

use http::Method;

pub struct Operation {
    pub method: Method,
    /// The `operationId`.
    pub id: &'static str,
    /// The path template, below the API's base URL.
    pub path: &'static str,
    /// The fine-grained permission GitHub requires of an App installation or a fine-grained
    /// token for it, as `X-Accepted-GitHub-Permissions` writes it (sets separated by `; `), from
    /// "Permissions required for GitHub Apps"
    /// (<https://docs.github.com/rest/authentication/permissions-required-for-github-apps>):
    /// what a 403 names when GitHub's answer does not.
    pub permission: &'static str,
}

macro_rules! operations {
    ($($name:ident = $method:ident $path:literal $id:literal $permission:literal;)*) => {
        $(pub const $name: Operation = Operation { method: Method::$method, id: $id, path: $path, permission: $permission };)*
        /// All of them, in the order a sync meets them.
        pub const ALL: &[&Operation] = &[$(&$name),*];
    };
}

operations! {
    REPOS_GET = GET "/repos/{owner}/{repo}" "repos/get" "metadata=read";
    // Answered with a redirect to the archive host (codeload on github.com), whose URL is
    // outside the description.
    REPOS_DOWNLOAD_TARBALL_ARCHIVE = GET "/repos/{owner}/{repo}/tarball/{ref}" "repos/download-tarball-archive" "contents=read";
    PULLS_LIST = GET "/repos/{owner}/{repo}/pulls" "pulls/list" "pull_requests=read";
    REPOS_COMPARE_COMMITS = GET "/repos/{owner}/{repo}/compare/{base}...{head}" "repos/compare-commits" "contents=read";
    GIT_GET_BLOB = GET "/repos/{owner}/{repo}/git/blobs/{file_sha}" "git/get-blob" "contents=read";
    GIT_GET_COMMIT = GET "/repos/{owner}/{repo}/git/commits/{commit_sha}" "git/get-commit" "contents=read";
    GIT_GET_TREE = GET "/repos/{owner}/{repo}/git/trees/{tree_sha}" "git/get-tree" "contents=read";
    GIT_CREATE_TREE = POST "/repos/{owner}/{repo}/git/trees" "git/create-tree" "contents=write";
    GIT_CREATE_COMMIT = POST "/repos/{owner}/{repo}/git/commits" "git/create-commit" "contents=write";
    GIT_CREATE_REF = POST "/repos/{owner}/{repo}/git/refs" "git/create-ref" "contents=write";
    GIT_UPDATE_REF = PATCH "/repos/{owner}/{repo}/git/refs/{ref}" "git/update-ref" "contents=write";
    REPOS_MERGE = POST "/repos/{owner}/{repo}/merges" "repos/merge" "contents=write";
    REPOS_GET_COMMIT = GET "/repos/{owner}/{repo}/commits/{ref}" "repos/get-commit" "contents=read";
    REPOS_LIST_COMMIT_STATUSES_FOR_REF = GET "/repos/{owner}/{repo}/commits/{ref}/statuses" "repos/list-commit-statuses-for-ref" "statuses=read";
    REPOS_CREATE_COMMIT_STATUS = POST "/repos/{owner}/{repo}/statuses/{sha}" "repos/create-commit-status" "statuses=write";
    PULLS_CREATE = POST "/repos/{owner}/{repo}/pulls" "pulls/create" "pull_requests=write";
    PULLS_UPDATE = PATCH "/repos/{owner}/{repo}/pulls/{pull_number}" "pulls/update" "pull_requests=write";
    ISSUES_UPDATE = PATCH "/repos/{owner}/{repo}/issues/{issue_number}" "issues/update" "issues=write; pull_requests=write";
    ISSUES_ADD_LABELS = POST "/repos/{owner}/{repo}/issues/{issue_number}/labels" "issues/add-labels" "issues=write; pull_requests=write";
    ISSUES_CREATE_COMMENT = POST "/repos/{owner}/{repo}/issues/{issue_number}/comments" "issues/create-comment" "issues=write; pull_requests=write";
    ISSUES_LIST_FOR_REPO = GET "/repos/{owner}/{repo}/issues" "issues/list-for-repo" "issues=read";
    ISSUES_CREATE = POST "/repos/{owner}/{repo}/issues" "issues/create" "issues=write";
    // Authenticated as the App itself (its JWT): the installation's permissions, read to name
    // what it lacks once GitHub refused a token asking for cellbridge's.
    APPS_GET_INSTALLATION = GET "/app/installations/{installation_id}" "apps/get-installation" "";
    // The App's JWT: the installation token cellbridge mints itself, narrowed to the fleet
    // repository and cellbridge's permissions (`app.rs`); its answer is the permission check.
    APPS_CREATE_INSTALLATION_ACCESS_TOKEN = POST "/app/installations/{installation_id}/access_tokens" "apps/create-installation-access-token" "";
    // auto-merge
    // "Merge a pull request" (https://docs.github.com/rest/pulls/pulls#merge-a-pull-request), with
    // the head's `sha`, once GitHub refused to wait (the pull request can merge now). Listed under
    // "Contents" (write) in "Permissions required for GitHub Apps".
    PULLS_MERGE = PUT "/repos/{owner}/{repo}/pulls/{pull_number}/merge" "pulls/merge" "contents=write";
    // signatures
    // "Get rules for a branch": "Returns all active rules that apply to the specified branch
    // ... regardless of the ruleset they belong to", readable by anyone who can read the
    // repository (https://docs.github.com/rest/repos/rules#get-rules-for-a-branch): a
    // `required_signatures` rule among them ("Commits pushed to matching refs must have verified
    // signatures", the `repository-rule-required-signatures` schema). Listed under "Metadata".
    REPOS_GET_BRANCH_RULES = GET "/repos/{owner}/{repo}/rules/branches/{branch}" "repos/get-branch-rules" "metadata=read";
    // "Update a pull request branch" (https://docs.github.com/rest/pulls/pulls#update-a-pull-request-branch),
    // with `expected_head_sha`: the base merged in by GitHub, whose merge commit GitHub signs
    // whoever asks. Listed under "Pull requests" (write).
    PULLS_UPDATE_BRANCH = PUT "/repos/{owner}/{repo}/pulls/{pull_number}/update-branch" "pulls/update-branch" "pull_requests=write";
}

// auto-merge
/// The GraphQL operations cellbridge sends (<https://docs.github.com/graphql>), one document each,
/// to `{GITHUB_API_URL}/graphql` on github.com and `https://HOST/api/graphql` on GitHub Enterprise
/// Server. Their `id` is `graphql/<operation name>`, the name the document gives itself; the
/// test suite checks every document and its variables against GitHub's published schema
/// (`@octokit/graphql-schema`) and that each was exercised (`tests/github_conformance.py` reads
/// the `NAME = query|mutation "name" "permission";` lines below). The permission is what the
/// operation needs of an App installation or a fine-grained token.
pub struct GraphqlOperation {
    /// `graphql/<name>`, as the conformance report lists it.
    pub id: &'static str,
    /// The operation's name in its document (`query pullRequestMergeState(...)`).
    pub name: &'static str,
    pub mutation: bool,
    pub document: &'static str,
    pub permission: &'static str,
}

impl GraphqlOperation {
    /// As a REST-shaped [`Operation`] (`POST /graphql`), for the transport and the doubles.
    pub const fn as_operation(&self) -> Operation {
        Operation {
            method: Method::POST,
            id: self.id,
            path: "/graphql",
            permission: self.permission,
        }
    }
}

macro_rules! graphql_operations {
    ($($name:ident = $kind:ident $op:literal $permission:literal $document:expr;)*) => {
        $(pub const $name: GraphqlOperation = GraphqlOperation {
            id: concat!("graphql/", $op),
            name: $op,
            mutation: graphql_operations!(@mutation $kind),
            document: $document,
            permission: $permission,
        };)*
        /// All of them.
        pub const GRAPHQL: &[&GraphqlOperation] = &[$(&$name),*];
    };
    (@mutation query) => { false };
    (@mutation mutation) => { true };
}

graphql_operations! {
    // Where a pull request stands for merging, in one request: its node id, head, merge state
    // (`MergeStateStatus`), the repository's "Allow auto-merge" setting, who enabled auto-merge,
    // and the head commit's checks with whether each is required for this pull request
    // (`isRequired(pullRequestNumber:)` of `StatusContext` and `CheckRun`). Commit statuses need
    // statuses=read, check runs checks=read.
    GRAPHQL_MERGE_STATE = query "pullRequestMergeState" "pull_requests=read" MERGE_STATE_QUERY;
    // "Enable the default auto-merge on a pull request", for the head cellbridge checked only
    // (`expectedHeadOid`). Content-creating: paced as a write.
    GRAPHQL_ENABLE_AUTO_MERGE = mutation "enablePullRequestAutoMerge" "contents=write,pull_requests=write" ENABLE_AUTO_MERGE_MUTATION;
    // "Creates, updates and/or deletes multiple refs in a repository ... atomically ...
    // RefUpdate.beforeOid specifies that the given reference needs to point to the given value
    // before performing any updates ... afterOid ... 0000000000000000000000000000000000000000 can
    // be used to delete a reference" (GraphQL reference, Git): a deletion that is a
    // compare-and-swap, which the REST API has not.
    GRAPHQL_UPDATE_REFS = mutation "updateRefs" "contents=write" UPDATE_REFS_MUTATION;
    // "Disable auto merge on the given pull request".
    GRAPHQL_DISABLE_AUTO_MERGE = mutation "disablePullRequestAutoMerge" "contents=write,pull_requests=write" DISABLE_AUTO_MERGE_MUTATION;
    // signatures
    // Classic branch protection's "Require signed commits", which the REST API shows only to
    // administrators (`GET .../protection/required_signatures`): `Ref.refUpdateRule`, "Branch
    // protection rules that are viewable by non-admins" (GraphQL reference, Ref), and its
    // `requiresSignatures`, "Are commits required to be signed".
    GRAPHQL_REF_UPDATE_RULE = query "branchRequiresSignatures" "contents=read" REF_UPDATE_RULE_QUERY;
    // "Appends a commit to the given branch as the authenticated user. This mutation creates a
    // commit whose parent is the HEAD of the provided branch and also updates that branch to
    // point to the new commit. It can be thought of as similar to `git commit`" (GraphQL
    // reference, Commits); GitHub signs it for an App and a token alike. Content-creating.
    GRAPHQL_CREATE_COMMIT_ON_BRANCH = mutation "createCommitOnBranch" "contents=write" CREATE_COMMIT_ON_BRANCH_MUTATION;
    // cells
    // What a cell's proposal reads before its first write, in one request instead of three REST
    // reads (the branch's newest pull request, the open refused issues, the base commit's tree):
    // `Repository.pullRequests(headRefName:, orderBy:)`, newest first, whose head filter also
    // matches a fork's branch of that name (hence `headRepository`, to leave those out);
    // `Repository.issues(labels:, states:)`; `Repository.object(expression:)` on the base commit,
    // its `tree { oid }` (GraphQL reference, Repository, Commit); the base branch's `ref`, its
    // `refUpdateRule.requiresSignatures` (as `branchRequiresSignatures`) and `rules`, "A list of
    // rules from active Repository and Organization rulesets that apply to this ref" (as "Get
    // rules for a branch" lists them), so a token's first commit need not ask again (both fields
    // are in github.com's schema, which the fake checks; GitHub Enterprise Server's is not
    // checked here: a site without `Ref.rules` refuses the whole reading, which is then sent
    // without it, `cell_reading_without_rules`, for the rest of the process). Pull
    // requests and issues are Contents-free: pull_requests=read and issues=read, the base's tree
    // and ref contents=read.
    GRAPHQL_CELL_READING = query "cellReading" "contents=read,issues=read,pull_requests=read" CELL_READING_QUERY;
    // The next page of the open issues carrying a label, after `cellReading`'s first hundred
    // ("first ... Returns the first n elements", at most 100).
    GRAPHQL_LABELLED_ISSUES = query "labelledIssues" "issues=read" LABELLED_ISSUES_QUERY;
    // The next page of a branch's pull requests, after `cellReading`'s first ten (or
    // `newestPulls`' first five of that branch), while none of
    // them was this repository's: forks' pull requests with the same head name fill the page
    // ("Using pagination in the GraphQL API": `after` the page's `pageInfo.endCursor`).
    GRAPHQL_BRANCH_PULLS = query "branchPulls" "pull_requests=read" BRANCH_PULLS_QUERY;
    // merge queues
    // `enablePullRequestAutoMerge` where the base requires a merge queue: no `mergeMethod` ("NOTE:
    // when merging with a merge queue any input value for merge method is ignored", the input's
    // description; GitHub in fact refuses a method that is not the queue's: "The merge strategy
    // for main is set by the merge queue", https://github.com/osac-project/osac/pull/924), and
    // what GitHub did: queued it at once, or armed it.
    GRAPHQL_QUEUE_AUTO_MERGE = mutation "enablePullRequestAutoMergeInQueue" "contents=write,pull_requests=write" QUEUE_AUTO_MERGE_MUTATION;
    // "Add a pull request to the merge queue", for the head cellbridge checked: what a
    // repository whose "Allow auto-merge" is off leaves (https://github.com/cli/cli/pull/14379).
    GRAPHQL_ENQUEUE = mutation "enqueuePullRequest" "contents=write,pull_requests=write" ENQUEUE_MUTATION;
    // "Remove a pull request from the merge queue": a queued head that is no longer eligible.
    GRAPHQL_DEQUEUE = mutation "dequeuePullRequest" "contents=write,pull_requests=write" DEQUEUE_MUTATION;
    // dashboard
    // The newest pull requests of many branches in one request: `Repository.pullRequests`
    // filtered by `headRefName`, newest first (`orderBy: {field: CREATED_AT, direction: DESC}`),
    // one alias a branch ("Using aliases", GraphQL reference). The document here reads one
    // branch; the adapter sends the same operation with `NEWEST_PULLS_PER_QUERY` aliases.
    // `headRefName` matches a fork's branch of the same name too: a few are read and a fork's
    // (`isCrossRepository`) passed over; a branch whose few were all forks' is read on with
    // `branchPulls` after its `endCursor`.
    GRAPHQL_NEWEST_PULLS = query "newestPulls" "pull_requests=read" NEWEST_PULLS_QUERY;
    // The open pull requests, a page at a time (`after`: the last page's `endCursor`, "Using
    // pagination in the GraphQL API"), each with what its row shows: its head's commit and that
    // commit's status of one context (`Status.context(name:)`), whether it is in the merge queue
    // (`isInMergeQueue`: "Indicates whether the pull request is in a merge queue") and its
    // `mergeStateStatus` ("Detailed information about the current pull request merge state
    // status"; GraphQL reference), and whether auto-merge is on (`autoMergeRequest`, "Returns the
    // auto-merge request object if one exists for this pull request"): with `isInMergeQueue`, what
    // auto-merge's pacing counts. No head-ref filter: it names one branch, and matches forks.
    GRAPHQL_OPEN_CELL_PULLS = query "openCellPulls" "pull_requests=read,statuses=read" OPEN_CELL_PULLS_QUERY;
}

/// Pull requests an `openCellPulls` page reads: 1 + 100 labels + 100 commits = 201 requests, 2
/// points, 2,200 nodes. A page GitHub could not answer in time is asked again at half the size,
/// down to [`OPEN_CELL_PULLS_SMALLEST`].
pub const OPEN_CELL_PULLS_PER_QUERY: usize = 100;

/// The smallest page `openCellPulls` asks for before the read fails (retryable).
pub const OPEN_CELL_PULLS_SMALLEST: usize = 25;

/// `openCellPulls` with pages of `first` pull requests (the registered document: 100).
pub fn open_cell_pulls_document(first: usize) -> String {
    OPEN_CELL_PULLS_QUERY.replace(
        "states: [OPEN], first: 100,",
        &format!("states: [OPEN], first: {first},"),
    )
}

/// Branches a `newestPulls` request reads: 100 aliases of 5 pull requests with 20 labels each is
/// 100 × (1 + 5) = 600 requests, 6 points ("Calculating a rate limit score"), 10,500 nodes.
pub const NEWEST_PULLS_PER_QUERY: usize = 100;

/// The pull requests `newestPulls` reads of a branch: this repository's newest is among them
/// unless forks opened five or more newer on a branch of the same name (then `branchPulls` reads
/// on, ten at a time).
pub const NEWEST_PULLS_READ: usize = 5;

/// What `newestPulls` reads of each branch, its alias and variable numbered `i`.
pub fn newest_pulls_alias(i: usize) -> String {
    format!(
        "b{i}: pullRequests(headRefName: $b{i}, first: {NEWEST_PULLS_READ}, orderBy: {{field: CREATED_AT, direction: DESC}}) {{
      pageInfo {{ hasNextPage endCursor }}
      nodes {{ id number url title state headRefName headRefOid isCrossRepository body labels(first: 20) {{ nodes {{ name }} }} }}
    }}"
    )
}

/// `newestPulls` for `n` branches (variables `$b0`..).
pub fn newest_pulls_document(n: usize) -> String {
    let vars: Vec<String> = (0..n).map(|i| format!("$b{i}: String!")).collect();
    let aliases: Vec<String> = (0..n).map(newest_pulls_alias).collect();
    format!(
        "query newestPulls($owner: String!, $name: String!, {}) {{\n  repository(owner: $owner, name: $name) {{\n    {}\n  }}\n}}",
        vars.join(", "),
        aliases.join("\n    ")
    )
}

/// What `cellReading` reads of the base's rulesets: `Ref.rules`, which github.com has but a GitHub
/// Enterprise Server may not (its schema is not checked here).
const CELL_READING_RULES: &str = "      rules(first: 100) { pageInfo { hasNextPage } nodes { type } }\n";

/// `cellReading` without `Ref.rules`, for a GitHub that refused the field: the same operation,
/// reading whether signatures are required from `refUpdateRule` alone.
pub fn cell_reading_without_rules() -> String {
    CELL_READING_QUERY.replace(CELL_READING_RULES, "")
}

/// Whether `e` is this GitHub refusing `Ref.rules` as a field it does not have ("Field 'rules'
/// doesn't exist on type 'Ref'", `extensions.code` `undefinedField`, its `path` ending at the
/// field): the one refusal [`cell_reading_without_rules`] answers.
pub(crate) fn lacks_ref_rules(e: &super::answers::GraphqlError) -> bool {
    e.code == "undefinedField"
        && (e.message.contains("Field 'rules' doesn't exist on type 'Ref'") || e.path.ends_with("ref.rules"))
}

// Enough pull requests that a fork's of the same head name or two still leave this repository's
// newest on the page; labels and bodies as `latest_pull` reads them over REST.
const CELL_READING_QUERY: &str = "query cellReading($owner: String!, $name: String!, $head: String!, $labels: [String!], $base: String!, $baseRef: String!) {
  repository(owner: $owner, name: $name) {
    pullRequests(headRefName: $head, first: 10, orderBy: {field: CREATED_AT, direction: DESC}, states: [OPEN, CLOSED, MERGED]) {
      pageInfo { hasNextPage endCursor }
      nodes {
        id number url title body state headRefOid
        headRepository { nameWithOwner }
        labels(first: 100) { nodes { name } }
      }
    }
    issues(labels: $labels, states: [OPEN], first: 100, orderBy: {field: CREATED_AT, direction: ASC}) {
      pageInfo { hasNextPage endCursor }
      nodes { number url title body labels(first: 100) { nodes { name } } }
    }
    object(expression: $base) { ... on Commit { tree { oid } } }
    ref(qualifiedName: $baseRef) {
      refUpdateRule { requiresSignatures }
      rules(first: 100) { pageInfo { hasNextPage } nodes { type } }
    }
  }
}";

const BRANCH_PULLS_QUERY: &str =
    "query branchPulls($owner: String!, $name: String!, $head: String!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequests(headRefName: $head, first: 10, after: $after, orderBy: {field: CREATED_AT, direction: DESC}, states: [OPEN, CLOSED, MERGED]) {
      pageInfo { hasNextPage endCursor }
      nodes {
        id number url title body state headRefOid
        headRepository { nameWithOwner }
        labels(first: 100) { nodes { name } }
      }
    }
  }
}";

const LABELLED_ISSUES_QUERY: &str =
    "query labelledIssues($owner: String!, $name: String!, $labels: [String!], $after: String) {
  repository(owner: $owner, name: $name) {
    issues(labels: $labels, states: [OPEN], first: 100, after: $after, orderBy: {field: CREATED_AT, direction: ASC}) {
      pageInfo { hasNextPage endCursor }
      nodes { number url title body labels(first: 100) { nodes { name } } }
    }
  }
}";

const MERGE_STATE_QUERY: &str = "query pullRequestMergeState($owner: String!, $name: String!, $number: Int!) {
  viewer { login }
  repository(owner: $owner, name: $name) {
    autoMergeAllowed
    pullRequest(number: $number) {
      id
      state
      headRefOid
      mergeStateStatus
      autoMergeRequest { enabledBy { __typename login } mergeMethod }
      mergeQueue { configuration { mergeMethod } }
      mergeQueueEntry { state enqueuer { __typename login } }
      commits(last: 1) {
        nodes {
          commit {
            oid
            statusCheckRollup {
              contexts(first: 100) {
                pageInfo { hasNextPage }
                nodes {
                  __typename
                  ... on StatusContext { context state isRequired(pullRequestNumber: $number) }
                  ... on CheckRun { name status conclusion isRequired(pullRequestNumber: $number) }
                }
              }
            }
          }
        }
      }
    }
  }
}";

/// [`GRAPHQL_MERGE_STATE`]'s document for credentials without `checks: read`: the head's
/// commit statuses only (`Commit.status`, "Commit statuses" read), no `CheckRun` field, which
/// GitHub refuses such a token inside an answer of HTTP 200 (`FORBIDDEN` at a node of the rollup's
/// contexts: <https://github.com/philips-software/pull-request-report-action/issues/557>). Its
/// check runs, required or not, are then unknown: the merge state says its checks are not all
/// read.
pub const MERGE_STATE_WITHOUT_CHECK_RUNS_QUERY: &str =
    "query pullRequestMergeState($owner: String!, $name: String!, $number: Int!) {
  viewer { login }
  repository(owner: $owner, name: $name) {
    autoMergeAllowed
    pullRequest(number: $number) {
      id
      state
      headRefOid
      mergeStateStatus
      autoMergeRequest { enabledBy { __typename login } mergeMethod }
      mergeQueue { configuration { mergeMethod } }
      mergeQueueEntry { state enqueuer { __typename login } }
      commits(last: 1) {
        nodes {
          commit {
            oid
            status { contexts { context state isRequired(pullRequestNumber: $number) } }
          }
        }
      }
    }
  }
}";

const ENABLE_AUTO_MERGE_MUTATION: &str = "mutation enablePullRequestAutoMerge($pullRequestId: ID!, $expectedHeadOid: GitObjectID!, $mergeMethod: PullRequestMergeMethod!) {
  enablePullRequestAutoMerge(input: {pullRequestId: $pullRequestId, expectedHeadOid: $expectedHeadOid, mergeMethod: $mergeMethod}) {
    pullRequest { autoMergeRequest { enabledBy { __typename login } mergeMethod } }
  }
}";

const UPDATE_REFS_MUTATION: &str = "mutation updateRefs($repositoryId: ID!, $refUpdates: [RefUpdate!]!) {
  updateRefs(input: {repositoryId: $repositoryId, refUpdates: $refUpdates}) { clientMutationId }
}";

const DISABLE_AUTO_MERGE_MUTATION: &str = "mutation disablePullRequestAutoMerge($pullRequestId: ID!) {
  disablePullRequestAutoMerge(input: {pullRequestId: $pullRequestId}) {
    pullRequest { autoMergeRequest { mergeMethod } }
  }
}";

const REF_UPDATE_RULE_QUERY: &str = "query branchRequiresSignatures($owner: String!, $name: String!, $ref: String!) {
  repository(owner: $owner, name: $name) {
    ref(qualifiedName: $ref) { refUpdateRule { requiresSignatures } }
  }
}";

const CREATE_COMMIT_ON_BRANCH_MUTATION: &str = "mutation createCommitOnBranch($input: CreateCommitOnBranchInput!) {
  createCommitOnBranch(input: $input) { commit { oid } }
}";

const QUEUE_AUTO_MERGE_MUTATION: &str =
    "mutation enablePullRequestAutoMergeInQueue($pullRequestId: ID!, $expectedHeadOid: GitObjectID!) {
  enablePullRequestAutoMerge(input: {pullRequestId: $pullRequestId, expectedHeadOid: $expectedHeadOid}) {
    pullRequest { isInMergeQueue }
  }
}";

const ENQUEUE_MUTATION: &str = "mutation enqueuePullRequest($pullRequestId: ID!, $expectedHeadOid: GitObjectID!) {
  enqueuePullRequest(input: {pullRequestId: $pullRequestId, expectedHeadOid: $expectedHeadOid}) {
    mergeQueueEntry { state }
  }
}";

const NEWEST_PULLS_QUERY: &str = "query newestPulls($owner: String!, $name: String!, $b0: String!) {
  repository(owner: $owner, name: $name) {
    b0: pullRequests(headRefName: $b0, first: 5, orderBy: {field: CREATED_AT, direction: DESC}) {
      pageInfo { hasNextPage endCursor }
      nodes { id number url title state headRefName headRefOid isCrossRepository body labels(first: 20) { nodes { name } } }
    }
  }
}";

const OPEN_CELL_PULLS_QUERY: &str =
    "query openCellPulls($owner: String!, $name: String!, $context: String!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequests(states: [OPEN], first: 100, after: $after, orderBy: {field: CREATED_AT, direction: ASC}) {
      pageInfo { hasNextPage endCursor }
      nodes {
        number url createdAt headRefName headRefOid isCrossRepository isInMergeQueue mergeStateStatus body
        autoMergeRequest { mergeMethod }
        headRepository { nameWithOwner }
        labels(first: 20) { nodes { name } }
        commits(last: 1) { nodes { commit { oid status { context(name: $context) { state description createdAt } } } } }
      }
    }
  }
}";

const DEQUEUE_MUTATION: &str = "mutation dequeuePullRequest($id: ID!) {
  dequeuePullRequest(input: {id: $id}) { mergeQueueEntry { state } }
}";

#[cfg(test)]
mod tests {
    use super::*;

    /// The document the conformance report and the fakes know is the one the adapter sends for
    /// one branch.
    #[test]
    fn newest_pulls_for_one_branch_is_the_operations_document() {
        assert_eq!(newest_pulls_document(1), NEWEST_PULLS_QUERY);
        assert_eq!(open_cell_pulls_document(100), OPEN_CELL_PULLS_QUERY);
        assert!(open_cell_pulls_document(50).contains("states: [OPEN], first: 50, after: $after"));
        let two = newest_pulls_document(2);
        assert!(
            two.contains("$b1: String!") && two.contains("b1: pullRequests(headRefName: $b1"),
            "{two}"
        );
        // The short reading is the reading less its `rules` line, and still a document.
        let short = cell_reading_without_rules();
        assert!(CELL_READING_QUERY.contains(CELL_READING_RULES));
        assert!(
            !short.contains("rules(")
                && short.contains("ref(qualifiedName: $baseRef) {\n      refUpdateRule { requiresSignatures }\n    }"),
            "{short}"
        );
        // Only the refusal of `Ref.rules` as a missing field sends it.
        let of = |e| lacks_ref_rules(&super::super::answers::GraphqlError::of(&e));
        assert!(of(serde_json::json!({
            "path": ["query cellReading", "repository", "ref", "rules"],
            "extensions": {"code": "undefinedField", "typeName": "Ref", "fieldName": "rules"},
            "message": "Field 'rules' doesn't exist on type 'Ref'"
        })));
        assert!(!of(serde_json::json!({
            "path": ["query cellReading", "repository", "pullRequests", "nodes", "isInMergeQueue"],
            "extensions": {"code": "undefinedField", "typeName": "PullRequest", "fieldName": "isInMergeQueue"},
            "message": "Field 'isInMergeQueue' doesn't exist on type 'PullRequest'"
        })));
        assert!(!of(
            serde_json::json!({"type": "FORBIDDEN", "path": ["repository", "ref", "rules"], "message": "Resource not accessible by integration"})
        ));
        // Each alias tells whether its branch has more, and where to read on.
        assert_eq!(two.matches("pageInfo { hasNextPage endCursor }").count(), 2, "{two}");
    }
}
