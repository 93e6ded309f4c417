//! The contract's secret rules against an outside lower bound: Yelp's detect-secrets, with its
//! default plugins, over the corpus `tests/fixtures/secrets/corpus.yaml`, each value presented
//! as a quoted YAML value beside its key (`key: "value"`), as a fleet repo would hold it.
//!
//! - every identifier of the corpus passes the contract, every secret is refused;
//! - every value detect-secrets flags is refused, or the corpus says why cellbridge differs
//!   (`difference:`), and a listed difference that no longer holds fails;
//! - the corpus holds secrets detect-secrets misses (why cellbridge has its own rules).
//!
//! cellbridge's verdict is the product's own: `metadata::validate_map`, the contract every
//! state passes through on `plan` and in state-sync.

use std::collections::BTreeMap;

use cellbridge::pure::metadata::{ContractError, validate_map};
use cellbridge_tests::process::{python, repo_root};

#[derive(serde::Deserialize)]
struct Corpus {
    identifiers: Vec<Entry>,
    secrets: Vec<Entry>,
}

#[derive(serde::Deserialize)]
struct Entry {
    key: String,
    value: String,
    /// Why cellbridge deliberately passes a value detect-secrets flags.
    #[serde(default)]
    difference: Option<String>,
}

#[test]
fn detect_secrets_is_a_lower_bound_of_the_contract() {
    let root = repo_root();
    let text = std::fs::read_to_string(root.join("tests/fixtures/secrets/corpus.yaml")).unwrap();
    let corpus: Corpus = serde_saphyr::from_str(&text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut entries = Vec::new();
    for (group, list) in [("identifier", &corpus.identifiers), ("secret", &corpus.secrets)] {
        for e in list {
            let file = format!("{group}-{:03}.yaml", entries.len());
            let quoted = serde_json::to_string(&e.value).unwrap();
            std::fs::write(dir.path().join(&file), format!("{}: {quoted}\n", e.key)).unwrap();
            entries.push((file, group, e));
        }
    }
    let out = std::process::Command::new(python())
        .arg(root.join("tests/secrets/scan.py"))
        .arg(dir.path())
        .output()
        .expect("runs detect-secrets");
    assert!(
        out.status.success(),
        "detect-secrets failed (is the test bed installed? `make testbed`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let flagged: BTreeMap<String, Vec<String>> = serde_json::from_slice(&out.stdout).unwrap();

    let mut wrong = Vec::new();
    let (mut differences, mut missed) = (0, 0);
    for (file, group, e) in &entries {
        let refused = match validate_map(&serde_json::json!({ e.key.as_str(): e.value })) {
            Ok(_) => false,
            Err(ContractError::SecretLooking { .. }) => true,
            Err(other) => panic!("corpus key `{}`: not a secret question: {other}", e.key),
        };
        let by_them = flagged.get(file);
        match (*group, refused) {
            ("identifier", true) => wrong.push(format!("identifier `{}` is refused", e.key)),
            ("secret", false) => wrong.push(format!("secret `{}` passes", e.key)),
            _ => {}
        }
        match (by_them, refused, &e.difference) {
            (Some(types), false, None) => wrong.push(format!(
                "detect-secrets flags `{}` ({}) and cellbridge passes it: refuse it, or give the corpus entry a `difference:` with its reason",
                e.key,
                types.join(", ")
            )),
            (Some(_), false, Some(_)) => differences += 1,
            (_, _, Some(_)) => wrong.push(format!(
                "`{}` lists a difference that no longer holds (detect-secrets flags it: {}, cellbridge refuses it: {refused})",
                e.key,
                by_them.is_some()
            )),
            (None, true, None) => missed += 1,
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        missed > 0,
        "the corpus should hold secrets detect-secrets misses (an empty user, a `!` in a password)"
    );
    println!(
        "{} values: detect-secrets flags {}, {differences} listed differences, {missed} secrets it misses that cellbridge refuses",
        entries.len(),
        flagged.len()
    );
}
