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
}

macro_rules! operations {
    ($($name:ident = $method:ident $path:literal $id:literal;)*) => {
        $(pub const $name: Operation = Operation { method: Method::$method, id: $id, path: $path };)*
        /// All of them, in the order a sync meets them.
        pub const ALL: &[&Operation] = &[$(&$name),*];
    };
}

operations! {
    REPOS_GET = GET "/repos/{owner}/{repo}" "repos/get";
    // Answered with a redirect to the archive host (codeload on github.com), whose URL is
    // outside the description.
    REPOS_DOWNLOAD_TARBALL_ARCHIVE = GET "/repos/{owner}/{repo}/tarball/{ref}" "repos/download-tarball-archive";
    PULLS_LIST = GET "/repos/{owner}/{repo}/pulls" "pulls/list";
    REPOS_COMPARE_COMMITS = GET "/repos/{owner}/{repo}/compare/{base}...{head}" "repos/compare-commits";
    GIT_GET_BLOB = GET "/repos/{owner}/{repo}/git/blobs/{file_sha}" "git/get-blob";
    GIT_GET_COMMIT = GET "/repos/{owner}/{repo}/git/commits/{commit_sha}" "git/get-commit";
    GIT_CREATE_TREE = POST "/repos/{owner}/{repo}/git/trees" "git/create-tree";
    GIT_CREATE_COMMIT = POST "/repos/{owner}/{repo}/git/commits" "git/create-commit";
    GIT_CREATE_REF = POST "/repos/{owner}/{repo}/git/refs" "git/create-ref";
    GIT_UPDATE_REF = PATCH "/repos/{owner}/{repo}/git/refs/{ref}" "git/update-ref";
    GIT_DELETE_REF = DELETE "/repos/{owner}/{repo}/git/refs/{ref}" "git/delete-ref";
    REPOS_MERGE = POST "/repos/{owner}/{repo}/merges" "repos/merge";
    REPOS_GET_COMMIT = GET "/repos/{owner}/{repo}/commits/{ref}" "repos/get-commit";
    REPOS_LIST_COMMIT_STATUSES_FOR_REF = GET "/repos/{owner}/{repo}/commits/{ref}/statuses" "repos/list-commit-statuses-for-ref";
    REPOS_CREATE_COMMIT_STATUS = POST "/repos/{owner}/{repo}/statuses/{sha}" "repos/create-commit-status";
    PULLS_CREATE = POST "/repos/{owner}/{repo}/pulls" "pulls/create";
    PULLS_UPDATE = PATCH "/repos/{owner}/{repo}/pulls/{pull_number}" "pulls/update";
    ISSUES_UPDATE = PATCH "/repos/{owner}/{repo}/issues/{issue_number}" "issues/update";
    ISSUES_ADD_LABELS = POST "/repos/{owner}/{repo}/issues/{issue_number}/labels" "issues/add-labels";
    ISSUES_CREATE_COMMENT = POST "/repos/{owner}/{repo}/issues/{issue_number}/comments" "issues/create-comment";
    // Sent by octocrab itself when cellbridge authenticates as a GitHub App.
    APPS_CREATE_INSTALLATION_ACCESS_TOKEN = POST "/app/installations/{installation_id}/access_tokens" "apps/create-installation-access-token";
}
