//! Events that trigger cluster-bootstrap, told apart by shape: the EventBridge "AWS API Call
//! via CloudTrail" event of EKS `CreateCluster` (directly, or as the body of SQS messages), or
//! the manual payload `{"action":"bootstrap","cluster":"...","region":"...",...}` (directly, or
//! as the body of the messages the daily sweep sends), or the function's own re-check of a
//! bootstrap's confirmation, `{"action":"confirm",...}` ([`Recheck`]), from its queue.

use aws_lambda_events::event::sqs::SqsEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What to bootstrap: the manual payload's fields, and what an event resolves to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Request {
    pub cluster: String,
    pub region: String,
    /// The cell, when the caller knows it better than the tag or the fleet repo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
    /// The AWS account the cluster is in: an event's (CloudTrail's `recipientAccountId`, else
    /// EventBridge's `account`), or the manual payload's. `None`: cellbridge's own account, or
    /// the account of the cell's merged `bootstrap_role_arn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// Re-apply even though Flux is installed.
    #[serde(default)]
    pub force: bool,
    /// List what would be applied; write nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// A re-check of a bootstrap's confirmation: the message cluster-bootstrap sends to its own
/// queue with a delay. It carries everything the check needs, so that a re-check reads no fleet
/// repo (no GitHub request): the cluster, how it was reached, what was applied (the controllers,
/// the Git secret and, on an operator cell, the FluxInstance and its sync objects' name), when
/// the apply finished and which check this is.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Recheck {
    pub cluster: String,
    pub region: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    pub cell: String,
    /// The role the bootstrap reached the cluster with; absent: cellbridge's own identity. Held
    /// to the same rule as the bootstrap's (the configured role of the account, or a role in
    /// the cluster's own account), never taken on the message's word alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// When the apply finished (RFC 3339): the grace and the deadline count from it.
    pub since: String,
    /// This check's number: the bootstrap's own is 1.
    pub check: u32,
    pub controllers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flux_instance: Option<String>,
    /// An operator cell's `spec.sync.name`: the name of the sync objects its FluxInstance made,
    /// read until the instance itself says otherwise. Absent: `flux-system`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<String>,
    /// The Git secret the bootstrap applied (`flux-system/<name>`): the only object a check that
    /// finds the credentials refused may apply again, when Secrets Manager holds other ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_secret: Option<String>,
}

impl Recheck {
    /// The message body: the payload with `"action": "confirm"`.
    pub fn to_body(&self) -> String {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("action".into(), Value::String("confirm".into()));
        }
        v.to_string()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootstrapEventError {
    #[error("event is not a cluster-bootstrap event: {reason}")]
    Unrecognized { reason: String },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
}

/// What one event (or one SQS message) asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootstrapItem {
    Cluster(Request),
    /// The function's own re-check of a bootstrap's confirmation.
    Recheck(Recheck),
    /// The next page of a sweep that ran out of time (`{"action":"sweep","from":...}` on the
    /// function's own queue): swept after the batch's clusters.
    Sweep {
        from: Option<String>,
    },
    /// Another API call, or a CreateCluster that failed: logged and skipped.
    Ignored {
        what: String,
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapSqsRecord {
    pub message_id: String,
    pub item: Result<BootstrapItem, BootstrapEventError>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootstrapEvent {
    /// An EventBridge event delivered directly.
    Direct(BootstrapItem),
    /// SQS messages, each answered on its own (partial batch response).
    Sqs(Vec<BootstrapSqsRecord>),
    Manual(Request),
    /// `{"action":"sweep"}` (the module's daily schedule, or by hand): delete the expired
    /// temporary access entries cellbridge left on the fleet's clusters (`bootstrap::sweep`);
    /// `from`: the page starts after that cluster (`<cell>/<region>/<cluster>`).
    Sweep {
        from: Option<String>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ManualPayload {
    action: String,
    cluster: Option<String>,
    region: Option<String>,
    #[serde(default)]
    cell: Option<String>,
    #[serde(default)]
    account: Option<String>,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    dry_run: bool,
}

fn invalid(what: &str, reason: impl Into<String>) -> BootstrapEventError {
    BootstrapEventError::Invalid {
        what: what.into(),
        reason: reason.into(),
    }
}

/// Tells the event apart and extracts the bootstrap request it carries.
pub fn parse(event: &Value) -> Result<BootstrapEvent, BootstrapEventError> {
    let obj = event.as_object().ok_or_else(|| BootstrapEventError::Unrecognized {
        reason: "not a JSON object".into(),
    })?;
    if obj.get("action").and_then(Value::as_str) == Some("sweep") {
        return Ok(BootstrapEvent::Sweep { from: sweep_from(obj)? });
    }
    if obj.contains_key("action") {
        return match parse_action(event)? {
            BootstrapItem::Cluster(r) => Ok(BootstrapEvent::Manual(r)),
            item => Ok(BootstrapEvent::Direct(item)),
        };
    }
    if let Some(records) = obj.get("Records").and_then(Value::as_array) {
        let from_sqs = records
            .first()
            .and_then(|r| r.get("eventSource"))
            .and_then(Value::as_str)
            == Some("aws:sqs");
        if !from_sqs {
            return Err(BootstrapEventError::Unrecognized {
                reason: "Records that are not SQS messages".into(),
            });
        }
        let sqs: SqsEvent = serde_json::from_value(event.clone()).map_err(|e| invalid("SQS event", e.to_string()))?;
        let records = sqs
            .records
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                let message_id = m.message_id.clone().unwrap_or_else(|| format!("record-{i}"));
                let what = format!("SQS message {message_id}");
                let item = match m.body.as_deref().map(serde_json::from_str::<Value>) {
                    None => Err(invalid(&what, "no body")),
                    Some(Err(e)) => Err(invalid(&what, format!("body is not JSON: {e}"))),
                    // The daily sweep's bootstraps and the re-checks are payloads with an action.
                    Some(Ok(body)) if body.get("action").is_some() => parse_action(&body),
                    Some(Ok(body)) => parse_eventbridge(&body),
                };
                BootstrapSqsRecord { message_id, item }
            })
            .collect();
        return Ok(BootstrapEvent::Sqs(records));
    }
    if obj.contains_key("detail-type") {
        return parse_eventbridge(event).map(BootstrapEvent::Direct);
    }
    Err(BootstrapEventError::Unrecognized {
        reason: "neither an EventBridge event, SQS messages nor a manual payload".into(),
    })
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(*p)?;
    }
    cur.as_str().filter(|s| !s.is_empty())
}

/// An EventBridge event: CloudTrail's record of `eks:CreateCluster`.
pub fn parse_eventbridge(v: &Value) -> Result<BootstrapItem, BootstrapEventError> {
    let what = "EventBridge event";
    let detail_type = str_at(v, &["detail-type"]).ok_or_else(|| invalid(what, "no detail-type"))?;
    if detail_type != "AWS API Call via CloudTrail" {
        return Ok(BootstrapItem::Ignored {
            what: detail_type.into(),
            reason: "not a CloudTrail API call".into(),
        });
    }
    let detail = v.get("detail").ok_or_else(|| invalid(what, "no detail"))?;
    let source = str_at(detail, &["eventSource"]).unwrap_or("");
    let name = str_at(detail, &["eventName"]).unwrap_or("");
    if source != "eks.amazonaws.com" || name != "CreateCluster" {
        return Ok(BootstrapItem::Ignored {
            what: format!("{source} {name}"),
            reason: "not eks:CreateCluster".into(),
        });
    }
    if let Some(code) = str_at(detail, &["errorCode"]) {
        // The call failed: there is no cluster to bootstrap.
        return Ok(BootstrapItem::Ignored {
            what: "eks:CreateCluster".into(),
            reason: format!("the call failed with {code}"),
        });
    }
    let cluster = str_at(detail, &["requestParameters", "name"])
        .or_else(|| str_at(detail, &["responseElements", "cluster", "name"]))
        .ok_or_else(|| invalid("CloudTrail CreateCluster", "no requestParameters.name"))?;
    let region = str_at(detail, &["awsRegion"])
        .or_else(|| str_at(v, &["region"]))
        .ok_or_else(|| invalid("CloudTrail CreateCluster", "no awsRegion"))?;
    // The account the cluster was created in. CloudTrail's `recipientAccountId` is the account
    // that received the call, whose resource it is; `userIdentity.accountId` is the caller's,
    // which differs when a principal of another account made the call, so it is never used
    // (https://docs.aws.amazon.com/awscloudtrail/latest/userguide/cloudtrail-event-reference-record-contents.html,
    // https://docs.aws.amazon.com/awscloudtrail/latest/userguide/cloudtrail-event-reference-user-identity.html).
    // EventBridge's `account` is the account the event came from, kept when a rule forwards it
    // to another account's bus (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-events-structure.html,
    // https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cross-account.html).
    let account = str_at(detail, &["recipientAccountId"])
        .or_else(|| str_at(v, &["account"]))
        .map(str::to_owned);
    if let Some(a) = &account
        && !is_account_id(a)
    {
        return Err(invalid(
            "CloudTrail CreateCluster",
            format!("account {a:?} is not a 12-digit AWS account id"),
        ));
    }
    Ok(BootstrapItem::Cluster(Request {
        cluster: cluster.into(),
        region: region.into(),
        cell: None,
        account,
        force: false,
        dry_run: false,
    }))
}

/// A 12-digit AWS account id.
pub fn is_account_id(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

/// The sweep payload's one optional field, `from` (a string).
fn sweep_from(obj: &serde_json::Map<String, Value>) -> Result<Option<String>, BootstrapEventError> {
    if let Some(extra) = obj.keys().find(|k| *k != "action" && *k != "from") {
        return Err(invalid(
            "sweep payload",
            format!("unknown field {extra:?} (the sweep takes only \"from\")"),
        ));
    }
    match obj.get("from") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(f)) if !f.is_empty() => Ok(Some(f.clone())),
        Some(other) => Err(invalid(
            "sweep payload",
            format!("\"from\" {other} is not a cluster's key (<cell>/<region>/<cluster>)"),
        )),
    }
}

/// A payload with an `action`: a bootstrap, a re-check, or a sweep's next page.
fn parse_action(event: &Value) -> Result<BootstrapItem, BootstrapEventError> {
    if let Some(obj) = event.as_object()
        && obj.get("action").and_then(Value::as_str) == Some("sweep")
    {
        return Ok(BootstrapItem::Sweep { from: sweep_from(obj)? });
    }
    if event.get("action").and_then(Value::as_str) == Some("confirm") {
        let mut body = event.clone();
        if let Some(o) = body.as_object_mut() {
            o.remove("action");
        }
        let r: Recheck = serde_json::from_value(body).map_err(|e| invalid("re-check payload", e.to_string()))?;
        if r.since.is_empty() || r.cell.is_empty() {
            return Err(invalid("re-check payload", "\"since\" and \"cell\" must not be empty"));
        }
        return Ok(BootstrapItem::Recheck(r));
    }
    parse_manual(event).map(BootstrapItem::Cluster)
}

fn parse_manual(event: &Value) -> Result<Request, BootstrapEventError> {
    let what = "manual payload";
    let p: ManualPayload = serde_json::from_value(event.clone()).map_err(|e| invalid(what, e.to_string()))?;
    if p.action != "bootstrap" {
        return Err(invalid(
            what,
            format!("unknown action {:?} (expected \"bootstrap\" or \"sweep\")", p.action),
        ));
    }
    let cluster = p
        .cluster
        .filter(|c| !c.is_empty())
        .ok_or_else(|| invalid(what, "\"bootstrap\" needs \"cluster\""))?;
    let region = p
        .region
        .filter(|r| !r.is_empty())
        .ok_or_else(|| invalid(what, "\"bootstrap\" needs \"region\""))?;
    let account = p.account.filter(|a| !a.is_empty());
    if let Some(a) = &account
        && !is_account_id(a)
    {
        return Err(invalid(
            what,
            format!("\"account\" {a:?} is not a 12-digit AWS account id"),
        ));
    }
    Ok(Request {
        cluster,
        region,
        cell: p.cell,
        account,
        force: p.force,
        dry_run: p.dry_run,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample(name: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../events")
            .join(name);
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
            .unwrap()
    }

    fn prod() -> Request {
        Request {
            cluster: "prod-eu-west-1".into(),
            region: "eu-west-1".into(),
            cell: None,
            account: None,
            force: false,
            dry_run: false,
        }
    }

    fn prod_in(account: &str) -> Request {
        Request {
            account: Some(account.into()),
            ..prod()
        }
    }

    #[test]
    fn cloudtrail_create_cluster_sample() {
        assert_eq!(
            parse(&sample("cloudtrail-create-cluster.json")).unwrap(),
            BootstrapEvent::Direct(BootstrapItem::Cluster(prod_in("123456789012")))
        );
    }

    #[test]
    fn sqs_cloudtrail_create_cluster_sample() {
        let BootstrapEvent::Sqs(records) = parse(&sample("sqs-cloudtrail-create-cluster.json")).unwrap() else {
            panic!("not SQS")
        };
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].message_id, "4b8d2f6a-0c1e-4a3b-9d5f-7e9a1c3b5d7f");
        assert_eq!(records[0].item, Ok(BootstrapItem::Cluster(prod_in("123456789012"))));
    }

    #[test]
    fn a_cross_account_create_cluster_names_the_clusters_account() {
        // Forwarded from account B's default bus to cellbridge's: `account` and
        // `recipientAccountId` are B's.
        let want = Request {
            cluster: "payments-eu-west-1".into(),
            ..prod_in("210987654321")
        };
        let e = sample("cloudtrail-create-cluster-cross-account.json");
        assert_eq!(
            parse(&e).unwrap(),
            BootstrapEvent::Direct(BootstrapItem::Cluster(want.clone()))
        );
        // The account that received the call decides, not the caller's (another account's
        // principal may create a cluster in B), nor the bus's.
        let mut e2 = e.clone();
        e2["detail"]["userIdentity"]["accountId"] = json!("123456789012");
        e2["account"] = json!("123456789012");
        assert_eq!(
            parse(&e2).unwrap(),
            BootstrapEvent::Direct(BootstrapItem::Cluster(want.clone()))
        );
        // Without recipientAccountId, EventBridge's account; with neither, none (home).
        let mut e3 = e.clone();
        e3["detail"].as_object_mut().unwrap().remove("recipientAccountId");
        assert_eq!(
            parse(&e3).unwrap(),
            BootstrapEvent::Direct(BootstrapItem::Cluster(want.clone()))
        );
        e3.as_object_mut().unwrap().remove("account");
        let BootstrapEvent::Direct(BootstrapItem::Cluster(r)) = parse(&e3).unwrap() else {
            panic!()
        };
        assert_eq!(r.account, None);
        let mut bad = e;
        bad["detail"]["recipientAccountId"] = json!("2109876543");
        assert!(matches!(parse(&bad), Err(BootstrapEventError::Invalid { .. })));
        // A manual payload may name the account.
        assert_eq!(
            parse(&json!({"action": "bootstrap", "cluster": "prod-eu-west-1", "region": "eu-west-1", "account": "210987654321"}))
                .unwrap(),
            BootstrapEvent::Manual(prod_in("210987654321"))
        );
        let err = parse(&json!({"action": "bootstrap", "cluster": "c", "region": "r", "account": "x"})).unwrap_err();
        assert!(err.to_string().contains("12-digit"), "{err}");
    }

    #[test]
    fn manual_bootstrap_samples() {
        assert_eq!(
            parse(&sample("manual-bootstrap.json")).unwrap(),
            BootstrapEvent::Manual(prod())
        );
        assert_eq!(
            parse(&sample("manual-bootstrap-dry-run.json")).unwrap(),
            BootstrapEvent::Manual(Request {
                dry_run: true,
                ..prod()
            })
        );
    }

    #[test]
    fn other_calls_and_failed_calls_are_ignored() {
        let mut e = sample("cloudtrail-create-cluster.json");
        e["detail"]["eventName"] = json!("DeleteCluster");
        assert!(matches!(
            parse(&e).unwrap(),
            BootstrapEvent::Direct(BootstrapItem::Ignored { .. })
        ));
        let mut e = sample("cloudtrail-create-cluster.json");
        e["detail"]["errorCode"] = json!("ResourceLimitExceededException");
        let BootstrapEvent::Direct(BootstrapItem::Ignored { reason, .. }) = parse(&e).unwrap() else {
            panic!()
        };
        assert!(reason.contains("ResourceLimitExceededException"));
    }

    #[test]
    fn bad_payloads_name_the_problem() {
        let e = parse(&json!({"action": "bootstrap", "cluster": "c"})).unwrap_err();
        assert!(e.to_string().contains("needs \"region\""), "{e}");
        let e = parse(&json!({"action": "bootstrap", "cluster": "c", "region": "r", "colour": 1})).unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
        let e = parse(&json!({"action": "sync", "cell": "c"})).unwrap_err();
        assert!(e.to_string().contains("unknown action"), "{e}");
        assert!(matches!(
            parse(&json!([1])),
            Err(BootstrapEventError::Unrecognized { .. })
        ));
        let sqs = json!({"Records": [{"messageId": "m1", "eventSource": "aws:sqs", "body": "{not json"}]});
        let BootstrapEvent::Sqs(r) = parse(&sqs).unwrap() else {
            panic!()
        };
        assert!(matches!(&r[0].item, Err(BootstrapEventError::Invalid { what, .. }) if what == "SQS message m1"));
    }

    #[test]
    fn sweep_sample_and_its_refusals() {
        assert_eq!(
            parse(&sample("sweep.json")).unwrap(),
            BootstrapEvent::Sweep { from: None }
        );
        // A confirmation's re-check from the function's own queue: read back as sent.
        let BootstrapEvent::Sqs(records) = parse(&sample("sqs-confirm.json")).unwrap() else {
            panic!("an SQS event")
        };
        let Ok(BootstrapItem::Recheck(r)) = &records[0].item else {
            panic!("a re-check: {records:?}")
        };
        assert_eq!(
            (r.cell.as_str(), r.check, r.controllers.len()),
            ("prod-eu-west-1", 2, 4)
        );
        let again: Value = serde_json::from_str(&r.to_body()).unwrap();
        let body = sample("sqs-confirm.json")["Records"][0]["body"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            again,
            serde_json::from_str::<Value>(&body).unwrap(),
            "the body it would send"
        );
        assert_eq!(
            parse(&json!({"action": "sweep"})).unwrap(),
            BootstrapEvent::Sweep { from: None }
        );
        // A page handed on through the function's own queue starts after its cursor.
        let next = json!({"Records": [{"messageId": "m1", "eventSource": "aws:sqs",
            "body": r#"{"action":"sweep","from":"a/eu-west-1/eks-a"}"#}]});
        let BootstrapEvent::Sqs(records) = parse(&next).unwrap() else {
            panic!("an SQS event")
        };
        assert_eq!(
            records[0].item,
            Ok(BootstrapItem::Sweep {
                from: Some("a/eu-west-1/eks-a".into())
            })
        );
        let err = parse(&json!({"action": "sweep", "from": 3})).unwrap_err();
        assert!(err.to_string().contains("\"from\""), "{err}");
        let err = parse(&json!({"action": "sweep", "cluster": "x"})).unwrap_err();
        assert!(err.to_string().contains("\"cluster\""), "{err}");
        let err = parse(&json!({"action": "swept"})).unwrap_err();
        assert!(err.to_string().contains("\"sweep\""), "{err}");
    }
}
