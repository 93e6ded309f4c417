//! The scenario suite's GitHubs and its world, shared by every scenario file: a pull request,
//! a status and an issue as a user sees them; [`Bed`], the GitHub side of a test, with `MemBed` (the
//! in-memory double), `HttpBed` (the HTTP fake as github.com through `GithubFleet`, a token) and
//! `GhesBed` (the fake as GitHub Enterprise Server, a GitHub App); [`World`], a bed with the
//! state bucket and the product's `Syncer`, and the states it delivers.

mod fleet_ci;
mod http_bed;
mod mem_bed;

pub(crate) use fleet_ci::fleet_check;

pub(crate) use http_bed::*;
pub(crate) use mem_bed::*;

use cellbridge::adapters::github::operations::Operation;
use cellbridge::doubles::s3::MemStates;
use cellbridge::jobs::sync::{DEFAULT_KEY_PATTERN, KeyPattern, SyncConfig, Syncer};
use cellbridge::pure::plan::STATUS_CONTEXT;
use cellbridge::{adapters::github::GithubConfig, ports::github::GithubRepo, ports::github::MergeMethod};
use cellbridge_tests::github::example_fleet;
use cellbridge_tests::leak;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub(crate) const OWNER: &str = "acme";

pub(crate) const REPO_NAME: &str = "fleet";

pub(crate) const REPO: &str = "acme/fleet";

pub(crate) const BUCKET: &str = "tfstate";

pub(crate) const LINEAGE: &str = "5f0c2b1e-0000-4000-8000-00000000cafe";

pub(crate) const CELL: &str = "eu-c1";

/// Someone's fork of the fleet repository.
pub(crate) const FORK: &str = "someone/fleet";

/// A value a cell's metadata must never carry: it looks like a GitHub token.
pub(crate) const PLANTED_SECRET: &str = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";

/// A pull request as a user sees it on GitHub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pull {
    pub(crate) number: u64,
    pub(crate) head: String,
    pub(crate) title: String,
    /// Sorted.
    pub(crate) labels: Vec<String>,
    pub(crate) open: bool,
    pub(crate) merged: bool,
    pub(crate) body: String,
    pub(crate) comments: Vec<String>,
}

/// A commit status as a user sees it on GitHub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    pub(crate) context: String,
    pub(crate) success: bool,
    /// `pending`: neither passing nor failing.
    pub(crate) pending: bool,
    pub(crate) description: String,
}

/// An issue (not a pull request) as a user sees it on GitHub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IssueSeen {
    pub(crate) number: u64,
    pub(crate) title: String,
    pub(crate) body: String,
    pub(crate) labels: Vec<String>,
    pub(crate) open: bool,
    /// Why it was closed (`completed`, `duplicate`); `None` while open.
    pub(crate) state_reason: Option<String>,
}

/// The GitHub side of a scenario: the repository handle the product is given, and what people
/// and a user's eyes do on GitHub around it. Methods that need the handle take it (the
/// orchestrator owns it).
pub(crate) trait Bed: Sized {
    type Repo: GithubRepo;

    /// Whether one 5xx is retried inside the product's client (the HTTP fake answers a 502 and
    /// `GithubFleet` retries it), or reaches the orchestrator as what the client reports after
    /// its retries (the in-memory double has no transport: its `Fault::Transient` is "5xx past
    /// the retries", and the retry is the next delivery, as SQS would redeliver).
    const RETRIES_IN_CLIENT: bool;

    /// A repository whose default branch `main` holds `files`.
    fn start(files: &[(String, String)]) -> (Self, Self::Repo);
    /// A person's commit on `branch` laying `files` over its tree; the commit's id.
    fn commit(&self, repo: &Self::Repo, branch: &str, files: &[(&str, &str)], message: &str) -> String;
    /// A person's commit on `branch` deleting `paths`; the commit's id.
    fn delete(&self, repo: &Self::Repo, branch: &str, paths: &[&str], message: &str) -> String;
    /// A reviewer merges pull request `number` (a merge commit; the head branch stays); what
    /// GitHub answered when it refused.
    fn merge(&self, repo: &Self::Repo, number: u64) -> Result<(), String>;
    /// A reviewer closes pull request `number` without merging (the head branch stays).
    fn close(&self, repo: &Self::Repo, number: u64);
    /// A reviewer presses "Update branch" on pull request `number` (a conflict changes nothing).
    fn update_branch(&self, repo: &Self::Repo, number: u64);
    /// Every pull request, open or not, by number.
    fn pulls(&self, repo: &Self::Repo) -> Vec<Pull>;
    /// Every issue that is not a pull request, open or not, by number.
    fn issues(&self, repo: &Self::Repo) -> Vec<IssueSeen>;
    /// The files of `branch` (path → text); empty when there is no such branch.
    fn files(&self, repo: &Self::Repo, branch: &str) -> BTreeMap<String, String>;
    fn head(&self, repo: &Self::Repo, branch: &str) -> Option<String>;
    /// Commits on `branch` that its pull request shows (not reachable from `main`).
    fn commits_ahead(&self, repo: &Self::Repo, branch: &str) -> usize;
    fn statuses(&self, repo: &Self::Repo, sha: &str) -> Vec<Status>;
    /// Requests that write, sent so far (with the people's that go through the API: scenarios
    /// compare counts around a delivery).
    fn writes(&self, repo: &Self::Repo) -> usize;
    /// Requests of any kind, sent so far.
    fn requests(&self, repo: &Self::Repo) -> usize;
    /// The next call of `op` fails once with a 5xx.
    fn transient(&self, repo: &Self::Repo, op: &Operation);
    /// GitHub answers the next call of `op` with `status`, a final answer (a run cut off there).
    fn refuse_once(&self, repo: &Self::Repo, op: &Operation, status: u16);
    /// A person opens a pull request from `head` (a branch of this repository) into `main`.
    fn open_pull_as_person(&self, repo: &Self::Repo, head: &str, title: &str) -> u64;
    /// GitHub gives up on the next `times` GraphQL queries of `op` (a 502: "This may be the
    /// result of a timeout").
    fn graphql_times_out(&self, repo: &Self::Repo, op: &Operation, times: usize);
    /// GitHub answers the next query of `op` with HTTP 200 and `FORBIDDEN` inside `errors` for
    /// the field at `path` (the credentials lack the permission to read it).
    fn graphql_field_refused(&self, repo: &Self::Repo, op: &Operation, path: &'static str);
    /// GitHub answers the next `times` queries or mutations of `op` with HTTP 200 and its own
    /// untyped failure inside `errors` ("Something went wrong while executing your query").
    fn graphql_untyped_error(&self, repo: &Self::Repo, op: &Operation, times: usize);
    /// GitHub answers the next `times` requests of `op` with HTTP 200 and an error whose `type`
    /// cellbridge does not know (`INSUFFICIENT_SCOPES`).
    fn graphql_unknown_error(&self, repo: &Self::Repo, op: &Operation, times: usize);
    /// GitHub answers every try of the next request of `op` with a 5xx (an answer with no data
    /// at all): the client's own retries are spent and the request fails retryably.
    fn graphql_server_error(&self, repo: &Self::Repo, op: &Operation);
    /// The next merge state answers a `mergeStateStatus` GitHub added after cellbridge was
    /// written (`QUEUED`).
    fn merge_state_unknown_enum(&self, repo: &Self::Repo);
    /// The next "Merge a pull request" is carried out and its answer lost in transit.
    fn merge_answer_lost(&self, repo: &Self::Repo);
    /// GitHub has not computed pull request `number`'s merge state yet (`UNKNOWN`).
    fn merge_state_not_computed(&self, repo: &Self::Repo, number: u64);
    /// The 5xx answers served so far, where the bed's log shows them.
    fn server_errors(&self, _repo: &Self::Repo) -> Option<usize> {
        None
    }
    /// Just before the next call of `op` is handled, another writer commits `files` on `branch`.
    fn race(&self, repo: &Self::Repo, op: &Operation, branch: &str, files: &[(&str, &str)]);
    /// Just before the next call of `op` is handled, a reviewer merges pull request `number`.
    fn merge_before(&self, repo: &Self::Repo, op: &Operation, number: u64);
    /// A reviewer edits pull request `number`'s description.
    fn edit_body(&self, repo: &Self::Repo, number: u64, body: &str);
    /// A person's commit on `branch` adding `path` with these bytes (a binary file); its id.
    fn commit_bytes(&self, repo: &Self::Repo, branch: &str, path: &str, bytes: &[u8], message: &str) -> String;
    /// A person force-pushes `branch` to `commit` (history rewritten).
    fn force_push(&self, repo: &Self::Repo, branch: &str, commit: &str);
    /// The listings of the repository's issues sent so far.
    fn issue_listings(&self, repo: &Self::Repo) -> usize;
    /// Someone else (another run, a person) opens an issue; its number.
    fn open_issue(&self, repo: &Self::Repo, title: &str, body: &str, labels: &[&str]) -> u64;
    /// The repository's issues are turned off in its settings.
    fn disable_issues(&self, repo: &Self::Repo);
    /// Someone opens a pull request from their fork [`FORK`] whose head branch is `branch` (a
    /// name the repository's own branch may have too), closed at once unless `open`; its number.
    fn fork_pull(&self, repo: &Self::Repo, branch: &str, open: bool) -> u64;

    // auto-merge
    /// The login cellbridge's credentials act as on this GitHub.
    const CELLBRIDGE: &'static str;
    /// An administrator sets the repository's "Allow auto-merge".
    fn allow_auto_merge(&self, repo: &Self::Repo, on: bool);
    /// An administrator protects `main`: `contexts` required (up to date when `strict`),
    /// `approvals` approving reviews; `None` removes the protection.
    fn protect_main(&self, repo: &Self::Repo, protection: Option<(&[&str], u32, bool)>);
    /// The CI reports `context` on commit `sha`.
    fn ci(&self, repo: &Self::Repo, sha: &str, context: &str, passed: bool);
    /// A reviewer approves pull request `number`.
    fn approve(&self, repo: &Self::Repo, number: u64);
    /// A reviewer turns on auto-merge for pull request `number` themself.
    fn enable_auto_merge_as_reviewer(&self, repo: &Self::Repo, number: u64);
    /// Who turned on the auto-merge of pull request `number`, while it is on; who merged it.
    fn auto_merge(&self, repo: &Self::Repo, number: u64) -> (Option<String>, Option<String>);

    // signatures
    /// cellbridge runs with a personal access token (`token`) or as a GitHub App.
    fn credentials(w: &mut World<Self>, token: bool);
    /// An administrator requires signed commits on `main`, by a ruleset or classic protection.
    fn require_signatures(&self, repo: &Self::Repo, ruleset: bool);
    /// Every commit `branch` holds beyond `main`, oldest first, with whether GitHub verified it.
    fn verified_commits(&self, repo: &Self::Repo, branch: &str) -> Vec<(String, bool)>;
    /// A person's commit on `branch` adding `path` as an executable (100755).
    fn commit_executable(&self, repo: &Self::Repo, branch: &str, path: &str, text: &str) -> String;
    /// How many times cellbridge asked whether a branch requires signatures.
    fn signature_reads(&self, repo: &Self::Repo) -> usize;
    // merge queues
    /// An administrator requires a merge queue on `main` merging by `method` (`None`: none).
    fn require_merge_queue(&self, repo: &Self::Repo, method: Option<MergeMethod>);
    /// What the `merge_group` event says of pull request `number`'s queue entry while its merge
    /// group awaits checks.
    fn merge_group(&self, repo: &Self::Repo, number: u64) -> Option<MergeGroup>;
    /// The files of commit `sha` as a CI's checkout has them.
    fn commit_files(&self, repo: &Self::Repo, sha: &str) -> BTreeMap<String, String>;
    /// Who added pull request `number` to the merge queue, while it is in it.
    fn queued_by(&self, repo: &Self::Repo, number: u64) -> Option<String>;
    /// A reviewer adds pull request `number` to the merge queue themself (`enqueuePullRequest`).
    fn enqueue_as_reviewer(&self, repo: &Self::Repo, number: u64);
}

pub(crate) const REVIEWER: &str = "alice";

/// The `merge_group` event's `merge_group` object (GitHub's REST description,
/// `components/schemas/merge-group`), without its `head_commit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MergeGroup {
    /// "The SHA of the merge group": what CI checks out and reports on.
    pub(crate) head_sha: String,
    /// "The full ref of the merge group".
    pub(crate) head_ref: String,
    /// "The SHA of the merge group's parent commit".
    pub(crate) base_sha: String,
    /// "The full ref of the branch the merge group will be merged into".
    pub(crate) base_ref: String,
}

/// One scenario's world: the product's orchestrator over a state bucket in memory and the bed's
/// repository, and the bed.
pub(crate) struct World<B: Bed> {
    pub(crate) sync: Syncer<MemStates, B::Repo>,
    pub(crate) bed: B,
}

pub(crate) fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

pub(crate) fn branch(cell: &str) -> String {
    format!("cellbridge/{cell}")
}

pub(crate) fn metadata_path(cell: &str) -> String {
    format!("clusters/{cell}/cell-metadata.yaml")
}

/// The metadata every variable of the example fleet's layers needs, so the strict check passes.
pub(crate) fn metadata(cell: &str, vpc: &str) -> Value {
    json!({
        "cell_name": cell, "schema": "1", "aws_region": "eu-west-1", "cluster_name": cell,
        "dns_zone": "example.internal",
        "external_dns_role_arn": "arn:aws:iam::123456789012:role/external-dns",
        "karpenter_queue_name": "karpenter-q",
        "karpenter_role_arn": "arn:aws:iam::123456789012:role/karpenter",
        "kms_key_id": "1234abcd-12ab-34cd-56ef-1234567890ab", "podinfo_replicas": "2",
        "vpc_id": vpc,
    })
}

/// A Terraform state whose `cell_metadata` output is `meta`.
pub(crate) fn state_with(serial: u64, meta: Value) -> String {
    json!({
        "version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": LINEAGE,
        "outputs": {"cell_metadata": {"type": ["map", "string"], "value": meta}},
        "resources": [],
    })
    .to_string()
}

/// What a pull request of `cell` must hold: its `cell-metadata.yaml` and every file of
/// `clusters/_template/`, below `clusters/<cell>/`.
pub(crate) fn expected_cell_dir(cell: &str) -> Vec<String> {
    let mut paths: Vec<String> = example_fleet()
        .into_iter()
        .filter_map(|(p, _)| {
            p.strip_prefix("clusters/_template/")
                .map(|rest| format!("clusters/{cell}/{rest}"))
        })
        .collect();
    paths.push(metadata_path(cell));
    paths.sort();
    paths
}

/// What a user sees of one cell's sync on GitHub, without the ids that differ between runs
/// (commit ids carry a time on the HTTP fake, pull request numbers depend on what came before).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) pulls: Vec<(String, String, Vec<String>, bool)>,
    pub(crate) files: BTreeMap<String, String>,
    pub(crate) statuses: Vec<Status>,
    pub(crate) commits_ahead: usize,
}

impl<B: Bed> World<B> {
    pub(crate) fn start() -> Self {
        let config = SyncConfig {
            github: GithubConfig::checked(
                OWNER.into(),
                REPO_NAME.into(),
                None,
                "unused".into(),
                "https://api.github.com".into(),
            )
            .unwrap(),
            state_bucket: BUCKET.into(),
            key_pattern: KeyPattern::parse(DEFAULT_KEY_PATTERN).unwrap(),
            flux_git_url: None,
            flux_git_branch: None,
        };
        let (bed, repo) = B::start(&example_fleet());
        World {
            sync: Syncer::new(config, MemStates::new(), repo),
            bed,
        }
    }

    pub(crate) fn repo(&self) -> &B::Repo {
        &self.sync.fleet
    }

    /// A `terraform apply` of `cell` writing `vpc` (every other value as the fleet needs).
    pub(crate) fn apply(&self, cell: &str, serial: u64, vpc: &str) {
        self.put_state(cell, state_with(serial, metadata(cell, vpc)));
    }

    pub(crate) fn put_state(&self, cell: &str, text: String) {
        self.sync
            .states
            .put(BUCKET, &format!("cells/{cell}/terraform.tfstate"), text);
    }

    /// Delivers the event "this cell's state may have changed"; the cell's one result.
    pub(crate) async fn deliver(&self, cell: &str) -> Value {
        let inv = cellbridge_tests::handle(&self.sync, &json!({"action": "sync", "cell": cell}), deadline())
            .await
            .unwrap();
        leak::capture("github_scenarios: state-sync's answer", &inv.response.to_string());
        let cells = inv.response["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 1, "{}", inv.response);
        cells[0].clone()
    }

    /// Invokes with `event` (a manual payload); the answer.
    pub(crate) async fn handle(&self, event: Value) -> cellbridge::shell::lambda::Invocation {
        let inv = cellbridge_tests::handle(&self.sync, &event, deadline()).await.unwrap();
        leak::capture("github_scenarios: state-sync's answer", &inv.response.to_string());
        inv
    }

    /// `{"action": "dashboard"}`; the answer's `dashboard`.
    pub(crate) async fn dashboard(&self) -> Value {
        let inv = self.handle(json!({"action": "dashboard"})).await;
        assert_eq!(inv.class, None, "{}", inv.response);
        inv.response["dashboard"].clone()
    }

    /// The open fleet dashboards.
    pub(crate) fn dashboards(&self) -> Vec<IssueSeen> {
        self.bed
            .issues(self.repo())
            .into_iter()
            .filter(|i| i.open && i.labels.iter().any(|l| l == "cellbridge-dashboard"))
            .collect()
    }

    /// Delivers, and once more when the first delivery failed retryably (SQS redelivers it).
    pub(crate) async fn deliver_until_done(&self, cell: &str) -> Vec<Value> {
        let first = self.deliver(cell).await;
        if first["action"] == "failed" && first["retryable"] == true {
            let second = self.deliver(cell).await;
            vec![first, second]
        } else {
            vec![first]
        }
    }

    pub(crate) fn pulls(&self) -> Vec<Pull> {
        self.bed.pulls(self.repo())
    }

    pub(crate) fn open_pulls(&self) -> Vec<Pull> {
        self.pulls().into_iter().filter(|p| p.open).collect()
    }

    pub(crate) fn files(&self, branch: &str) -> BTreeMap<String, String> {
        self.bed.files(self.repo(), branch)
    }

    pub(crate) fn head(&self, branch: &str) -> Option<String> {
        self.bed.head(self.repo(), branch)
    }

    /// The fleet repository's CI on a `pull_request` event of pull request `number`: the
    /// shipped workflow's check over its head, reported on the head (the event's checkout is
    /// the head merged with its base, `refs/pull/<n>/merge`, which neither GitHub here models;
    /// the head is what the scenarios change). Whether it passed, and what it printed.
    pub(crate) fn fleet_ci_on_pull(&self, number: u64) -> (bool, String) {
        let pull = self
            .pulls()
            .into_iter()
            .find(|p| p.number == number)
            .expect("a pull request");
        let sha = self.head(&pull.head).expect("its head");
        self.fleet_ci_on(&sha)
    }

    /// The fleet repository's CI on the `merge_group` event of pull request `number`'s queue
    /// entry: the shipped workflow's check over the merge group's commit (`head_sha`), reported
    /// there. Whether it passed and what it printed; `None` when no merge group awaits checks.
    pub(crate) fn fleet_ci_on_merge_group(&self, number: u64) -> Option<(bool, String)> {
        let group = self.bed.merge_group(self.repo(), number)?;
        assert_eq!(group.base_ref, "refs/heads/main", "{group:?}");
        Some(self.fleet_ci_on(&group.head_sha))
    }

    fn fleet_ci_on(&self, sha: &str) -> (bool, String) {
        let files = self.bed.commit_files(self.repo(), sha);
        let (passed, out) = fleet_ci::run_check(&files);
        self.bed.ci(self.repo(), sha, &fleet_check().name, passed);
        (passed, out)
    }

    /// The `cellbridge/strict-substitution` statuses of `sha`.
    pub(crate) fn strict_statuses(&self, sha: &str) -> Vec<Status> {
        self.statuses(sha)
            .into_iter()
            .filter(|s| s.context == STATUS_CONTEXT)
            .collect()
    }

    pub(crate) fn statuses(&self, sha: &str) -> Vec<Status> {
        self.bed.statuses(self.repo(), sha)
    }

    pub(crate) fn writes(&self) -> usize {
        self.bed.writes(self.repo())
    }

    pub(crate) fn requests(&self) -> usize {
        self.bed.requests(self.repo())
    }

    pub(crate) fn metadata_on(&self, branch: &str, cell: &str) -> String {
        self.files(branch)
            .remove(&metadata_path(cell))
            .unwrap_or_else(|| panic!("{} missing on {branch}", metadata_path(cell)))
    }

    /// The cell's pull requests, branch (its cell directory) and head status, as `cell`.
    pub(crate) fn outcome(&self, cell: &str, as_cell: &str) -> Outcome {
        let b = branch(cell);
        let rename = |s: &str| s.replace(cell, as_cell);
        let head = self.head(&b).expect("the cell's branch");
        Outcome {
            pulls: self
                .pulls()
                .into_iter()
                .filter(|p| p.head == b)
                .map(|p| (rename(&p.head), rename(&p.title), p.labels, p.open))
                .collect(),
            files: self
                .files(&b)
                .into_iter()
                .filter(|(p, _)| p.starts_with(&format!("clusters/{cell}/")))
                .map(|(p, t)| (rename(&p), rename(&t)))
                .collect(),
            statuses: self
                .statuses(&head)
                .into_iter()
                .map(|s| Status {
                    description: rename(&s.description),
                    ..s
                })
                .collect(),
            commits_ahead: self.bed.commits_ahead(self.repo(), &b),
        }
    }

    /// The head of the cell's branch carries one successful strict-substitution status.
    pub(crate) fn assert_checked(&self, cell: &str) {
        let head = self.head(&branch(cell)).expect("the cell's branch");
        let statuses = self.statuses(&head);
        assert_eq!(statuses.len(), 1, "{statuses:?}");
        assert_eq!(statuses[0].context, STATUS_CONTEXT, "{statuses:?}");
        assert!(statuses[0].success, "{statuses:?}");
    }
}

pub(crate) fn action(r: &Value) -> &str {
    r["action"].as_str().unwrap_or_default()
}

pub(crate) const OPT_IN: &str = ".cellbridge/auto-merge.yaml";

pub(crate) const CI: &str = "ci/build";

/// `w` with `CELL` merged on main and opted in, and auto-merge allowed.
pub(crate) async fn opted_in<B: Bed>(w: World<B>, opt_in: &str) -> World<B> {
    w.apply(CELL, 1, "vpc-1");
    assert_eq!(action(&w.deliver(CELL).await), "opened");
    w.bed.merge(w.repo(), 1).unwrap();
    w.bed.commit(w.repo(), "main", &[(OPT_IN, opt_in)], "opt cells in");
    w.bed.allow_auto_merge(w.repo(), true);
    w
}

pub(crate) fn done(r: &Value) -> &str {
    r["auto_merge"]["done"].as_str().unwrap_or("-")
}

/// What `terraform destroy` leaves: no outputs, no resources.
pub(crate) fn destroyed_state(serial: u64) -> String {
    json!({"version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": LINEAGE, "outputs": {}, "resources": []})
        .to_string()
}

impl<B: Bed> World<B> {
    /// EKS as `aws` has it (the cells' clusters: none, unless added).
    pub(crate) fn with_eks(mut self, aws: &cellbridge::doubles::cluster::MemAws) -> Self {
        self.sync.clusters = Some(cellbridge::jobs::sync::ClusterAccess {
            probe: aws.clone().into(),
            describe_roles: BTreeMap::new(),
        });
        self
    }
}

impl<B: Bed> World<B> {
    /// `CELL` on main: its first pull request, of `state`, merged.
    pub(crate) async fn merged(self, state: String) -> Self {
        self.put_state(CELL, state);
        let opened = self.deliver(CELL).await;
        self.bed
            .merge(self.repo(), opened["pull_request"]["number"].as_u64().unwrap())
            .unwrap();
        self
    }

    /// `CELL` merged on main, EKS as `aws` has it (the cell's cluster: none).
    pub(crate) async fn merged_then_destroyed(aws: &cellbridge::doubles::cluster::MemAws) -> Self {
        World::<B>::start()
            .with_eks(aws)
            .merged(state_with(1, metadata(CELL, "vpc-1")))
            .await
    }

    /// The files of `main` under the cell's directory.
    pub(crate) fn cell_dir(&self, branch: &str) -> BTreeMap<String, String> {
        self.files(branch)
            .into_iter()
            .filter(|(p, _)| p.starts_with(&format!("clusters/{CELL}/")))
            .collect()
    }
}
