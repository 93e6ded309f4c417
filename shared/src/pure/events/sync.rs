//! Events that trigger state-sync, told apart by shape: an S3 event notification, an
//! EventBridge "Object Created" event from S3, either of those as the body of SQS messages, or
//! a manual payload (`{"action": "sync", ...}`) from the console or the command line.
//!
//! Nothing here decides which objects are states: that needs the key pattern (configuration).
//! Objects that are never states (`.tflock`, deletions, S3's test event) are ignored here.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncEventError {
    #[error("event is not a state-sync event: {reason}")]
    Unrecognized { reason: String },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
}

/// An object a notification says was written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StateObject {
    pub bucket: String,
    pub key: String,
    /// What the event said; informational only: the sync always reads the latest version.
    pub version_id: Option<String>,
}

/// One thing an event carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncItem {
    Object(StateObject),
    /// Not a state write (S3 test event, deletion, lock file): logged and skipped.
    Ignored {
        what: String,
        reason: String,
    },
    /// A manual payload as an SQS message's body: what sync-all's fan-out sends, and what a
    /// dead-letter queue redrive brings back (a failed scheduled sync-all, a manual payload).
    Manual(Manual),
    /// CloudTrail's record of `eks:DeleteCluster`: the cell whose merged metadata names the
    /// cluster is synced again, so that a destroyed stack's decommission is proposed once the
    /// cluster is gone.
    ClusterDeleted(DeletedCluster),
}

/// A cluster EKS was asked to delete.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeletedCluster {
    pub cluster: String,
    pub region: String,
    /// The account that received the call (`recipientAccountId`, else EventBridge's `account`).
    pub account: Option<String>,
}

/// What a manual payload asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Manual {
    Cell(String),
    Object {
        bucket: Option<String>,
        key: String,
    },
    All,
    /// Rebuild the fleet dashboard, and sync nothing.
    Dashboard,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SyncSqsRecord {
    pub message_id: String,
    /// The body's items, or why the body could not be understood.
    pub items: Result<Vec<SyncItem>, SyncEventError>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SyncEvent {
    /// An S3 notification or an EventBridge event delivered directly.
    Direct(Vec<SyncItem>),
    /// SQS messages, each answered on its own (partial batch response).
    Sqs(Vec<SyncSqsRecord>),
    Manual {
        request: Manual,
        dry_run: bool,
        /// The module's schedule sent it (`"scheduled": true`, a sync-all only): a dashboard it
        /// could not rebuild for now is tried again later ([`crate::jobs::sync`]), as nobody is
        /// there to run it again.
        scheduled: bool,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ManualPayload {
    action: String,
    #[serde(default)]
    cell: Option<String>,
    #[serde(default)]
    bucket: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    dry_run: bool,
    /// The schedule's own sync-all says so: nothing else tells it from one run by hand.
    #[serde(default)]
    scheduled: bool,
}

/// Tells the event apart and extracts what it carries.
pub fn parse(event: &Value) -> Result<SyncEvent, SyncEventError> {
    let obj = event.as_object().ok_or_else(|| SyncEventError::Unrecognized {
        reason: "not a JSON object".into(),
    })?;
    if obj.contains_key("action") {
        return parse_manual(event).map(|(request, dry_run, scheduled)| SyncEvent::Manual {
            request,
            dry_run,
            scheduled,
        });
    }
    if let Some(records) = obj.get("Records").and_then(Value::as_array) {
        let from_sqs = records
            .first()
            .and_then(|r| r.get("eventSource"))
            .and_then(Value::as_str)
            == Some("aws:sqs");
        if from_sqs {
            let sqs: SqsEvent = serde_json::from_value(event.clone()).map_err(|e| SyncEventError::Invalid {
                what: "SQS event".into(),
                reason: e.to_string(),
            })?;
            let records = sqs
                .records
                .into_iter()
                .enumerate()
                .map(|(i, m)| {
                    let message_id = m.message_id.clone().unwrap_or_else(|| format!("record-{i}"));
                    let items = match m.body.as_deref().map(serde_json::from_str::<Value>) {
                        None => Err(SyncEventError::Invalid {
                            what: format!("SQS message {message_id}"),
                            reason: "no body".into(),
                        }),
                        Some(Err(e)) => Err(SyncEventError::Invalid {
                            what: format!("SQS message {message_id}"),
                            reason: format!("body is not JSON: {e}"),
                        }),
                        Some(Ok(body)) if body.get("action").is_some() => match parse_manual(&body) {
                            Ok((_, true, _)) => Err(SyncEventError::Invalid {
                                what: format!("SQS message {message_id}"),
                                reason: "\"dry_run\" is for direct invocations: a queued message syncs".into(),
                            }),
                            // A redriven scheduled sync-all is a person's redrive: run as theirs.
                            Ok((request, false, _)) => Ok(vec![SyncItem::Manual(request)]),
                            Err(e) => Err(e),
                        },
                        Some(Ok(body)) => parse_notification(&body),
                    };
                    SyncSqsRecord { message_id, items }
                })
                .collect();
            return Ok(SyncEvent::Sqs(records));
        }
    }
    parse_notification(event).map(SyncEvent::Direct)
}

/// An S3 notification, an S3 test event, or an EventBridge S3 event.
pub fn parse_notification(v: &Value) -> Result<Vec<SyncItem>, SyncEventError> {
    if v.get("Event").and_then(Value::as_str) == Some("s3:TestEvent") {
        let bucket = v.get("Bucket").and_then(Value::as_str).unwrap_or("?");
        return Ok(vec![SyncItem::Ignored {
            what: format!("s3://{bucket}"),
            reason: "S3 test event".into(),
        }]);
    }
    if let Some(records) = v.get("Records").and_then(Value::as_array) {
        return records.iter().enumerate().map(|(i, r)| s3_record(i, r)).collect();
    }
    if v.get("detail-type").is_some() {
        let ev: EventBridgeEvent<Value> = serde_json::from_value(v.clone()).map_err(|e| SyncEventError::Invalid {
            what: "EventBridge event".into(),
            reason: e.to_string(),
        })?;
        if ev.detail_type == "AWS API Call via CloudTrail" {
            return Ok(vec![cloudtrail_call(v, &ev.detail)?]);
        }
        if ev.source != "aws.s3" {
            return Err(SyncEventError::Unrecognized {
                reason: format!(
                    "EventBridge event from {:?}, expected aws.s3 (or CloudTrail's eks:DeleteCluster)",
                    ev.source
                ),
            });
        }
        let bucket = str_at(&ev.detail, &["bucket", "name"]).ok_or_else(|| SyncEventError::Invalid {
            what: "EventBridge S3 event".into(),
            reason: "no detail.bucket.name".into(),
        })?;
        let key = str_at(&ev.detail, &["object", "key"]).ok_or_else(|| SyncEventError::Invalid {
            what: "EventBridge S3 event".into(),
            reason: "no detail.object.key".into(),
        })?;
        let what = format!("s3://{bucket}/{key}");
        if ev.detail_type != "Object Created" {
            return Ok(vec![SyncItem::Ignored {
                what,
                reason: format!("{} event", ev.detail_type),
            }]);
        }
        let version_id = str_at(&ev.detail, &["object", "version-id"]);
        return Ok(vec![object_or_lock(StateObject {
            bucket,
            key,
            version_id,
        })]);
    }
    Err(SyncEventError::Unrecognized {
        reason: "expected an S3 notification (Records), an EventBridge S3 event (detail-type), CloudTrail's eks:DeleteCluster, SQS messages, or {\"action\": \"sync\" | \"sync-all\" | \"dashboard\", ...}".into(),
    })
}

/// CloudTrail's record of an API call, as EventBridge delivers it: only a successful
/// `eks:DeleteCluster` is state-sync's. The cluster is `requestParameters.name` (DeleteCluster's
/// request, <https://docs.aws.amazon.com/eks/latest/APIReference/API_DeleteCluster.html>), in
/// `awsRegion`; the account is `recipientAccountId`, the account that received the call (the
/// caller's `userIdentity.accountId` may be another's), else EventBridge's `account`
/// (<https://docs.aws.amazon.com/awscloudtrail/latest/userguide/cloudtrail-event-reference-record-contents.html>).
fn cloudtrail_call(v: &Value, detail: &Value) -> Result<SyncItem, SyncEventError> {
    let what = "CloudTrail DeleteCluster";
    let source = str_at(detail, &["eventSource"]).unwrap_or_default();
    let name = str_at(detail, &["eventName"]).unwrap_or_default();
    if source != "eks.amazonaws.com" || name != "DeleteCluster" {
        return Ok(SyncItem::Ignored {
            what: format!("{source} {name}"),
            reason: "not eks:DeleteCluster".into(),
        });
    }
    if let Some(code) = str_at(detail, &["errorCode"]) {
        return Ok(SyncItem::Ignored {
            what: "eks:DeleteCluster".into(),
            reason: format!("the call failed with {code}: the cluster stays"),
        });
    }
    let invalid = |reason: &str| SyncEventError::Invalid {
        what: what.into(),
        reason: reason.into(),
    };
    let cluster = str_at(detail, &["requestParameters", "name"])
        .or_else(|| str_at(detail, &["responseElements", "cluster", "name"]))
        .filter(|c| !c.is_empty())
        .ok_or_else(|| invalid("no requestParameters.name"))?;
    let region = str_at(detail, &["awsRegion"])
        .or_else(|| str_at(v, &["region"]))
        .filter(|r| !r.is_empty())
        .ok_or_else(|| invalid("no awsRegion"))?;
    let account = str_at(detail, &["recipientAccountId"])
        .or_else(|| str_at(v, &["account"]))
        .filter(|a| !a.is_empty());
    if let Some(a) = &account
        && !super::bootstrap::is_account_id(a)
    {
        return Err(invalid(&format!("account {a:?} is not a 12-digit AWS account id")));
    }
    Ok(SyncItem::ClusterDeleted(DeletedCluster {
        cluster,
        region,
        account,
    }))
}

fn s3_record(i: usize, r: &Value) -> Result<SyncItem, SyncEventError> {
    let what = format!("S3 record {i}");
    let bucket = str_at(r, &["s3", "bucket", "name"]).ok_or_else(|| SyncEventError::Invalid {
        what: what.clone(),
        reason: "no s3.bucket.name".into(),
    })?;
    let raw_key = str_at(r, &["s3", "object", "key"]).ok_or_else(|| SyncEventError::Invalid {
        what: what.clone(),
        reason: "no s3.object.key".into(),
    })?;
    let key = decode_key(&raw_key).map_err(|reason| SyncEventError::Invalid { what, reason })?;
    let name = r.get("eventName").and_then(Value::as_str).unwrap_or("");
    let what = format!("s3://{bucket}/{key}");
    if !name.starts_with("ObjectCreated:") {
        return Ok(SyncItem::Ignored {
            what,
            reason: format!("{} event", if name.is_empty() { "unnamed" } else { name }),
        });
    }
    let version_id = str_at(r, &["s3", "object", "versionId"]).filter(|v| !v.is_empty() && v != "null");
    Ok(object_or_lock(StateObject {
        bucket,
        key,
        version_id,
    }))
}

fn object_or_lock(o: StateObject) -> SyncItem {
    // The S3 backend's lock file (use_lockfile) sits next to the state as `<key>.tflock`.
    if o.key.ends_with(".tflock") {
        SyncItem::Ignored {
            what: format!("s3://{}/{}", o.bucket, o.key),
            reason: "Terraform lock file".into(),
        }
    } else {
        SyncItem::Object(o)
    }
}

/// S3 notification keys are form-encoded: `+` is a space, `%XX` a byte.
pub fn decode_key(raw: &str) -> Result<String, String> {
    let plus = raw.replace('+', " ");
    percent_encoding::percent_decode_str(&plus)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| format!("object key {raw:?} is not UTF-8 once decoded"))
}

fn str_at(v: &Value, path: &[&str]) -> Option<String> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str().map(str::to_owned)
}

/// The request, `dry_run` and `scheduled`.
fn parse_manual(event: &Value) -> Result<(Manual, bool, bool), SyncEventError> {
    let p: ManualPayload = serde_json::from_value(event.clone()).map_err(|e| SyncEventError::Invalid {
        what: "manual payload".into(),
        reason: e.to_string(),
    })?;
    let invalid = |reason: &str| SyncEventError::Invalid {
        what: "manual payload".into(),
        reason: reason.into(),
    };
    if p.scheduled && p.action != "sync-all" {
        return Err(invalid("\"scheduled\" is the schedule's sync-all's only"));
    }
    let request = match (p.action.as_str(), p.cell, p.key) {
        ("sync", Some(cell), None) if p.bucket.is_none() => Manual::Cell(cell),
        ("sync", None, Some(key)) => Manual::Object { bucket: p.bucket, key },
        ("sync", Some(_), Some(_)) => return Err(invalid("give either \"cell\" or \"key\", not both")),
        ("sync", _, _) => return Err(invalid("\"sync\" needs \"cell\", or \"bucket\" and \"key\"")),
        ("sync-all", None, None) => Manual::All,
        ("sync-all", _, _) => return Err(invalid("\"sync-all\" takes no cell or key")),
        ("dashboard", None, None) if p.bucket.is_none() => Manual::Dashboard,
        ("dashboard", _, _) => return Err(invalid("\"dashboard\" takes no cell, bucket or key")),
        (other, _, _) => {
            return Err(invalid(&format!(
                "unknown action {other:?} (expected \"sync\", \"sync-all\" or \"dashboard\")"
            )));
        }
    };
    Ok((request, p.dry_run, p.scheduled))
}

/// The answer to an SQS batch: the messages to deliver again.
pub fn batch_response(failed_message_ids: impl IntoIterator<Item = String>) -> SqsBatchResponse {
    let mut resp = SqsBatchResponse::default();
    resp.batch_item_failures = failed_message_ids
        .into_iter()
        .map(|id| {
            let mut f = BatchItemFailure::default();
            f.item_identifier = id;
            f
        })
        .collect();
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A sample of `events/`.
    fn load(name: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../events")
            .join(name);
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
            .unwrap()
    }

    fn s3_event(name: &str, key: &str) -> Value {
        json!({"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "eu-west-1", "eventTime": "2026-11-29T00:00:00.000Z",
            "eventName": name, "s3": {"bucket": {"name": "states"}, "object": {"key": key, "size": 10, "versionId": "v1"}}}]})
    }

    #[test]
    fn s3_keys_are_form_decoded() {
        let e = parse(&s3_event(
            "ObjectCreated:Put",
            "env%3A/prod+eu/cells/a/terraform.tfstate",
        ))
        .unwrap();
        assert_eq!(
            e,
            SyncEvent::Direct(vec![SyncItem::Object(StateObject {
                bucket: "states".into(),
                key: "env:/prod eu/cells/a/terraform.tfstate".into(),
                version_id: Some("v1".into())
            })])
        );
    }

    #[test]
    fn deletes_locks_and_test_events_are_ignored() {
        assert!(
            matches!(&parse(&s3_event("ObjectRemoved:Delete", "cells/a/terraform.tfstate")).unwrap(), SyncEvent::Direct(v) if matches!(v[0], SyncItem::Ignored { .. }))
        );
        assert!(
            matches!(&parse(&s3_event("ObjectCreated:Put", "cells/a/terraform.tfstate.tflock")).unwrap(), SyncEvent::Direct(v) if matches!(v[0], SyncItem::Ignored { .. }))
        );
        let t = json!({"Service": "Amazon S3", "Event": "s3:TestEvent", "Time": "2026-11-29T00:00:00Z", "Bucket": "states", "RequestId": "x", "HostId": "y"});
        assert!(matches!(&parse(&t).unwrap(), SyncEvent::Direct(v) if matches!(v[0], SyncItem::Ignored { .. })));
    }

    #[test]
    fn sqs_bodies_are_parsed_one_by_one() {
        let ev = json!({"Records": [
            {"messageId": "m1", "eventSource": "aws:sqs", "body": s3_event("ObjectCreated:Put", "cells/a/terraform.tfstate").to_string()},
            {"messageId": "m2", "eventSource": "aws:sqs", "body": "not json"},
            {"messageId": "m3", "eventSource": "aws:sqs", "body": json!({"version": "0", "detail-type": "Object Created", "source": "aws.s3",
                "detail": {"bucket": {"name": "states"}, "object": {"key": "cells/b/terraform.tfstate", "version-id": "v9"}}}).to_string()},
        ]});
        let SyncEvent::Sqs(recs) = parse(&ev).unwrap() else {
            panic!()
        };
        assert_eq!(recs.len(), 3);
        assert!(recs[0].items.is_ok() && recs[1].items.is_err());
        assert_eq!(
            recs[2].items.as_ref().unwrap()[0],
            SyncItem::Object(StateObject {
                bucket: "states".into(),
                key: "cells/b/terraform.tfstate".into(),
                version_id: Some("v9".into())
            })
        );
        let resp = serde_json::to_value(batch_response(["m2".to_owned()])).unwrap();
        assert_eq!(resp, json!({"batchItemFailures": [{"itemIdentifier": "m2"}]}));
    }

    /// Every state-sync sample under `events/` parses to what its README line says.
    #[test]
    fn sample_events() {
        let object = |key: &str, v: &str| {
            SyncItem::Object(StateObject {
                bucket: "acme-tfstate".into(),
                key: key.into(),
                version_id: Some(v.into()),
            })
        };
        let prod = "cells/prod-eu-west-1/terraform.tfstate";
        let SyncEvent::Direct(items) = parse(&load("s3-put.json")).unwrap() else {
            panic!("s3-put")
        };
        assert!(matches!(&items[..], [SyncItem::Object(o)] if o.key == prod && o.version_id.is_some()));
        let SyncEvent::Direct(items) = parse(&load("s3-put-workspace.json")).unwrap() else {
            panic!()
        };
        assert_eq!(
            items,
            vec![object(
                "env:/staging/cells/staging-eu-west-1/terraform.tfstate",
                "wS1M0Z9y3b4Q1mYcH2xK8nD6pLr0TuVa"
            )]
        );
        let SyncEvent::Direct(items) = parse(&load("s3-key-with-space.json")).unwrap() else {
            panic!()
        };
        assert!(
            matches!(&items[..], [SyncItem::Object(o)] if o.key == "cells/prod-eu-west-1 (copy)/terraform.tfstate"),
            "{items:?}"
        );
        for ignored in ["s3-test-event.json", "s3-tflock.json", "s3-delete.json"] {
            let SyncEvent::Direct(items) = parse(&load(ignored)).unwrap() else {
                panic!("{ignored}")
            };
            assert!(matches!(&items[..], [SyncItem::Ignored { .. }]), "{ignored}: {items:?}");
        }
        let SyncEvent::Direct(items) = parse(&load("eventbridge-s3-object-created.json")).unwrap() else {
            panic!()
        };
        assert_eq!(items, vec![object(prod, "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY")]);
        let SyncEvent::Sqs(recs) = parse(&load("sqs-s3.json")).unwrap() else {
            panic!()
        };
        assert_eq!(recs.len(), 2);
        assert!(
            matches!(&recs[1].items.as_ref().unwrap()[..], [SyncItem::Object(o)] if o.key == "cells/dev-eu-west-1/terraform.tfstate")
        );
        let SyncEvent::Sqs(recs) = parse(&load("sqs-eventbridge-s3.json")).unwrap() else {
            panic!()
        };
        assert_eq!(
            recs[0].items.as_ref().unwrap(),
            &vec![object(prod, "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY")]
        );
        assert_eq!(
            parse(&load("manual-sync-cell.json")).unwrap(),
            SyncEvent::Manual {
                request: Manual::Cell("prod-eu-west-1".into()),
                dry_run: false,
                scheduled: false
            }
        );
        assert_eq!(
            parse(&load("manual-sync-dry-run.json")).unwrap(),
            SyncEvent::Manual {
                request: Manual::Cell("prod-eu-west-1".into()),
                dry_run: true,
                scheduled: false
            }
        );
        assert_eq!(
            parse(&load("manual-sync-object.json")).unwrap(),
            SyncEvent::Manual {
                request: Manual::Object {
                    bucket: Some("acme-tfstate".into()),
                    key: prod.into()
                },
                dry_run: false,
                scheduled: false
            }
        );
        for (all, scheduled) in [("manual-sync-all.json", false), ("schedule-sync-all.json", true)] {
            assert_eq!(
                parse(&load(all)).unwrap(),
                SyncEvent::Manual {
                    request: Manual::All,
                    dry_run: false,
                    scheduled
                },
                "{all}"
            );
        }
        assert_eq!(
            parse(&load("manual-dashboard.json")).unwrap(),
            SyncEvent::Manual {
                request: Manual::Dashboard,
                dry_run: false,
                scheduled: false
            }
        );
        // The bootstrap function's CloudTrail call is not state-sync's: ignored, not an error.
        assert!(matches!(
            parse(&load("cloudtrail-create-cluster.json")).unwrap(),
            SyncEvent::Direct(items) if matches!(items.as_slice(), [SyncItem::Ignored { .. }])
        ));
        let deleted = SyncItem::ClusterDeleted(DeletedCluster {
            cluster: "prod-eu-west-1".into(),
            region: "eu-west-1".into(),
            account: Some("123456789012".into()),
        });
        assert_eq!(
            parse(&load("cloudtrail-delete-cluster.json")).unwrap(),
            SyncEvent::Direct(vec![deleted.clone()])
        );
        let SyncEvent::Sqs(records) = parse(&load("sqs-cloudtrail-delete-cluster.json")).unwrap() else {
            panic!("an SQS event")
        };
        assert_eq!(records[0].items, Ok(vec![deleted]));
    }

    #[test]
    fn a_delete_cluster_call_that_failed_is_ignored_and_one_without_a_name_is_invalid() {
        let mut e = load("cloudtrail-delete-cluster.json");
        e["detail"]["errorCode"] = json!("ResourceInUseException");
        assert!(matches!(
            parse(&e).unwrap(),
            SyncEvent::Direct(items) if matches!(items.as_slice(), [SyncItem::Ignored { reason, .. }] if reason.contains("ResourceInUseException"))
        ));
        let mut e = load("cloudtrail-delete-cluster.json");
        e["detail"]["requestParameters"] = json!({});
        e["detail"]["responseElements"] = Value::Null;
        let err = parse(&e).unwrap_err().to_string();
        assert!(err.contains("requestParameters.name"), "{err}");
        let mut e = load("cloudtrail-delete-cluster.json");
        e["detail"]["recipientAccountId"] = json!("12345");
        assert!(parse(&e).unwrap_err().to_string().contains("12-digit"));
    }

    #[test]
    fn manual_payloads() {
        assert_eq!(
            parse(&json!({"action": "sync", "cell": "c1"})).unwrap(),
            SyncEvent::Manual {
                request: Manual::Cell("c1".into()),
                dry_run: false,
                scheduled: false
            }
        );
        assert_eq!(
            parse(&json!({"action": "sync-all", "dry_run": true})).unwrap(),
            SyncEvent::Manual {
                request: Manual::All,
                dry_run: true,
                scheduled: false
            }
        );
        assert_eq!(
            parse(&json!({"action": "sync", "bucket": "b", "key": "k"})).unwrap(),
            SyncEvent::Manual {
                request: Manual::Object {
                    bucket: Some("b".into()),
                    key: "k".into()
                },
                dry_run: false,
                scheduled: false
            }
        );
        assert_eq!(
            parse(&json!({"action": "dashboard", "dry_run": true})).unwrap(),
            SyncEvent::Manual {
                request: Manual::Dashboard,
                dry_run: true,
                scheduled: false
            }
        );
        assert!(
            parse(&json!({"action": "dashboard", "cell": "c1"}))
                .unwrap_err()
                .to_string()
                .contains("takes no cell")
        );
        assert!(
            parse(&json!({"action": "dashboard", "scheduled": true}))
                .unwrap_err()
                .to_string()
                .contains("sync-all's only")
        );
        assert!(parse(&json!({"action": "sync"})).is_err());
        assert!(parse(&json!({"action": "bootstrap", "cluster": "x"})).is_err());
        assert!(
            parse(&json!({"action": "sync", "cell": "c", "surprise": 1}))
                .unwrap_err()
                .to_string()
                .contains("surprise")
        );
        assert!(parse(&json!({"hello": "world"})).is_err());
    }
}
