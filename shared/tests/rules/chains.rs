//! The two chains `shared/src/lib.rs` documents, as each Lambda handler takes them on the
//! in-memory doubles: the TRACE spans of the steps (target `cellbridge::chain`) around the
//! request that opens a pull request, and around the first server-side apply, are exactly the
//! documented steps, in order. A step renamed, bypassed or wrapped in one more fails here.

use std::sync::{Arc, Mutex};

use cellbridge::shell::lambda::{self, CHAIN, Shell};
use serde_json::json;
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

/// The chain steps each new step span sits in, outermost first, ending with its own name.
#[derive(Clone, Default)]
struct Chains(Arc<Mutex<Vec<Vec<String>>>>);

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Chains {
    fn on_new_span(&self, attrs: &tracing::span::Attributes<'_>, id: &tracing::span::Id, ctx: Context<'_, S>) {
        if attrs.metadata().target() != CHAIN {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut path: Vec<String> = span
            .scope()
            .filter(|s| s.metadata().target() == CHAIN)
            .map(|s| s.name().to_owned())
            .collect();
        path.reverse();
        self.0.lock().unwrap().push(path);
    }
}

impl Chains {
    /// Every path that ends at the step `last`.
    fn ending_at(&self, last: &str) -> Vec<Vec<String>> {
        let paths = self.0.lock().unwrap();
        paths
            .iter()
            .filter(|p| p.last().is_some_and(|l| l == last))
            .cloned()
            .collect()
    }
}

/// The documented chain whose line starts the chain of `title`: each step's link text, as its
/// span names it (`Syncer::run` is the span `Syncer.run`).
fn documented(title: &str) -> Vec<String> {
    let lib = include_str!("../../src/lib.rs");
    let at = lib
        .find(title)
        .unwrap_or_else(|| panic!("lib.rs documents no chain {title:?}"));
    let line = lib[at..]
        .lines()
        .nth(1)
        .expect("the chain's line")
        .trim_start_matches("//! ");
    let steps: Vec<String> = line
        .split(" → ")
        .map(|step| {
            let text = step
                .split("`")
                .nth(1)
                .unwrap_or_else(|| panic!("a step that is no link: {step}"));
            text.replace("::", ".")
        })
        .collect();
    assert!(steps.len() <= 6, "more than five calls from the handler: {steps:?}");
    steps
}

/// A state event for a new cell, through the state-sync handler: the answer.
async fn sync_new_cell() -> serde_json::Value {
    let bed = crate::support::sync::bed();
    crate::support::sync::apply(&bed, "eu-c1", 1, "vpc-1");
    let event = json!({"Records": [{"messageId": "m1", "eventSource": "aws:sqs", "body": json!({
        "source": "aws.s3", "detail-type": "Object Created",
        "detail": {"bucket": {"name": crate::support::sync::BUCKET}, "object": {"key": "cells/eu-c1/terraform.tfstate"}},
    }).to_string()}]});
    let inv = lambda::handler(&bed, &event, crate::support::sync::deadline(), &Shell::quiet())
        .await
        .unwrap();
    inv.response
}

/// CloudTrail's CreateCluster for a cell's cluster, through the cluster-bootstrap handler: the
/// answer.
async fn bootstrap_new_cluster() -> serde_json::Value {
    use crate::support::bootstrap::{CLUSTER, bed, created, fleet, service};
    use cellbridge::doubles::cluster::MemSource;
    let svc = service(bed(), MemSource::new(fleet(&[])).on_branch("main"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    let inv = lambda::handler(&svc, &created(CLUSTER), deadline, &Shell::quiet())
        .await
        .unwrap();
    inv.response
}

/// The chain steps' spans while `run` runs. A callsite registers its interest once per
/// process, from whichever test thread reaches it first (the tests of this binary run in
/// parallel): a run before the capture registers every step's callsite, so that the capturing
/// subscriber, installed after, is asked about each of them.
async fn captured<F: std::future::Future<Output = serde_json::Value>>(
    run: impl Fn() -> F,
) -> (serde_json::Value, Chains) {
    run().await;
    let chains = Chains::default();
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(chains.clone()));
    let answer = run().await;
    (answer, chains)
}

#[tokio::test(flavor = "current_thread")]
async fn a_state_event_reaches_create_pull_through_the_documented_steps() {
    let (answer, chains) = captured(sync_new_cell).await;
    assert_eq!(answer["cells"][0]["action"], "opened", "{answer}");

    let chain = documented("**A state event becomes a pull request**");
    let taken = chains.ending_at(chain.last().unwrap());
    assert_eq!(taken, [chain], "one pull request opened, through the documented steps");
}

#[tokio::test(flavor = "current_thread")]
async fn a_new_cluster_reaches_the_server_side_apply_through_the_documented_steps() {
    let (answer, chains) = captured(bootstrap_new_cluster).await;
    assert_eq!(answer["outcome"], "bootstrapped", "{answer}");

    let chain = documented("**A new cluster gets Flux**");
    let taken = chains.ending_at(chain.last().unwrap());
    assert!(!taken.is_empty(), "no server-side apply");
    for path in &taken {
        assert_eq!(path, &chain, "every apply through the documented steps");
    }
}
