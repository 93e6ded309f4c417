//! Where a pull request stands for merging, as GraphQL tells it: its merge state, the head's
//! required checks, GitHub's auto-merge and the base's merge queue, and GitHub's answers to
//! enabling auto-merge, queueing and merging.

use super::PullState;

pub use crate::pure::automerge::MergeMethod;

/// GraphQL's `MergeStateStatus` of a pull request: "Detailed status information about a pull
/// request merge" (<https://docs.github.com/graphql/reference/enums#mergestatestatus>).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeStateStatus {
    /// "The head ref is out of date" (a strict required-checks rule).
    Behind,
    /// "The merge is blocked" (a required check or review missing).
    Blocked,
    /// "Mergeable and passing commit status."
    Clean,
    /// "The merge commit cannot be cleanly created."
    Dirty,
    /// Deprecated, a draft.
    Draft,
    /// "Mergeable with passing commit status and pre-receive hooks."
    HasHooks,
    /// "The state cannot currently be determined."
    Unknown,
    /// "Mergeable with non-passing commit status" (a check that is not required).
    Unstable,
}

impl MergeStateStatus {
    /// As GitHub names it.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "BEHIND" => Self::Behind,
            "BLOCKED" => Self::Blocked,
            "CLEAN" => Self::Clean,
            "DIRTY" => Self::Dirty,
            "DRAFT" => Self::Draft,
            "HAS_HOOKS" => Self::HasHooks,
            "UNKNOWN" => Self::Unknown,
            "UNSTABLE" => Self::Unstable,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Behind => "BEHIND",
            Self::Blocked => "BLOCKED",
            Self::Clean => "CLEAN",
            Self::Dirty => "DIRTY",
            Self::Draft => "DRAFT",
            Self::HasHooks => "HAS_HOOKS",
            Self::Unknown => "UNKNOWN",
            Self::Unstable => "UNSTABLE",
        }
    }

    /// What the dashboard's row says of it. `Unknown`: GitHub computes a pull request's
    /// mergeability in the background, after a push to it or its base ("Get a pull request":
    /// "If the value is `null`, then GitHub has started a background job to compute the
    /// mergeability"), and answers "The state cannot currently be determined" until then.
    pub fn in_words(self) -> &'static str {
        match self {
            Self::Behind => "behind its base branch",
            Self::Blocked => "blocked by a required check or review",
            Self::Clean | Self::HasHooks => "ready to merge",
            Self::Dirty => "conflicts with its base branch",
            Self::Draft => "a draft",
            Self::Unknown => "not computed yet",
            Self::Unstable => "mergeable, a check not passing",
        }
    }

    /// Every requirement of the base branch is met: the pull request can merge now (what GitHub's
    /// auto-merge refuses to wait for).
    pub fn mergeable_now(self) -> bool {
        matches!(self, Self::Clean | Self::HasHooks | Self::Unstable)
    }
}

/// Where a check of the head commit stands: a commit status (`StatusContext.state`) or a check
/// run (`CheckRun.status` and `conclusion`), reduced to what a merge needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckState {
    Passed,
    Pending,
    Failed,
}

/// A check of the head commit that the base branch requires for this pull request
/// (`isRequired(pullRequestNumber:)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredCheck {
    pub name: String,
    pub state: CheckState,
}

/// Who did something, as GraphQL's `Actor` interface names them (`__typename` and `login`).
///
/// A GitHub App acts as a `Bot`, whose GraphQL `login` is its slug *without* the `[bot]` suffix
/// that its REST login and GraphQL `viewer.login` carry: "In the V4 API, bot accounts have their
/// own type, so the login string does not include this suffix" (palantir/policy-bot#44; likewise
/// chdsbd/kodiak#288). So an App's own auto-merge reads `enabledBy { __typename: "Bot", login:
/// "cellbridge" }` while `viewer.login` is `cellbridge[bot]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub login: String,
    /// `__typename` is `Bot`.
    pub bot: bool,
}

impl Actor {
    /// Whether this actor is the one whose `viewer.login` is `viewer`: a `User` by the same
    /// login; a `Bot` by its slug with `[bot]` appended (a `User` whose login is an App's slug
    /// is someone else).
    pub fn is_viewer(&self, viewer: &str) -> bool {
        if self.bot {
            viewer.strip_suffix("[bot]") == Some(self.login.as_str()) || viewer == self.login
        } else {
            viewer == self.login && !viewer.ends_with("[bot]")
        }
    }

    /// As a person reads the name on GitHub (a bot with its suffix).
    pub fn display(&self) -> String {
        if self.bot && !self.login.ends_with("[bot]") {
            format!("{}[bot]", self.login)
        } else {
            self.login.clone()
        }
    }
}

/// GitHub's auto-merge request on a pull request (`PullRequest.autoMergeRequest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoMergeRequest {
    /// Whoever enabled it (`enabledBy`), when GitHub tells.
    pub enabled_by: Option<Actor>,
    pub method: MergeMethod,
}

/// Where a pull request stands for merging, read in one GraphQL query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeState {
    /// The pull request's node id, which the mutations take.
    pub node_id: String,
    pub state: PullState,
    /// `headRefOid`.
    pub head_sha: String,
    pub merge_state: MergeStateStatus,
    /// The repository's "Allow auto-merge" setting (`Repository.autoMergeAllowed`).
    pub auto_merge_allowed: bool,
    pub auto_merge: Option<AutoMergeRequest>,
    /// The login these credentials act as (`viewer`): tells cellbridge's own auto-merge from a
    /// person's.
    pub viewer: String,
    /// The head commit's checks that are required for this pull request, and their state.
    pub required: Vec<RequiredCheck>,
    /// Whether `required` holds every check of the head (GitHub's answer was not cut to a page).
    pub checks_complete: bool,
    /// The merge queue the base branch requires, if any (`PullRequest.mergeQueue`).
    pub queue: Option<MergeQueue>,
    /// The pull request's entry in that queue, while it is in it (`mergeQueueEntry`).
    pub queued: Option<QueueEntry>,
}

/// What an unreadable merge state's answer still told of the pull request: its node (which the
/// mutations take), whether the auto-merge on it is these credentials' own, and whether they
/// queued it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullNode {
    pub node_id: String,
    pub auto_merge_by_viewer: bool,
    /// `Some(true)`: in the merge queue, `enqueuer` these credentials; `Some(false)`: out of it or
    /// added by someone else; `None`: the answer does not hold `mergeQueueEntry` (refused, or cut
    /// before it), so it cannot tell.
    pub queued_by_viewer: Option<bool>,
}

/// A merge queue a base branch requires (branch protection's or a ruleset's "Require merge
/// queue"): GitHub merges what is in it, by the queue's own method, once the queue's checks of
/// the merge with the latest base pass ("Merging a pull request with a merge queue",
/// <https://docs.github.com/pull-requests/collaborating-with-pull-requests/incorporating-changes-from-a-pull-request/merging-a-pull-request-with-a-merge-queue>).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeQueue {
    /// `configuration.mergeMethod`, when GitHub tells.
    pub method: Option<MergeMethod>,
}

/// A pull request's entry in a merge queue (`MergeQueueEntry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// Who added it (`enqueuer`): a person's queueing is theirs, as their auto-merge is.
    pub enqueuer: Actor,
    /// `MergeQueueEntryState` as GitHub names it (`QUEUED`, `AWAITING_CHECKS`...), for people.
    pub state: String,
}

impl MergeState {
    /// Auto-merge is on, enabled by these credentials (told by the enabler itself: see
    /// [`Actor::is_viewer`]).
    pub fn enabled_by_viewer(&self) -> bool {
        self.auto_merge
            .as_ref()
            .and_then(|a| a.enabled_by.as_ref())
            .is_some_and(|by| by.is_viewer(&self.viewer))
    }

    /// The pull request is in the merge queue, added by these credentials (or by the auto-merge
    /// they enabled, which GitHub names as its enabler's).
    pub fn queued_by_viewer(&self) -> bool {
        self.queued.as_ref().is_some_and(|q| q.enqueuer.is_viewer(&self.viewer))
    }

    /// Every required check of the head passed, as far as GitHub listed them.
    pub fn required_passed(&self) -> bool {
        self.checks_complete && self.required.iter().all(|c| c.state == CheckState::Passed)
    }
}

/// GitHub's answer to `enablePullRequestAutoMerge` (refusals are answers about this pull
/// request, not failures of the sync).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutoMergeAnswer {
    Enabled,
    /// "Pull request is in clean status" (or unstable, or has hooks): it can merge now, there is
    /// nothing to wait for.
    MergeableNow(String),
    /// "Auto merge is not allowed for this repository": the repository's setting is off.
    NotAllowed(String),
    /// Any other refusal, GitHub's message.
    Refused(String),
}

/// GitHub's answer to putting a pull request in a required merge queue
/// ([`super::Merges::queue_auto_merge`], [`super::Merges::enqueue`]); refusals are answers, not failures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueAnswer {
    /// In the queue now.
    Queued,
    /// Auto-merge on: GitHub adds it to the queue once every requirement is met.
    Armed,
    /// GitHub refuses to wait ("Pull request is in clean status"): every requirement is met, it
    /// can be added to the queue now.
    MergeableNow(String),
    /// "Auto merge is not allowed for this repository".
    NotAllowed(String),
    /// Any other refusal (a requirement not met, the queue's method), GitHub's message.
    Refused(String),
}

/// GitHub's answer to "Merge a pull request" with the head's sha.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeAnswer {
    /// The merge commit.
    Merged(String),
    /// 405: "Method Not Allowed if merge cannot be performed" (a protection not met, a
    /// conflict, a merge method the repository does not allow), GitHub's message.
    NotMergeable(String),
}
