//! state-sync's GitHub behaviour as a user sees it, written once and run against both GitHubs
//! the project has: the in-memory double (`cellbridge::doubles::github::MemGithub`, feature
//! `test-support`) and the HTTP fake (`tests/fakes/github_fake.py`, checked against GitHub's
//! REST description) reached by the product's own client, `GithubFleet`, twice: as github.com
//! with a token (API version 2026-03-10) and as GitHub Enterprise Server with a GitHub App
//! (2022-11-28), so that both API versions and both kinds of credentials are exercised.
//!
//! Each scenario is one generic function over [`Bed`], the GitHub side of a test: what a
//! scenario needs beyond the product's orchestrator (`Syncer`), which drives the repository the
//! same way in both (any `GithubRepo` is a `FleetRepo`). The `scenarios!` macro instantiates every
//! scenario once per bed, as `mem_github::<scenario>`, `http_fake::<scenario>` and
//! `http_ghes::<scenario>`; run one bed with the filter `mem_`, `http_fake` or `http_ghes`.
//! `make test` runs GitHub Enterprise Server's bed for the pull request and credential scenarios
//! only, the ones where the API version and the App's credentials make the difference; the whole
//! copy is the feature `every-bed`, which `make bench` turns on (a bed marked
//! `#[cfg(feature = "every-bed")]` in a file's `scenarios!`).
//!
//! Where the two GitHubs model a fault differently on purpose, the bed says so
//! ([`Bed::RETRIES_IN_CLIENT`]); where they disagree on what GitHub does, the scenario says which
//! one is wrong.
//!
//! One file per thing a GitHub user sees (each file's doc says which scenarios it holds); the
//! beds, the world and the helpers they share are in `support`.

macro_rules! scenarios {
    ($($(#[$bed_meta:meta])* $module:ident: $bed:ty),+ ; $scenarios:tt) => {
        $($(#[$bed_meta])* scenarios!(@bed $module, $bed, $scenarios);)+
    };
    (@bed $module:ident, $bed:ty, [$($(#[$meta:meta])* $scenario:ident),+ $(,)?]) => {
        mod $module {
            $(
                #[tokio::test]
                $(#[$meta])*
                async fn $scenario() {
                    super::$scenario::<$bed>().await
                }
            )+
        }
    };
}

mod auto_merge;
mod credentials;
mod dashboard;
mod decommission;
mod fail_closed;
mod forks;
mod merge_queue;
mod people;
mod pull_request;
mod refusals;
mod requests;
mod signing;
mod support;
