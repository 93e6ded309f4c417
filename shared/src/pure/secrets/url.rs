//! URLs that carry a credential: a password in the user info (`postgres://app:pw@db:5432/x`,
//! `redis://:pw@cache:6379`, any scheme), and webhook URLs that are credentials themselves
//! (Slack, Discord, Microsoft Teams).
//!
//! The user info is read the way WHATWG URL parsers and database drivers read it: everything
//! from `://` to the last `@` is the user info when what comes before its first `:` could be a
//! user name. A password may hold any character, `@`, `!` and `:` included; an empty user name
//! counts (`redis://:pw@host`), and `user@host` alone is an account, not a secret. A `:` followed
//! by digits and then `/`, `?`, `#` or the end of a word is a port, not a password: there the
//! `@` belongs to the path (`https://registry:5000/v2/@sha`).

const USERINFO: &str = "its value is a URL with a password in its user info";

pub(super) fn secret(value: &str) -> Option<&'static str> {
    for (at, _) in value.match_indices("://") {
        let rest = &value[at + 3..];
        if userinfo_password(rest) {
            return Some(USERINFO);
        }
        let start = value.as_bytes()[..at]
            .iter()
            .rposition(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
            .map_or(0, |i| i + 1);
        let end = rest.find(char::is_whitespace).map_or(value.len(), |i| at + 3 + i);
        if let Ok(url) = ::url::Url::parse(&value[start..end]) {
            if url.password().is_some_and(|p| !p.is_empty()) {
                return Some(USERINFO);
            }
            if let Some(why) = webhook(&url) {
                return Some(why);
            }
        }
    }
    None
}

/// `rest` is what follows `://`.
fn userinfo_password(rest: &str) -> bool {
    let Some(at) = rest.rfind('@') else { return false };
    let info = &rest[..at];
    let Some((user, pass)) = info.split_once(':') else {
        return false;
    };
    // A `/`, `?` or `#` before the colon: the colon is past the host, in the path or query.
    if user.contains(['/', '?', '#', '\\']) || user.contains(char::is_whitespace) || pass.is_empty() {
        return false;
    }
    let digits = pass.bytes().take_while(u8::is_ascii_digit).count();
    let after = &pass[digits..];
    // `host:8443/path/@x` or `host:/x@y`: a port (or none), and the `@` is in the path.
    let port = after.starts_with(['/', '?', '#', '\\']) || (digits > 0 && after.starts_with(char::is_whitespace));
    !port
}

/// Incoming webhooks: whoever has the URL can post.
fn webhook(url: &::url::Url) -> Option<&'static str> {
    let host = url.host_str()?.to_ascii_lowercase();
    let path = url.path();
    let under = |prefix: &str| path.len() > prefix.len() && path.starts_with(prefix);
    if matches!(host.as_str(), "hooks.slack.com" | "hooks.slack-gov.com")
        && (under("/services/") || under("/workflows/") || under("/triggers/"))
    {
        return Some("its value is a Slack webhook URL, which is a credential itself");
    }
    let discord = ["discord.com", "discordapp.com"]
        .iter()
        .any(|d| host == *d || host.ends_with(&format!(".{d}")));
    if discord && path.starts_with("/api/") && path.contains("/webhooks/") {
        return Some("its value is a Discord webhook URL, which is a credential itself");
    }
    let teams = (host.ends_with(".webhook.office.com") && under("/webhookb2/"))
        || (matches!(host.as_str(), "outlook.office.com" | "outlook.office365.com")
            && (under("/webhook/") || under("/webhookb2/")));
    if teams {
        return Some("its value is a Microsoft Teams webhook URL, which is a credential itself");
    }
    None
}
