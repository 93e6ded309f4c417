//! The contract's secret detector on arbitrary keys and values: a verdict, never a panic; and a
//! password planted in the user info of any URL, with any characters, is always refused.
#![no_main]

use cellbridge::pure::secrets;
use libfuzzer_sys::fuzz_target;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

/// What a URL's user info must escape to be read as one (WHATWG's userinfo set ends the user
/// at `:` and the authority at `/ ? # \`); everything else, `@ ! $ & ' ( ) * + , ; =` and `:` in
/// the password included, is planted as written.
const USER: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b':')
    .add(b'@')
    .add(b'/')
    .add(b'?')
    .add(b'#')
    .add(b'\\');
const PASSWORD: &AsciiSet = &CONTROLS.add(b' ').add(b'/').add(b'?').add(b'#').add(b'\\');

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\u{0}');
    let key = parts.next().unwrap_or_default();
    let value = parts.next().unwrap_or_default();
    let _ = secrets::shape(key, value);
    let _ = secrets::shape("value", &text);

    // A URL built from the rest, with a non-empty password in its user info.
    let scheme: String = parts
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        .collect();
    let scheme = if scheme.is_empty() { "postgres".to_owned() } else { scheme };
    let user = utf8_percent_encode(parts.next().unwrap_or_default(), USER).to_string();
    let password = parts.next().unwrap_or_default();
    let password = if password.is_empty() { "p" } else { password };
    let password = utf8_percent_encode(password, PASSWORD).to_string();
    let host: String = parts
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
        .collect();
    let host = if host.is_empty() { "db.internal".to_owned() } else { host };
    let tail = parts.next().unwrap_or_default();
    let prefix = parts.next().unwrap_or_default();
    let planted = format!("{prefix} {scheme}://{user}:{password}@{host}{tail}");
    assert!(
        secrets::shape("endpoint", &planted).is_some(),
        "a password in a URL's user info passed: {planted:?}"
    );

    // Any URL the `url` crate parses, given a password the way it writes one.
    if let Ok(mut url) = url::Url::parse(value)
        && url.set_password(Some(&password)).is_ok()
        && url.password().is_some_and(|p| !p.is_empty())
    {
        assert!(
            secrets::shape("endpoint", url.as_str()).is_some(),
            "a password in a URL's user info passed: {url}"
        );
    }
});
