//! The auto-merge paragraph of a pull request's body: written in place between its markers,
//! kept when a run did nothing new, added before the record line when the body has none.

use super::{BLOCK_CLOSE, BLOCK_OPEN, Done, Run};

/// `body` with the paragraph of `run`: a run that did nothing keeps the paragraph an earlier run
/// left while it states the same verdict, so that what that run did (turned auto-merge off)
/// stays said and a replay writes nothing. Only text for people is kept this way; no decision is
/// read back from it.
pub(in crate::rules) fn with_run_block(body: &str, run: &Run) -> String {
    let verdict = run.eligibility.describe();
    if run.done == Done::Nothing
        && run.note.is_none()
        && let Some(existing) = block_of(body)
        && existing.trim_start().starts_with(verdict.trim_end())
    {
        return body.to_owned();
    }
    with_block(body, &run.block())
}

fn block_of(body: &str) -> Option<&str> {
    let a = body.find(BLOCK_OPEN)? + BLOCK_OPEN.len();
    let b = body[a..].find(BLOCK_CLOSE)? + a;
    Some(&body[a..b])
}

/// `body` with its auto-merge paragraph replaced by `block` (added before the marker line when
/// it has none).
pub(in crate::rules) fn with_block(body: &str, block: &str) -> String {
    if let (Some(a), Some(b)) = (body.find(BLOCK_OPEN), body.find(BLOCK_CLOSE))
        && a < b
    {
        return format!("{}{block}{}", &body[..a], &body[b + BLOCK_CLOSE.len()..]);
    }
    match body.rfind("<!-- cellbridge:") {
        Some(i) => format!("{}\n\n{block}\n{}", body[..i].trim_end(), &body[i..]),
        None => format!("{}\n\n{block}\n", body.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::github::MergeMethod;
    use crate::pure::automerge::Eligibility;
    use crate::pure::record::field as marker;

    fn run(eligible: bool, note: Option<&str>) -> Run {
        Run {
            eligibility: Eligibility {
                eligible,
                reasons: if eligible {
                    vec![]
                } else {
                    vec!["Files other than `a` change: `b`.".into(), "This is a new cell.".into()]
                },
                opted_in_by: Some("prod-*".into()),
            },
            coverage: "prod-*".into(),
            cell: "prod-eu-west-1".into(),
            covered: true,
            was_covered: true,
            method: MergeMethod::Merge,
            done: Done::Nothing,
            detail: None,
            note: note.map(str::to_owned),
            merge: None,
            ours: false,
            behind: false,
            updated: false,
            node_id: None,
            wait: None,
        }
    }

    #[test]
    fn the_paragraph_is_rewritten_in_place_and_the_persons_text_kept() {
        for (eligible, note) in [
            (true, None),
            (true, Some("GitHub does not allow auto-merge in this repository.")),
            (false, None),
            (false, Some("Auto-merge was turned on by `alice`.")),
        ] {
            let r = run(eligible, note);
            let body = format!(
                "values\n\n{}\n\nA reviewer's note.\n<!-- cellbridge:digest=d{} -->\n",
                r.block(),
                r.marker_fields()
            );
            assert_eq!(with_block(&body, &r.block()), body);
            let other = run(!eligible, None);
            let rewritten = with_block(&body, &other.block());
            assert!(
                rewritten.contains(&other.block()) && rewritten.contains("A reviewer's note."),
                "{rewritten}"
            );
            assert_eq!(
                rewritten.matches("<!-- cellbridge-auto-merge -->").count(),
                1,
                "{rewritten}"
            );
            if let Some(n) = note {
                assert!(!rewritten.contains(n), "{rewritten}");
            }
        }
    }

    #[test]
    fn a_body_without_the_paragraph_gets_it_before_the_marker_line() {
        let r = run(true, None);
        let body = with_block("values\n<!-- cellbridge:digest=d -->\n", &r.block());
        assert!(body.starts_with("values\n\n<!-- cellbridge-auto-merge -->"), "{body}");
        assert!(
            body.ends_with("<!-- /cellbridge-auto-merge -->\n<!-- cellbridge:digest=d -->\n"),
            "{body}"
        );
        assert_eq!(marker(&body, "digest").as_deref(), Some("d"));
    }
}
