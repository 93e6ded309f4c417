//! What is safe to print: secret values in memory print as `[redacted]` in every `Debug` and
//! `Display`, so a stray `{:?}` in a log line or an error cannot leak them; and the text of
//! transport errors, with their causes.

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
    fn never_prints_the_value() {
        let s = Secret::new("hunter2".to_owned());
        assert_eq!(format!("{s:?} {s}"), "[redacted] [redacted]");
        assert_eq!(s.expose(), "hunter2");
    }
}
