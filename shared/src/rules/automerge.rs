//! Auto-merge, wired to GitHub: for a metadata pull request cellbridge opened, updated
//! or left unchanged, whether its current head may merge without a person
//! ([`crate::pure::automerge::eligibility`], under the base branch's `.cellbridge/auto-merge.yaml`),
//! and GitHub's own auto-merge made to agree with it. Never a bypass: GitHub's auto-merge waits
//! for branch protection and required reviews; when GitHub refuses to wait because the pull
//! request can merge now, cellbridge merges it with the head's sha, and only once every required
//! check of that head has passed and GitHub says every requirement is met.
//!
//! - Eligible: auto-merge enabled for the head cellbridge checked (`expectedHeadOid`), nothing
//!   written when it already is on; "can merge now" → merged with the head's sha (after the
//!   body); the repository's "Allow auto-merge" off, or another refusal → said in the body and
//!   the result, never a failed sync.
//! - Not eligible (a person pushed other files, a key added, a failing check, the cell no longer
//!   opted in, a broken opt-in file): cellbridge's own auto-merge is disabled before the head's
//!   status is posted (so that a passing status cannot merge it meanwhile); a person's is left
//!   alone.
//! - Request budget: a cell the opt-in file does not cover, and did not cover when the pull
//!   request was last written (the record's `optin=`), costs no request at all. A covered one
//!   has its head judged again from what it holds on every run (never from the body's text,
//!   which a person can edit): a comparison, its status, its merge state.
//! - An eligible head GitHub reads `BEHIND` (the base requires branches to be up to date, and
//!   GitHub's auto-merge never updates one) is brought up to date as Update branch does, and
//!   its status posted on the new head.
//! - A base that requires a merge queue: the head queued, never merged nor updated by cellbridge,
//!   and taken out when it is no longer eligible (`queue`); never queued where the base requires
//!   a check that nothing reports on merge groups (`queue`). The opt-in file's `merge_method` is
//!   judged only where it applies: never under a queue, which merges by its own method.
//! - Pacing: at most `CELLBRIDGE_AUTO_MERGE_CAP` of cellbridge's pull requests queued or
//!   auto-merging at once, the rest waiting their turn, oldest first (`pacing`).

mod pacing;
mod paragraph;
mod queue;
mod verify;

pub use pacing::{CAP_DEFAULT, CAP_VARIABLE, Seat, Turn, cap_from_env, turn};
pub(super) use paragraph::{with_block, with_run_block};
pub(crate) use verify::is_not_verified;

use std::fmt::Write as _;
use std::time::Instant;

use serde::Serialize;

use crate::ports::github::{
    AutoMergeAnswer, GitData, MergeAnswer, MergeMethod, MergeState, MergeStateStatus, Merges, PullRequest, PullState,
    Pulls,
};
use crate::ports::github::{GithubError, Result};
use crate::pure::automerge::{self, AutoMergeError, Eligibility, OptIn};
use crate::pure::fleet::FleetRead;
use crate::pure::markdown;
use crate::pure::plan::Plan;
use crate::pure::record::field as marker;

/// Where the auto-merge paragraph starts and ends in a body (rewritten in place).
const BLOCK_OPEN: &str = "<!-- cellbridge-auto-merge -->";
const BLOCK_CLOSE: &str = "<!-- /cellbridge-auto-merge -->";
/// The marker value of a cell no pattern covers, and of an opt-in file that cannot be read.
const NOT_COVERED: &str = "-";
const INVALID: &str = "!";
/// Longest text of GitHub's or of the opt-in file's that a body quotes.
const QUOTE_MAX: usize = 600;

/// What auto-merge decided and did for one pull request: the result's `auto_merge`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AutoMergeReport {
    pub eligible: bool,
    /// Why not, one sentence per rule (never a value).
    pub reasons: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opted_in_by: Option<String>,
    pub done: Done,
    /// GitHub's words, what is awaited, or who enabled it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What cellbridge did about GitHub's auto-merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Done {
    /// Nothing to do (not eligible and nothing of cellbridge's to undo).
    Nothing,
    /// `enablePullRequestAutoMerge`: GitHub merges it once every requirement is met.
    Enabled,
    /// Already on (by cellbridge or a person): nothing written.
    AlreadyEnabled,
    /// GitHub refused to wait (the pull request could merge now): merged with the head's sha.
    Merged,
    /// Mergeable now, but a required check of the head has not passed yet (or GitHub cannot tell
    /// yet): the next event tries again.
    Waiting,
    /// cellbridge's own auto-merge turned off: this head is not eligible.
    Disabled,
    /// A person's auto-merge on a head that is not eligible: their choice, left alone.
    LeftAlone,
    /// The repository does not allow auto-merge.
    NotAllowed,
    /// In the merge queue the base branch requires (cellbridge added it, GitHub's auto-merge did,
    /// or it already was): the queue merges it.
    Queued,
    /// cellbridge took its own queueing back: this head is not eligible.
    Dequeued,
    /// Eligible, but as many of cellbridge's pull requests as the cap allows are queued or
    /// auto-merging already (or their number could not be read): the next event tries again.
    WaitingForTurn,
    /// Eligible, but the base requires a merge queue and a check that nothing reports on merge
    /// groups (cellbridge's own status): queued, it would only stall the queue. Not queued.
    Unqueueable,
    /// GitHub refused (the enabling, the merge, or reading the merge state): `detail` says why.
    Refused,
}

/// The base branch's opt-in file, read once per pull request.
pub(super) struct OptInFile(std::result::Result<OptIn, AutoMergeError>);

impl OptInFile {
    /// `.cellbridge/auto-merge.yaml` of the base branch as read (never the pull request's).
    pub(super) fn read(base: &dyn FleetRead) -> Self {
        Self(automerge::from_fleet(base))
    }

    /// The marker value: the pattern covering `cell`, [`NOT_COVERED`] or [`INVALID`].
    fn coverage(&self, cell: &str) -> String {
        match &self.0 {
            Ok(o) => o.covers(cell).unwrap_or(NOT_COVERED).to_owned(),
            Err(_) => INVALID.to_owned(),
        }
    }

    fn merge_method(&self) -> MergeMethod {
        self.0.as_ref().map(OptIn::merge_method).unwrap_or_default()
    }

    /// Whether the marker recorded in `body` is the coverage of `cell` now (a body written
    /// before auto-merge existed records none: not covered).
    pub(super) fn unchanged_since(&self, body: &str, cell: &str) -> bool {
        marker(body, "optin").as_deref().unwrap_or(NOT_COVERED) == self.coverage(cell)
    }

    /// The verdict on a head whose plan (the head's own content, checked) is `head`, of the pull
    /// request `recorded` as read in this run (none for one being opened).
    pub(super) fn judge(&self, head: &Plan, recorded: Option<&PullRequest>) -> Run {
        let eligibility = match &self.0 {
            Ok(o) => automerge::eligibility(head, o),
            Err(e) => Eligibility {
                eligible: false,
                reasons: vec![format!(
                    "{}: auto-merge is off for every cell until it is fixed.",
                    quote(&e.to_string())
                )],
                opted_in_by: None,
            },
        };
        let mut run = self.run(&head.cell, eligibility, recorded.map(|p| p.body.as_str()));
        run.node_id = recorded.and_then(|p| p.node_id.clone());
        run
    }

    /// Whether auto-merge is in play for `cell`'s pull request: the opt-in file covers it now,
    /// or did when `body` was last written (cellbridge's auto-merge may be on). Such a head is
    /// judged from what it holds on every run.
    pub(super) fn in_play(&self, body: &str, cell: &str) -> bool {
        let covered = |c: &str| c != NOT_COVERED && c != INVALID;
        covered(&self.coverage(cell)) || covered(marker(body, "optin").as_deref().unwrap_or(NOT_COVERED))
    }

    fn run(&self, cell: &str, eligibility: Eligibility, recorded_body: Option<&str>) -> Run {
        let coverage = self.coverage(cell);
        let recorded = recorded_body
            .and_then(|b| marker(b, "optin"))
            .unwrap_or_else(|| NOT_COVERED.to_owned());
        Run {
            cell: cell.to_owned(),
            covered: coverage != NOT_COVERED && coverage != INVALID,
            was_covered: recorded != NOT_COVERED && recorded != INVALID,
            ours: recorded_body.and_then(|b| marker(b, ENABLED_BY)).as_deref() == Some(CELLBRIDGE),
            coverage,
            method: self.merge_method(),
            done: Done::Nothing,
            detail: None,
            note: None,
            merge: None,
            behind: false,
            updated: false,
            node_id: None,
            wait: None,
            eligibility,
        }
    }
}

/// One pull request's auto-merge, from its verdict to what was done.
pub(super) struct Run {
    pub(super) eligibility: Eligibility,
    /// The cell whose pull request this is.
    cell: String,
    coverage: String,
    /// The opt-in file covers the cell now.
    covered: bool,
    /// It did when the pull request was last written.
    was_covered: bool,
    method: MergeMethod,
    done: Done,
    detail: Option<String>,
    /// What the body says besides the verdict (a refusal, a person's auto-merge).
    note: Option<String>,
    /// A merge to send once the body is written: (node id unused, head sha).
    merge: Option<String>,
    /// cellbridge's own auto-merge is on (the record's `automerge-by=cellbridge`).
    ours: bool,
    /// GitHub reads the eligible head `BEHIND`: the base branch requires it up to date.
    behind: bool,
    /// The head was brought up to date in this run (once is enough: a base that moved again
    /// is the next event's).
    updated: bool,
    /// The pull request's node id as this run's reading of it gave it: what turns cellbridge's
    /// own auto-merge off when the merge state's answer names no pull request at all.
    node_id: Option<String>,
    /// Why an eligible head is not queued or auto-merging, for the dashboard's row.
    wait: Option<Wait>,
}

/// What the record's `automerge-wait=` tells the dashboard (shown to people, decided on by
/// nobody but the pacing's order of turns, see `pacing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wait {
    /// Waiting for its turn under the cap (`turn`).
    Turn,
    /// Not queued: the queue would wait for a check nothing reports on merge groups (`stall`).
    Stall,
}

/// The record field of [`Wait`].
pub const WAIT_FIELD: &str = "automerge-wait";

/// The record field saying who enabled the pull request's auto-merge, and its value when
/// cellbridge did.
const ENABLED_BY: &str = "automerge-by";
const CELLBRIDGE: &str = "cellbridge";

impl Run {
    /// The marker fields the body records: `optin=` and, for an eligible head,
    /// `automerge=eligible`; `queued=yes` while it is in the merge queue.
    pub(super) fn marker_fields(&self) -> String {
        let mut f = format!(" optin={}", self.coverage);
        if self.eligibility.eligible {
            f.push_str(" automerge=eligible");
        }
        if self.ours {
            f.push_str(&format!(" {ENABLED_BY}={CELLBRIDGE}"));
        }
        if self.done == Done::Queued {
            // For the fleet dashboard, which shows it to people and decides nothing by it.
            f.push_str(" queued=yes");
        }
        match self.wait {
            Some(Wait::Turn) => f.push_str(&format!(" {WAIT_FIELD}=turn")),
            Some(Wait::Stall) => f.push_str(&format!(" {WAIT_FIELD}=stall")),
            None => {}
        }
        f
    }

    /// The body's paragraph: why the head is or is not eligible, and what GitHub said.
    pub(super) fn block(&self) -> String {
        let mut b = format!("{BLOCK_OPEN}\n{}", self.eligibility.describe().trim_end());
        if let Some(n) = &self.note {
            let _ = write!(b, "\n\n{n}");
        }
        let _ = write!(b, "\n{BLOCK_CLOSE}");
        b
    }

    pub(super) fn report(&self) -> AutoMergeReport {
        AutoMergeReport {
            eligible: self.eligibility.eligible,
            reasons: self.eligibility.reasons.clone(),
            opted_in_by: self.eligibility.opted_in_by.clone(),
            done: self.done,
            detail: self.detail.clone(),
        }
    }

    /// Before the status of `head`, when it is not eligible: cellbridge's own auto-merge turned
    /// off, so that the status cannot merge it. Reads GitHub only when the cell is or was opted
    /// in; a merge state that cannot be read fails closed ([`Run::read`]).
    pub(super) async fn before_status<G: Merges>(
        &mut self,
        gh: &G,
        number: u64,
        head: &str,
        deadline: Instant,
    ) -> Result<()> {
        if self.eligibility.eligible || !(self.covered || self.was_covered) {
            return Ok(());
        }
        let st = self.read(gh, number, head, deadline).await?;
        if self.out_of_queue(gh, number, &st, deadline).await? {
            return Ok(());
        }
        // Whose it is, the enabler tells; only where GitHub names no enabler does the record of
        // what cellbridge enabled decide.
        let ours = |st: &MergeState| {
            st.enabled_by_viewer() || (self.ours && st.auto_merge.as_ref().is_some_and(|a| a.enabled_by.is_none()))
        };
        match &st.auto_merge {
            None => self.ours = false,
            Some(_) if ours(&st) => {
                gh.disable_auto_merge(&st.node_id, deadline).await?;
                self.ours = false;
                tracing::info!(pull_request = number, "auto-merge disabled: the head is not eligible");
                self.done = Done::Disabled;
                self.note =
                    Some("cellbridge turned off the auto-merge it had enabled: this head is not eligible.".to_owned());
            }
            Some(a) => {
                let who = a
                    .enabled_by
                    .as_ref()
                    .map_or_else(|| "a person".to_owned(), |b| b.display());
                self.done = Done::LeftAlone;
                self.detail = Some(format!("enabled by {who}"));
                self.note = Some(format!(
                    "Auto-merge was turned on by {}: cellbridge leaves a person's choice alone, and branch protection still decides.",
                    markdown::code(&who)
                ));
            }
        }
        Ok(())
    }

    /// After the status of an eligible head `head`: GitHub's auto-merge on for it, or, when
    /// GitHub says it can merge now, a merge with its sha prepared for [`Run::finish`].
    pub(super) async fn after_status<G: GitData + Merges + Pulls>(
        &mut self,
        gh: &G,
        number: u64,
        head: &str,
        base_branch: &str,
        deadline: Instant,
    ) -> Result<()> {
        if !self.eligibility.eligible {
            return Ok(());
        }
        // What a merge would bring is the head compared with the base branch as it is now (what
        // GitHub's merge takes), not the plan: a head built on a base whose history was since
        // rewritten carries the commits the rewrite dropped, and merging it would bring them
        // back unreviewed.
        let cm = crate::pure::configmap::path_for(&self.cell);
        let brings = gh.compare(base_branch, head, deadline).await?;
        let others: Vec<&str> = brings
            .files
            .iter()
            .map(|f| f.path.as_str())
            .filter(|p| *p != cm)
            .collect();
        if !others.is_empty() || !brings.lists_every_file() {
            let listed: Vec<String> = others.iter().take(5).map(|p| markdown::code(p)).collect();
            self.eligibility.eligible = false;
            self.eligibility.reasons = vec![format!(
                "Merged into `{base_branch}` as it is now, this head changes files other than `{cm}`: {}.",
                if listed.is_empty() {
                    "more than GitHub lists".to_owned()
                } else {
                    listed.join(", ")
                }
            )];
            // Not eligible after all: cellbridge's own auto-merge, if on, goes.
            return self.before_status(gh, number, head, deadline).await;
        }
        let st = self.read(gh, number, head, deadline).await?;
        if st.state != PullState::Open {
            return Ok(());
        }
        if st.head_sha != head {
            return Err(moved(number, head, &st.head_sha));
        }
        if st.queue.is_none() {
            // The opt-in file's merge method applies only without a queue (a queue merges by its
            // own): judged here, once GitHub said which.
            crate::rules::signing::refuse_rebase(gh, base_branch, self, deadline).await?;
            if !self.eligibility.eligible {
                return self.before_status(gh, number, head, deadline).await;
            }
        }
        self.note = None;
        self.ours = st.enabled_by_viewer();
        if st.queue.is_some() {
            return self.queue_eligible(gh, number, head, &st, base_branch, deadline).await;
        }
        if st.merge_state == MergeStateStatus::Behind && !self.updated {
            // "Require branches to be up to date before merging": GitHub's auto-merge waits for
            // an update it never makes itself, so the caller brings the head up to date.
            self.behind = true;
            self.done = Done::Waiting;
            self.detail = Some("the head is behind the base branch, which must be merged in first".to_owned());
            return Ok(());
        }
        if let Some(a) = &st.auto_merge {
            self.done = Done::AlreadyEnabled;
            self.detail = a.enabled_by.as_ref().map(|b| format!("enabled by {}", b.display()));
            return Ok(());
        }
        if !st.auto_merge_allowed {
            self.not_allowed("the repository's setting is off");
            return Ok(());
        }
        if st.merge_state.mergeable_now() {
            self.merge_now(&st);
            return Ok(());
        }
        if st.merge_state == MergeStateStatus::Dirty {
            self.done = Done::Waiting;
            self.detail = Some("the pull request conflicts with the base branch".to_owned());
            return Ok(());
        }
        let Some(place) = self.take_turn(gh, number, deadline).await else {
            return Ok(());
        };
        match gh.enable_auto_merge(&st.node_id, head, self.method, deadline).await? {
            AutoMergeAnswer::Enabled => {
                tracing::info!(pull_request = number, head, "auto-merge enabled");
                self.done = Done::Enabled;
                self.ours = true;
                self.detail = Some(format!(
                    "GitHub merges it ({}) once branch protection is satisfied (it was {})",
                    self.method.rest(),
                    st.merge_state.name()
                ));
                self.kept_turn(place, gh, number, &st.node_id, deadline).await?;
            }
            AutoMergeAnswer::MergeableNow(why) => {
                // It became mergeable since it was read: read it again before merging anything.
                tracing::info!(pull_request = number, answer = %why, "auto-merge refused: the pull request can merge now");
                let st = self.read(gh, number, head, deadline).await?;
                if st.head_sha != head {
                    return Err(moved(number, head, &st.head_sha));
                }
                if st.merge_state.mergeable_now() {
                    self.merge_now(&st);
                } else {
                    self.done = Done::Waiting;
                    self.detail = Some(format!("GitHub answered \"{why}\" but reads {}", st.merge_state.name()));
                }
            }
            AutoMergeAnswer::NotAllowed(why) => self.not_allowed(&why),
            AutoMergeAnswer::Refused(why) => {
                tracing::warn!(pull_request = number, answer = %why, "GitHub refused to enable auto-merge");
                self.done = Done::Refused;
                self.note = Some(format!(
                    "GitHub refused to enable auto-merge: \"{}\". A person merges this pull request.",
                    quote(&why)
                ));
                self.detail = Some(why);
            }
        }
        Ok(())
    }

    /// The merge method the opt-in file asks for.
    pub(super) fn method(&self) -> MergeMethod {
        self.method
    }

    /// Whether [`Run::after_status`] found the eligible head `BEHIND` a base that requires it
    /// up to date.
    pub(super) fn behind(&self) -> bool {
        self.behind
    }

    /// The head was brought up to date: judged again by [`Run::after_status`] on the new head.
    pub(super) fn brought_up_to_date(&mut self) {
        self.behind = false;
        self.updated = true;
    }

    /// The merge prepared by [`Run::after_status`], sent once the body says what it merges.
    /// Returns the body's paragraph when it must change (GitHub refused the merge).
    pub(super) async fn finish<G: GitData + Merges>(
        &mut self,
        gh: &G,
        number: u64,
        deadline: Instant,
    ) -> Result<Option<String>> {
        let Some(head) = self.merge.take() else { return Ok(None) };
        match gh.merge_pull(number, &head, self.method, deadline).await? {
            MergeAnswer::Merged(sha) => {
                tracing::info!(pull_request = number, head = %head, merge = %sha, "merged: every requirement was met");
                self.done = Done::Merged;
                self.detail = Some(format!("merged {head} as {sha} ({})", self.method.rest()));
                Ok(None)
            }
            MergeAnswer::NotMergeable(why) => {
                // A merge sent again after its answer was lost meets the merge it made: 405 ("Pull
                // Request is not mergeable"). What happened, the pull request tells.
                let st = self.read(gh, number, &head, deadline).await?;
                if st.state == PullState::Merged && st.head_sha == head {
                    tracing::info!(pull_request = number, head = %head, "merged: GitHub's answer was lost, the pull request reads merged with this head");
                    self.done = Done::Merged;
                    self.detail = Some(format!(
                        "merged {head} ({}; GitHub's answer was lost, the pull request reads merged)",
                        self.method.rest()
                    ));
                    return Ok(None);
                }
                tracing::warn!(pull_request = number, answer = %why, "GitHub refused the merge");
                self.done = Done::Refused;
                self.note = Some(format!(
                    "GitHub refused to merge it: \"{}\". cellbridge tries again at the next event; a person can merge it.",
                    quote(&why)
                ));
                self.detail = Some(why);
                Ok(Some(self.block()))
            }
        }
    }

    /// GitHub says the pull request can merge now: merged with the head's sha once every
    /// required check of that head passed, else left for the next event.
    fn merge_now(&mut self, st: &MergeState) {
        if st.required_passed() {
            self.merge = Some(st.head_sha.clone());
            self.done = Done::Waiting;
            self.detail = Some(format!(
                "{}: every required check of the head passed",
                st.merge_state.name()
            ));
        } else {
            let waiting: Vec<String> = st
                .required
                .iter()
                .filter(|c| c.state != crate::ports::github::CheckState::Passed)
                .map(|c| format!("{} ({:?})", c.name, c.state).to_lowercase())
                .collect();
            self.done = Done::Waiting;
            self.detail = Some(if waiting.is_empty() {
                "not every check of the head could be read (GitHub cut the list short, or these credentials may not read check runs: checks=read)".to_owned()
            } else {
                format!("required checks not passed yet: {}", waiting.join(", "))
            });
        }
    }

    fn not_allowed(&mut self, why: &str) {
        self.done = Done::NotAllowed;
        self.detail = Some(why.to_owned());
        self.note = Some(
            "GitHub does not allow auto-merge in this repository: an administrator can turn on **Allow auto-merge** (Settings → General → Pull Requests). Until then a person merges this pull request."
                .to_owned(),
        );
    }
}

fn moved(number: u64, checked: &str, now: &str) -> GithubError {
    GithubError::Conflict {
        what: format!("auto-merge of pull request #{number}"),
        detail: format!("its head moved from {checked} to {now} since it was checked"),
    }
}

fn quote(s: &str) -> String {
    let one_line = s.replace(['\n', '\r'], " ");
    if one_line.chars().count() <= QUOTE_MAX {
        one_line
    } else {
        let cut: String = one_line.chars().take(QUOTE_MAX).collect();
        format!("{cut}…")
    }
}
