//! What is safe to print: secret values in memory print as `[redacted]` in every `Debug` and
//! `Display`, so a stray `{:?}` in a log line or an error cannot leak them; the text of
//! transport errors, with their causes; and URLs in any text without the credentials of their
//! user info.

use std::fmt;

#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    pub fn new(value: T) -> Self {
        Secret(value)
    }

    /// The value itself; call only where it is handed to the party that needs it.
    pub fn expose(&self) -> &T {
        &self.0
    }

    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> From<T> for Secret<T> {
    fn from(value: T) -> Self {
        Secret(value)
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl<T> fmt::Display for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// The text with the credentials of every URL's user info cut: Flux reads a password from a
/// URL's user info (fluxcd/pkg `git/options.go`), and source-controller quotes the URL it failed
/// to clone in its messages. The user name stays (`https://flux:[redacted]@host/…`) unless it
/// stands alone on a scheme other than SSH, where it is the token itself
/// (`https://<token>@github.com/…` is a GitHub convention); an SSH user (`git@`) is an account,
/// never a secret.
pub fn userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let scheme_start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let scheme = &rest[scheme_start..at];
        let after = &rest[at + 3..];
        let end = after
            .find(|c: char| matches!(c, '/' | '?' | '#' | '\'' | '"' | '<' | '>' | '`') || c.is_whitespace())
            .unwrap_or(after.len());
        out.push_str(&rest[..at + 3]);
        match after[..end].rsplit_once('@') {
            Some((info, host)) => {
                match info.split_once(':') {
                    Some((user, _)) => {
                        out.push_str(user);
                        out.push_str(":[redacted]");
                    }
                    None if scheme.eq_ignore_ascii_case("ssh") => out.push_str(info),
                    None => out.push_str("[redacted]"),
                }
                out.push('@');
                out.push_str(host);
            }
            None => out.push_str(&after[..end]),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// An error with its causes (`top: cause: root cause`): transport errors of HTTP clients say
/// only "error sending request" at the top and keep "operation timed out" at the bottom.
/// Repeated text is dropped. These errors carry no request data, so nothing here is secret.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let t = words(inner);
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = inner.source();
    }
    s
}

/// An error's own text. The AWS SDK's error metadata, the root cause of every service error,
/// displays as a struct does (`Error { code: "Throttling", message: "..." }`): said as
/// `Throttling: ...` instead. (`aws_sdk_sts`'s is every SDK crate's: aws-smithy-types'.)
fn words(e: &(dyn std::error::Error + 'static)) -> String {
    use aws_sdk_sts::error::ErrorMetadata;
    match e.downcast_ref::<ErrorMetadata>() {
        Some(m) => [m.code(), m.message()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(": "),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_chain_ends_with_its_root_cause() {
        #[derive(Debug)]
        struct Top(std::io::Error);
        impl fmt::Display for Top {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("client error (SendRequest)")
            }
        }
        impl std::error::Error for Top {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Top(std::io::Error::new(std::io::ErrorKind::TimedOut, "operation timed out"));
        assert_eq!(chain(&e), "client error (SendRequest): operation timed out");
    }

    #[test]
    fn an_aws_error_code_and_message_are_said_in_words() {
        #[derive(Debug)]
        struct Unhandled(aws_sdk_sts::error::ErrorMetadata);
        impl fmt::Display for Unhandled {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("unhandled error (Throttling)")
            }
        }
        impl std::error::Error for Unhandled {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let meta = aws_sdk_sts::error::ErrorMetadata::builder()
            .code("Throttling")
            .message("Rate exceeded")
            .build();
        assert_eq!(
            chain(&Unhandled(meta)),
            "unhandled error (Throttling): Throttling: Rate exceeded"
        );
    }

    #[test]
    fn a_url_in_text_loses_the_credentials_of_its_user_info() {
        assert_eq!(
            userinfo("unable to clone 'https://flux:ghp_abc@github.com/o/fleet': authentication required"),
            "unable to clone 'https://flux:[redacted]@github.com/o/fleet': authentication required"
        );
        assert_eq!(
            userinfo("a https://ghp_abc@github.com/o/f and http://u:p@h:8080?x then ssh://git@github.com/o/f"),
            "a https://[redacted]@github.com/o/f and http://u:[redacted]@h:8080?x then ssh://git@github.com/o/f"
        );
        assert_eq!(userinfo("no url, user@host: fine"), "no url, user@host: fine");
        assert_eq!(userinfo("ends at https://a:b@c"), "ends at https://a:[redacted]@c");
    }

    #[test]
    fn never_prints_the_value() {
        let s = Secret::new("hunter2".to_owned());
        assert_eq!(format!("{s:?} {s}"), "[redacted] [redacted]");
        assert_eq!(s.expose(), "hunter2");
    }
}
