//! One error model for both functions and the command line. Every error type says once, in its
//! `Classify` impl, what its failure means for the caller; the Lambda `errorType`, the command
//! line's exit code and whether an SQS record goes back to the queue all derive from that class
//! (docs/outcomes.md, "Outcomes").

use serde::Serialize;

/// What a failure means for whoever asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The event, payload or input cannot be used as it is: the same input will fail again.
    InvalidInput,
    /// A fault worth another try: throttling, a 5xx, no answer in time, a lost race.
    Retryable,
    /// Failed until someone changes something: credentials, permissions, a refused state, a
    /// cluster that is no cell.
    Final,
}

impl Class {
    /// The command line's exit code for a run that failed this way (0 and 1 are outcomes of a
    /// run that worked: done, and the check or the schema rule failed).
    pub const fn exit_code(self) -> u8 {
        match self {
            Class::InvalidInput | Class::Final => 2,
            Class::Retryable => 3,
        }
    }

    /// Its name in an answer (`"class"`) and a log line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::InvalidInput => "invalid_input",
            Class::Retryable => "retryable",
            Class::Final => "final",
        }
    }

    /// The `errorType` of a failed Lambda invocation (shown in the console, CloudWatch and the
    /// asynchronous invocation's destination), instead of a Rust type name. The handlers
    /// return only retryable failures as Lambda errors (`super::lambda::answer`); final and
    /// invalid-input ones are answered as handled results.
    pub const fn error_type(self) -> &'static str {
        match self {
            Class::InvalidInput => "cellbridge.InvalidEvent",
            Class::Retryable => "cellbridge.Retryable",
            Class::Final => "cellbridge.Failed",
        }
    }

    /// The class of several failures answered as one: retryable only when every one of them
    /// is (a retry of the rest cannot help), else the first that is not.
    pub fn of_all(classes: impl IntoIterator<Item = Class>) -> Option<Class> {
        let mut out = None;
        for c in classes {
            out = match (out, c) {
                (None, c) => Some(c),
                (Some(Class::Retryable), c) => Some(c),
                (Some(first), _) => Some(first),
            };
        }
        out
    }
}

/// Implemented once per error type: where the class of each of its failures is decided.
pub trait Classify {
    fn class(&self) -> Class;

    /// Whether the same request may succeed later.
    fn retryable(&self) -> bool {
        self.class() == Class::Retryable
    }
}

impl Classify for super::config::ConfigError {
    fn class(&self) -> Class {
        Class::Final
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_table_of_outcomes() {
        let rows: Vec<(Class, u8, &str)> = [Class::InvalidInput, Class::Retryable, Class::Final]
            .into_iter()
            .map(|c| (c, c.exit_code(), c.error_type()))
            .collect();
        assert_eq!(
            rows,
            [
                (Class::InvalidInput, 2, "cellbridge.InvalidEvent"),
                (Class::Retryable, 3, "cellbridge.Retryable"),
                (Class::Final, 2, "cellbridge.Failed"),
            ]
        );
    }

    #[test]
    fn several_failures_are_retryable_only_when_all_are() {
        use Class::*;
        assert_eq!(Class::of_all([]), None);
        assert_eq!(Class::of_all([Retryable, Retryable]), Some(Retryable));
        assert_eq!(Class::of_all([Retryable, Final, InvalidInput]), Some(Final));
        assert_eq!(Class::of_all([InvalidInput, Retryable]), Some(InvalidInput));
    }
}
