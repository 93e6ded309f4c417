//! Flux substitution parser: any text must end in a value or an error, never a panic, and the
//! scanner the check uses must agree with the substitution itself.
#![no_main]

use cellbridge::pure::envsubst::{self, EnvsubstError, Item};
use libfuzzer_sys::fuzz_target;

/// A few names set, so both the set and the unset paths run.
fn lookup(name: &str) -> Option<&'static str> {
    match name {
        "a" => Some("value-a"),
        "cluster_name" => Some("prod/eu-west-1"),
        "empty" => Some(""),
        "x" => Some("ÄbçΣ"),
        _ => None,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };

    let mut malformed = 0usize;
    let mut missing: Vec<String> = Vec::new();
    envsubst::scan(text, |item| match item {
        Item::Reference(r) => {
            assert!(r.line >= 1 && r.offset < text.len(), "reference out of range: {r:?}");
            assert_eq!(&text[r.offset..r.offset + 2], "${", "a reference starts at its ${{");
            if !r.has_default() && lookup(r.name).is_none() {
                missing.push(r.name.to_owned());
            }
        }
        Item::Malformed(m) => {
            assert!(m.line >= 1 && m.offset < text.len());
            malformed += 1;
        }
    });

    let strict = envsubst::substitute(text, lookup, envsubst::Dialect::NEWEST);
    let lax = envsubst::substitute(text, lookup, envsubst::Dialect::LAX);
    match &strict {
        // The scanner reports every expression the substitution refuses...
        Err(EnvsubstError::Parse { .. }) => assert!(malformed > 0, "parse error the scan missed"),
        // ...and every unset variable it trips on.
        Err(EnvsubstError::NotSet { name, .. }) => {
            assert!(missing.contains(name), "{name} missing but not reported by scan {missing:?}")
        }
        Err(EnvsubstError::NegativeLength { .. }) => unreachable!("the newest dialect counts a negative length from the end"),
        Ok(_) => assert!(missing.is_empty() || malformed > 0, "scan reports {missing:?}, strict substitution passed"),
    }
    if malformed == 0 && missing.is_empty() {
        assert!(strict.is_ok(), "scan clean but strict failed: {strict:?}");
    }
    // Without strict mode only malformed input fails.
    assert_eq!(lax.is_err(), matches!(strict, Err(EnvsubstError::Parse { .. })));
    if !text.contains('$') && !text.contains('\0') {
        assert_eq!(lax.as_deref().ok(), Some(text));
    }
});
