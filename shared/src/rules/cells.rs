//! Which cell a cluster is, and how its cluster is reached: below both jobs, because state-sync
//! needs it too (an EKS `DeleteCluster` names a cluster, a destroyed state names a cell whose
//! cluster must be confirmed gone) and cluster-bootstrap started it.
//!
//! A cluster's cell is the tag `cellbridge.dev/cell`, else the cell whose `cell-metadata.yaml`
//! on the fleet repo's base branch names the cluster and its region ([`find_by_cluster`]). The
//! role that reaches a cell's cluster is [`role_of`] (the merged `bootstrap_role_arn`, or the
//! role `CELLBRIDGE_ACCOUNT_ROLES` gives the cell's account). [`probe`](crate::adapters::probe) asks EKS whether a
//! cell's cluster exists.

use std::collections::BTreeMap;

use crate::pure::configmap;
use crate::pure::events::bootstrap::is_account_id;
use crate::pure::fleet::{EntryKind, FleetError, FleetRead};

pub const CELL_TAG: &str = "cellbridge.dev/cell";

#[derive(Debug, thiserror::Error)]
pub enum CellError {
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error(transparent)]
    ConfigMap(#[from] configmap::ConfigMapError),
    #[error("cluster {cluster}: cell name {cell:?} (from {source_of}) is not a DNS-1123 label")]
    BadName {
        cluster: String,
        cell: String,
        source_of: &'static str,
    },
    #[error(
        "cluster {cluster} in {region} matches several cells in the fleet repo: {cells}; tag the cluster with {CELL_TAG}"
    )]
    Ambiguous {
        cluster: String,
        region: String,
        cells: String,
    },
}

/// A cell as the fleet repo knows it (its metadata is empty while its pull request is open).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub name: String,
    pub metadata: BTreeMap<String, String>,
}

impl Cell {
    pub fn bootstrap_role_arn(&self) -> Option<&str> {
        self.metadata
            .get("bootstrap_role_arn")
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }
}

pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The named cell, with its metadata when the base branch has it.
pub fn named(fleet: &dyn FleetRead, cluster: &str, name: &str, source_of: &'static str) -> Result<Cell, CellError> {
    if !is_dns_label(name) || name == "_template" {
        return Err(CellError::BadName {
            cluster: cluster.into(),
            cell: name.into(),
            source_of,
        });
    }
    let file = configmap::path_for(name);
    let metadata = match fleet.read_text(&file)? {
        Some(text) => configmap::parse(&text, &file)?.data,
        None => BTreeMap::new(),
    };
    Ok(Cell {
        name: name.into(),
        metadata,
    })
}

/// Scans `clusters/*/cell-metadata.yaml` for `cluster_name` and `aws_region`. A file that does
/// not parse is skipped with a warning: one broken cell must not stop every other bootstrap.
pub fn find_by_cluster(fleet: &dyn FleetRead, cluster: &str, region: &str) -> Result<Option<Cell>, CellError> {
    let mut found = Vec::new();
    for e in fleet.list("clusters")?.unwrap_or_default() {
        if e.kind != EntryKind::Dir || e.name.starts_with('_') || !is_dns_label(&e.name) {
            continue;
        }
        let file = configmap::path_for(&e.name);
        let Some(text) = fleet.read_text(&file)? else { continue };
        let data = match configmap::parse(&text, &file) {
            Ok(x) => x.data,
            Err(err) => {
                tracing::warn!(%file, error = %err, "skipping a cell-metadata file that does not parse");
                continue;
            }
        };
        if configmap::names_cluster(&data, cluster, region) {
            found.push(Cell {
                name: e.name.clone(),
                metadata: data,
            });
        }
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(CellError::Ambiguous {
            cluster: cluster.into(),
            region: region.into(),
            cells: found.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// `CELLBRIDGE_ACCOUNT_ROLES`: a JSON object `{"222222222222": "arn:aws:iam::222222222222:role/x"}`
/// (what the module writes) or `222222222222=arn:...,333333333333=arn:...`. Every key is a
/// 12-digit account id and every value an IAM role ARN in that same account: a role of another
/// account would reach clusters of an account the event did not name.
pub fn parse_account_roles(text: &str) -> Result<BTreeMap<String, String>, String> {
    let text = text.trim();
    let pairs: Vec<(String, String)> = if text.starts_with('{') {
        let map: BTreeMap<String, String> =
            serde_json::from_str(text).map_err(|e| format!("not a JSON object of strings: {e}"))?;
        map.into_iter().collect()
    } else {
        text.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                p.split_once('=')
                    .map(|(a, r)| (a.trim().to_owned(), r.trim().to_owned()))
                    .ok_or_else(|| format!("{p:?} is not account=role_arn"))
            })
            .collect::<Result<_, _>>()?
    };
    let mut out = BTreeMap::new();
    for (account, role) in pairs {
        if !is_account_id(&account) {
            return Err(format!("{account:?} is not a 12-digit AWS account id"));
        }
        match role_account(&role) {
            Some(a) if a == account => {}
            Some(a) => return Err(format!("role {role} is in account {a}, not {account}")),
            None => return Err(format!("{role:?} (for {account}) is not an IAM role ARN")),
        }
        if out.insert(account.clone(), role).is_some() {
            return Err(format!("account {account} is listed twice"));
        }
    }
    Ok(out)
}

/// The account of an IAM role ARN (`arn:<partition>:iam::<account>:role/<path/name>`).
pub fn role_account(arn: &str) -> Option<&str> {
    let mut parts = arn.splitn(6, ':');
    let ok = parts.next() == Some("arn") && parts.next().is_some_and(|p| !p.is_empty()) && parts.next() == Some("iam");
    let region = parts.next()?;
    let account = parts.next()?;
    let resource = parts.next()?;
    (ok && region.is_empty() && is_account_id(account) && resource.strip_prefix("role/").is_some_and(|n| !n.is_empty()))
        .then_some(account)
}

/// The role that reaches a cell's cluster, from the cell's merged metadata alone: the merged
/// `bootstrap_role_arn` names the account; an account of `CELLBRIDGE_ACCOUNT_ROLES`
/// (`account_roles`) is reached through its configured role, and a merged role that disagrees is
/// refused; no merged role: the role `account_roles` gives the cell's `aws_account_id`, else
/// cellbridge's own identity in its own account (`None`). A bootstrap run that has an event's
/// account decides with it first (`Bootstrapper::role_for`).
pub fn role_of(cell: &Cell, account_roles: &BTreeMap<String, String>) -> Result<Option<String>, RoleError> {
    let Some(merged) = cell.bootstrap_role_arn() else {
        // No merged role: the cell's `aws_account_id` (the contract's usual key) reaches a
        // mapped account through its configured role, as a run with that event's account does.
        return Ok(cell
            .metadata
            .get("aws_account_id")
            .and_then(|a| account_roles.get(a))
            .cloned());
    };
    let Some(account) = role_account(merged) else {
        return Err(RoleError::NotARole {
            cell: cell.name.clone(),
            role: merged.to_owned(),
        });
    };
    match account_roles.get(account) {
        Some(configured) if configured != merged => Err(RoleError::Differs {
            cell: cell.name.clone(),
            merged: merged.to_owned(),
            configured: configured.clone(),
            account: account.to_owned(),
        }),
        _ => Ok(Some(merged.to_owned())),
    }
}

/// Why the role that reaches a cell's cluster cannot be decided safely: the configuration
/// (`CELLBRIDGE_ACCOUNT_ROLES`), the cell's merged metadata and the event disagree, and a
/// disagreement is a mistake to correct, not to guess at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    #[error("cell {cell}'s merged bootstrap_role_arn {role:?} is not an IAM role ARN")]
    NotARole { cell: String, role: String },
    #[error(
        "cell {cell}'s merged bootstrap_role_arn {merged} differs from {configured}, the role CELLBRIDGE_ACCOUNT_ROLES gives account {account}; the configuration decides which role is assumed: make them agree (or remove bootstrap_role_arn from the cell's metadata)"
    )]
    Differs {
        cell: String,
        merged: String,
        configured: String,
        account: String,
    },
    #[error(
        "the cluster is in account {account}, but cell {cell}'s merged bootstrap_role_arn {role} is not a role of that account; set CELLBRIDGE_ACCOUNT_ROLES for {account} (the module's account_roles) and correct the cell's metadata"
    )]
    OtherAccount {
        account: String,
        cell: String,
        role: String,
    },
    #[error(
        "the event is from account {account}, which is neither cellbridge's own ({home}) nor in CELLBRIDGE_ACCOUNT_ROLES: add {account}'s bootstrap role there (the module's account_roles, e.g. {{\"{account}\" = \"arn:aws:iam::{account}:role/cellbridge-bootstrap\"}}); nothing was looked up"
    )]
    Unmapped { account: String, home: String },
    /// A cluster's tag names a cell whose merged role is not the one the cluster was reached
    /// with (`reached`: `None` for cellbridge's own identity).
    #[error(
        "tagged cell {cell}'s merged bootstrap_role_arn {merged} is not the role this cluster was reached with ({}); make the cell's metadata and CELLBRIDGE_ACCOUNT_ROLES agree",
        reached.as_deref().unwrap_or("cellbridge's own identity")
    )]
    NotReachedWith {
        cell: String,
        merged: String,
        reached: Option<String>,
    },
}

/// The account a cell's cluster is in, by its merged metadata alone: `aws_account_id`, else the
/// account of its `bootstrap_role_arn`; `None` when neither names one (cellbridge's own). The
/// two disagreeing is refused: which account to ask would be a guess.
pub fn cell_account(cell: &Cell) -> Result<Option<String>, RoleError> {
    let stated = cell.metadata.get("aws_account_id").filter(|a| !a.is_empty());
    let Some(merged) = cell.bootstrap_role_arn() else {
        return Ok(stated.cloned());
    };
    let Some(of_role) = role_account(merged) else {
        return Err(RoleError::NotARole {
            cell: cell.name.clone(),
            role: merged.to_owned(),
        });
    };
    match stated {
        Some(account) if account != of_role => Err(RoleError::OtherAccount {
            account: account.clone(),
            cell: cell.name.clone(),
            role: merged.to_owned(),
        }),
        _ => Ok(Some(of_role.to_owned())),
    }
}

/// `CELLBRIDGE_ACCOUNT_ROLES` from the environment (cluster-bootstrap's roles in other
/// accounts): empty when unset.
pub fn account_roles_from_env() -> Result<BTreeMap<String, String>, crate::shell::config::ConfigError> {
    crate::shell::config::account_role_map("CELLBRIDGE_ACCOUNT_ROLES", parse_account_roles)
}

/// `CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES` from the environment (state-sync's describe-only role in
/// each other account, the module's `account_describe_roles`; the same form as
/// `CELLBRIDGE_ACCOUNT_ROLES`): empty when unset.
pub fn describe_roles_from_env() -> Result<BTreeMap<String, String>, crate::shell::config::ConfigError> {
    crate::shell::config::account_role_map("CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES", parse_account_roles)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::fleet::MemFleet;

    fn cm(pairs: &[(&str, &str)]) -> String {
        let mut s =
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata:\n"
                .to_owned();
        for (k, v) in pairs {
            s.push_str(&format!("  {k}: \"{v}\"\n"));
        }
        s
    }

    #[test]
    fn a_cells_account_is_its_stated_one_or_its_roles_and_never_a_guess_between_two() {
        let cell = |pairs: &[(&str, &str)]| Cell {
            name: "a".into(),
            metadata: pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        };
        let role = "arn:aws:iam::222222222222:role/cellbridge-bootstrap";
        assert_eq!(cell_account(&cell(&[])).unwrap(), None);
        assert_eq!(
            cell_account(&cell(&[("aws_account_id", "333333333333")]))
                .unwrap()
                .as_deref(),
            Some("333333333333")
        );
        assert_eq!(
            cell_account(&cell(&[("bootstrap_role_arn", role)])).unwrap().as_deref(),
            Some("222222222222")
        );
        let both = cell(&[("aws_account_id", "222222222222"), ("bootstrap_role_arn", role)]);
        assert_eq!(cell_account(&both).unwrap().as_deref(), Some("222222222222"));
        let e = cell_account(&cell(&[
            ("aws_account_id", "333333333333"),
            ("bootstrap_role_arn", role),
        ]))
        .unwrap_err();
        assert!(
            e.to_string().contains("333333333333") && e.to_string().contains(role),
            "{e}"
        );
        assert!(matches!(
            cell_account(&cell(&[("bootstrap_role_arn", "cellbridge")])),
            Err(RoleError::NotARole { .. })
        ));
    }

    #[test]
    fn finds_the_cell_by_cluster_and_region() {
        let mut f = MemFleet::new();
        f.insert(
            "clusters/a/cell-metadata.yaml",
            cm(&[("cluster_name", "eks-a"), ("aws_region", "eu-west-1")]),
        );
        f.insert(
            "clusters/b/cell-metadata.yaml",
            cm(&[
                ("cluster_name", "eks-a"),
                ("aws_region", "us-east-1"),
                ("bootstrap_role_arn", "arn:aws:iam::1:role/x"),
            ]),
        );
        f.insert("clusters/c/cell-metadata.yaml", "kind: [");
        f.insert(
            "clusters/_template/cell-metadata.yaml",
            cm(&[("cluster_name", "eks-a")]),
        );
        assert_eq!(find_by_cluster(&f, "eks-a", "eu-west-1").unwrap().unwrap().name, "a");
        let b = find_by_cluster(&f, "eks-a", "us-east-1").unwrap().unwrap();
        assert_eq!(b.bootstrap_role_arn(), Some("arn:aws:iam::1:role/x"));
        assert_eq!(find_by_cluster(&f, "other", "eu-west-1").unwrap(), None);
    }

    #[test]
    fn refuses_names_that_are_not_cells() {
        let f = MemFleet::new();
        assert!(matches!(
            named(&f, "c", "../etc", "tag"),
            Err(CellError::BadName { .. })
        ));
        assert!(matches!(
            named(&f, "c", "_template", "tag"),
            Err(CellError::BadName { .. })
        ));
        assert!(named(&f, "c", "new-cell", "tag").unwrap().metadata.is_empty());
    }

    #[test]
    fn account_roles_are_account_ids_mapped_to_roles_in_the_same_account() {
        let b = "arn:aws:iam::222222222222:role/cells/bootstrap";
        let c = "arn:aws:iam::333333333333:role/bootstrap";
        let want: BTreeMap<String, String> =
            [("222222222222".into(), b.into()), ("333333333333".into(), c.into())].into();
        assert_eq!(
            parse_account_roles(&format!(r#"{{"222222222222":"{b}","333333333333":"{c}"}}"#)).unwrap(),
            want
        );
        assert_eq!(
            parse_account_roles(&format!(" 222222222222={b}, 333333333333={c} ,")).unwrap(),
            want
        );
        assert!(parse_account_roles("").unwrap().is_empty());
        assert!(parse_account_roles("{}").unwrap().is_empty());
        for (bad, says) in [
            (format!("22222222222={b}"), "12-digit"),
            (format!("333333333333={b}"), "in account 222222222222"),
            (
                "222222222222=arn:aws:iam::222222222222:user/x".to_owned(),
                "not an IAM role ARN",
            ),
            ("222222222222".to_owned(), "account=role_arn"),
            (format!("222222222222={b},222222222222={b}"), "twice"),
            (r#"{"222222222222": 1}"#.to_owned(), "JSON"),
        ] {
            let err = parse_account_roles(&bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        assert_eq!(
            role_account("arn:aws-cn:iam::222222222222:role/x"),
            Some("222222222222")
        );
        assert_eq!(role_account("arn:aws:sts::222222222222:assumed-role/x/s"), None);
    }
}
