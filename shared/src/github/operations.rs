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
    GIT_CREATE_TREE = POST "/repos/{owner}/{repo}/git/trees" "git/create-tree" "contents=write";
    GIT_CREATE_COMMIT = POST "/repos/{owner}/{repo}/git/commits" "git/create-commit" "contents=write";
    GIT_CREATE_REF = POST "/repos/{owner}/{repo}/git/refs" "git/create-ref" "contents=write";
    GIT_UPDATE_REF = PATCH "/repos/{owner}/{repo}/git/refs/{ref}" "git/update-ref" "contents=write";
    GIT_DELETE_REF = DELETE "/repos/{owner}/{repo}/git/refs/{ref}" "git/delete-ref" "contents=write";
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
    // Authenticated as the App itself (its JWT): the installation's permissions, checked before
    // the first write.
    APPS_GET_INSTALLATION = GET "/app/installations/{installation_id}" "apps/get-installation" "";
    // Sent by octocrab itself when cellbridge authenticates as a GitHub App.
    APPS_CREATE_INSTALLATION_ACCESS_TOKEN = POST "/app/installations/{installation_id}/access_tokens" "apps/create-installation-access-token" "";
}
