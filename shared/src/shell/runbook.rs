//! The operator runbook (`docs/runbook.md`) has an entry for everything a person can be told by
//! cellbridge: every `Outcome` a function counts, every outcome of a bootstrap's confirmation,
//! every state the fleet dashboard shows, and every anchor the dashboard links to. The alarms'
//! entries are held to the module by `tests/docs/test_runbook.py`.

#[cfg(test)]
mod tests {
    use crate::pure::bootstrap::confirm::Outcome as FluxOutcome;
    use crate::pure::bootstrap::record::FluxRecord;
    use crate::pure::status::{Flux, Kind, RUNBOOK_URL, runbook_anchor_of_flux, runbook_anchor_of_state};
    use crate::shell::metrics::Outcome;

    const RUNBOOK: &str = include_str!("../../../docs/runbook.md");

    /// The anchor GitHub gives a heading: lower case, punctuation but `-` and `_` dropped,
    /// spaces to `-` (as `tests/docs/mdread.py` computes it).
    fn anchor(title: &str) -> String {
        title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect()
    }

    /// The runbook's headings as anchors.
    fn anchors() -> Vec<String> {
        let mut in_code = false;
        RUNBOOK
            .lines()
            .filter(|l| {
                if l.trim_start().starts_with("```") {
                    in_code = !in_code;
                }
                !in_code && l.starts_with('#')
            })
            .map(|l| anchor(l.trim_start_matches('#').trim()))
            .collect()
    }

    fn assert_entry(anchor: &str, what: &str) {
        assert!(
            anchors().iter().any(|a| a == anchor),
            "docs/runbook.md has no entry for {what} (a heading whose anchor is #{anchor})"
        );
    }

    #[test]
    fn every_outcome_a_function_counts_has_a_runbook_entry() {
        for o in Outcome::ALL {
            assert_entry(
                &anchor(&format!("Outcome `{}`", o.as_str())),
                &format!("the outcome {o}"),
            );
        }
    }

    #[test]
    fn every_outcome_of_a_confirmation_has_a_runbook_entry() {
        for o in FluxOutcome::ALL {
            assert_entry(
                &anchor(&format!("Flux `{}`", o.as_str())),
                &format!("the Flux outcome {}", o.as_str()),
            );
        }
    }

    #[test]
    fn every_dashboard_state_and_link_has_a_runbook_entry() {
        assert!(RUNBOOK_URL.ends_with("/docs/runbook.md"), "{RUNBOOK_URL}");
        for k in Kind::ALL {
            assert_entry(
                &runbook_anchor_of_state(k),
                &format!("the dashboard state {}", k.label()),
            );
        }
        // Each Flux column a row links: every stuck outcome, and `unknown`.
        for o in FluxOutcome::ALL {
            let flux = Flux::Recorded(FluxRecord {
                outcome: o,
                since: std::time::SystemTime::UNIX_EPOCH,
            });
            match runbook_anchor_of_flux(&flux) {
                Some(a) => assert_entry(&a, &format!("the dashboard's Flux {}", o.as_str())),
                None => assert!(!flux.stuck(), "{}: stuck, and no link", o.as_str()),
            }
        }
        let unknown = Flux::Unknown {
            reason: "EKS DescribeCluster: AccessDenied".into(),
        };
        assert_entry(
            &runbook_anchor_of_flux(&unknown).unwrap(),
            "the dashboard's Flux unknown",
        );
    }

    /// A runbook whose entries were renamed fails: the check reads headings, not mere words.
    #[test]
    fn an_entry_is_a_heading_not_a_mention() {
        assert_eq!(anchor("Outcome `failed_final`"), "outcome-failed_final");
        assert_eq!(anchor("Dashboard `state missing`"), "dashboard-state-missing");
        assert!(!anchors().iter().any(|a| a == "outcome-no-such-outcome"));
    }
}
