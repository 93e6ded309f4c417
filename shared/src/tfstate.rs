//! Reading Terraform state (format version 4) as a stream.
//!
//! Only the top-level scalars and `outputs` are kept. `resources` — which can be hundreds of
//! megabytes — is skipped token by token as it streams past, so peak memory does not grow with
//! the size of the state.

use std::collections::BTreeMap;
use std::io::Read;

use serde::Deserialize;

/// Where a state came from, for error messages: a file path or `s3://bucket/key?versionId=..`.
pub type Origin = String;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{origin}: not JSON at byte {offset}: {reason}")]
    NotJson {
        origin: Origin,
        offset: u64,
        reason: String,
    },
    #[error("{origin}: truncated: the state ends at byte {offset} in the middle of the document")]
    Truncated { origin: Origin, offset: u64 },
    #[error(
        "{origin}: unsupported state format version {version} (cellbridge reads version 4, written by Terraform 0.12 and later)"
    )]
    UnsupportedVersion { origin: Origin, version: u64 },
    #[error("{origin}: not a Terraform state: {reason}")]
    NotAState { origin: Origin, reason: String },
    #[error("{origin}: reading failed: {source}")]
    Io {
        origin: Origin,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = StateError> = std::result::Result<T, E>;

/// One root module output. `value` is kept as JSON; only `cell_metadata` is ever written out.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Output {
    pub value: serde_json::Value,
    #[serde(default)]
    pub sensitive: bool,
    #[serde(default, rename = "type")]
    pub value_type: Option<serde_json::Value>,
}

/// What cellbridge needs from a state: its identity, ordering and outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct StateOutputs {
    pub serial: u64,
    pub lineage: String,
    pub terraform_version: String,
    pub outputs: BTreeMap<String, Output>,
    /// Whether `resources` lists any: a state with neither outputs nor resources is what
    /// `terraform destroy` leaves.
    pub has_resources: bool,
}

/// Reads a state from `reader` (a file, or the body of an S3 object as it downloads).
/// `origin` names it in every error.
///
/// The top-level object is walked by a small validating scanner: the few values cellbridge
/// keeps are captured and handed to serde_json; everything else (`resources`, `check_results`)
/// is checked for well-formedness and dropped as it streams past, a buffer at a time. That
/// keeps memory flat and runs at memory speed, where a full parse would build every resource.
pub fn read_state(reader: impl Read, origin: &str) -> Result<StateOutputs> {
    let mut sc = Scanner::new(reader, origin);
    let top = sc.top_level()?;
    let version = top.version.ok_or_else(|| sc.not_a_state("no \"version\" field"))?;
    if version != 4 {
        return Err(StateError::UnsupportedVersion {
            origin: origin.into(),
            version,
        });
    }
    Ok(StateOutputs {
        serial: top.serial.ok_or_else(|| sc.not_a_state("no \"serial\" field"))?,
        lineage: top.lineage.ok_or_else(|| sc.not_a_state("no \"lineage\" field"))?,
        terraform_version: top.terraform_version.unwrap_or_default(),
        outputs: top.outputs.unwrap_or_default(),
        has_resources: top.resources.unwrap_or(false),
    })
}

/// Reads a state file from disk.
pub fn read_state_file(path: &std::path::Path) -> Result<StateOutputs> {
    let origin = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| StateError::Io {
        origin: origin.clone(),
        source: e,
    })?;
    read_state(file, &origin)
}

#[derive(Default)]
struct TopLevel {
    version: Option<u64>,
    serial: Option<u64>,
    lineage: Option<String>,
    terraform_version: Option<String>,
    outputs: Option<BTreeMap<String, Output>>,
    resources: Option<bool>,
}

const BUF: usize = 64 * 1024;
/// A value kept for serde_json larger than this is not a state cellbridge should trust.
const MAX_CAPTURE: usize = 16 * 1024 * 1024;

/// Bytes that end a run of plain string content: the quote, a backslash, or a control
/// character (JSON forbids raw ones inside strings).
static STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

struct Scanner<'o, R> {
    reader: R,
    origin: &'o str,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    /// Offset in the stream of `buf[0]`.
    base: u64,
    /// When set, every consumed byte is appended here (a value being kept)...
    capture: Option<Vec<u8>>,
    /// ...from this index of `buf` on.
    cap_start: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Frame {
    Object,
    Array,
}

impl<'o, R: Read> Scanner<'o, R> {
    fn new(reader: R, origin: &'o str) -> Self {
        Scanner {
            reader,
            origin,
            buf: vec![0; BUF].into_boxed_slice(),
            pos: 0,
            len: 0,
            base: 0,
            capture: None,
            cap_start: 0,
        }
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    fn not_a_state(&self, reason: &str) -> StateError {
        StateError::NotAState {
            origin: self.origin.into(),
            reason: reason.into(),
        }
    }

    fn syntax(&self, reason: impl Into<String>) -> StateError {
        self.syntax_at(self.offset(), reason)
    }

    fn syntax_at(&self, offset: u64, reason: impl Into<String>) -> StateError {
        StateError::NotJson {
            origin: self.origin.into(),
            offset,
            reason: reason.into(),
        }
    }

    fn truncated(&self) -> StateError {
        StateError::Truncated {
            origin: self.origin.into(),
            offset: self.offset(),
        }
    }

    /// Flushes captured bytes of the current buffer and reads the next one; false at EOF.
    fn refill(&mut self) -> Result<bool> {
        if let Some(c) = &mut self.capture {
            c.extend_from_slice(&self.buf[self.cap_start..self.len]);
        }
        self.base += self.len as u64;
        self.pos = 0;
        self.len = 0;
        self.cap_start = 0;
        loop {
            match self.reader.read(&mut self.buf) {
                Ok(n) => {
                    self.len = n;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(StateError::Io {
                        origin: self.origin.into(),
                        source: e,
                    });
                }
            }
        }
    }

    /// The next byte without consuming it; `None` at EOF.
    fn peek(&mut self) -> Result<Option<u8>> {
        if self.pos == self.len && !self.refill()? {
            return Ok(None);
        }
        Ok(Some(self.buf[self.pos]))
    }

    fn next_byte(&mut self) -> Result<u8> {
        let b = self.peek()?.ok_or_else(|| self.truncated())?;
        self.pos += 1;
        Ok(b)
    }

    fn skip_ws(&mut self) -> Result<Option<u8>> {
        loop {
            while self.pos < self.len {
                match self.buf[self.pos] {
                    b' ' | b'\n' | b'\r' | b'\t' => self.pos += 1,
                    b => return Ok(Some(b)),
                }
            }
            if !self.refill()? {
                return Ok(None);
            }
        }
    }

    fn expect_after_ws(&mut self, want: u8, what: &str) -> Result<()> {
        match self.skip_ws()? {
            Some(b) if b == want => {
                self.pos += 1;
                Ok(())
            }
            Some(_) => Err(self.syntax(format!("expected {what}"))),
            None => Err(self.truncated()),
        }
    }

    /// After the opening quote: consumes the string through its closing quote.
    fn string_body(&mut self) -> Result<()> {
        loop {
            let rest = &self.buf[self.pos..self.len];
            match rest.iter().position(|b| STRING_STOP[*b as usize]) {
                None => {
                    self.pos = self.len;
                    if !self.refill()? {
                        return Err(self.truncated());
                    }
                }
                Some(i) => {
                    self.pos += i;
                    match self.next_byte()? {
                        b'"' => return Ok(()),
                        b'\\' => match self.next_byte()? {
                            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                            b'u' => {
                                for _ in 0..4 {
                                    if !self.next_byte()?.is_ascii_hexdigit() {
                                        return Err(self.syntax_at(self.offset() - 1, "invalid \\u escape in string"));
                                    }
                                }
                            }
                            _ => return Err(self.syntax_at(self.offset() - 1, "invalid escape in string")),
                        },
                        _ => return Err(self.syntax_at(self.offset() - 1, "control character in string")),
                    }
                }
            }
        }
    }

    /// A number, `true`, `false` or `null`; the leading byte is not consumed yet.
    fn scalar(&mut self, first: u8) -> Result<()> {
        let start = self.offset();
        if let Some(word) = match first {
            b't' => Some(&b"true"[..]),
            b'f' => Some(&b"false"[..]),
            b'n' => Some(&b"null"[..]),
            _ => None,
        } {
            for &w in word {
                if self.next_byte()? != w {
                    return Err(self.syntax_at(start, "invalid literal"));
                }
            }
            return Ok(());
        }
        if !(first == b'-' || first.is_ascii_digit()) {
            return Err(self.syntax("expected a value"));
        }
        // Numbers are checked loosely here (digits, sign, dot, exponent); kept ones are parsed
        // again by serde_json, skipped ones are never used.
        self.pos += 1;
        while let Some(b) = self.peek()? {
            if b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-') {
                self.pos += 1;
            } else {
                break;
            }
        }
        Ok(())
    }

    /// Consumes one whole JSON value, checking its structure.
    /// The elements of an array whose `[` was consumed and which is not empty, up to and
    /// including its `]`.
    fn rest_of_array(&mut self) -> Result<()> {
        loop {
            self.value()?;
            match self.skip_ws()?.ok_or_else(|| self.truncated())? {
                b',' => self.pos += 1,
                b']' => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.syntax("expected `,` or `]`")),
            }
        }
    }

    fn value(&mut self) -> Result<()> {
        let mut stack: Vec<Frame> = Vec::new();
        loop {
            // Expecting a value.
            let b = self.skip_ws()?.ok_or_else(|| self.truncated())?;
            match b {
                b'{' => {
                    self.pos += 1;
                    if self.skip_ws()? == Some(b'}') {
                        self.pos += 1;
                    } else {
                        stack.push(Frame::Object);
                        self.object_key()?;
                        continue;
                    }
                }
                b'[' => {
                    self.pos += 1;
                    if self.skip_ws()? == Some(b']') {
                        self.pos += 1;
                    } else {
                        stack.push(Frame::Array);
                        continue;
                    }
                }
                b'"' => {
                    self.pos += 1;
                    self.string_body()?;
                }
                other => self.scalar(other)?,
            }
            // After a value: close containers or move to the next element.
            loop {
                let Some(&frame) = stack.last() else { return Ok(()) };
                match (self.skip_ws()?.ok_or_else(|| self.truncated())?, frame) {
                    (b',', Frame::Object) => {
                        self.pos += 1;
                        self.object_key()?;
                        break;
                    }
                    (b',', Frame::Array) => {
                        self.pos += 1;
                        break;
                    }
                    (b'}', Frame::Object) | (b']', Frame::Array) => {
                        self.pos += 1;
                        stack.pop();
                    }
                    (_, Frame::Object) => return Err(self.syntax("expected `,` or `}`")),
                    (_, Frame::Array) => return Err(self.syntax("expected `,` or `]`")),
                }
            }
        }
    }

    /// `"key" :` inside an object.
    fn object_key(&mut self) -> Result<()> {
        match self.skip_ws()? {
            Some(b'"') => {
                self.pos += 1;
                self.string_body()?;
            }
            Some(_) => return Err(self.syntax("expected a string key")),
            None => return Err(self.truncated()),
        }
        self.expect_after_ws(b':', "`:`")
    }

    /// Consumes one value and returns its bytes.
    fn captured_value(&mut self) -> Result<(u64, Vec<u8>)> {
        self.skip_ws()?.ok_or_else(|| self.truncated())?;
        let start = self.offset();
        self.capture = Some(Vec::new());
        self.cap_start = self.pos;
        let r = self.value();
        let mut bytes = self.capture.take().expect("capturing");
        r?;
        bytes.extend_from_slice(&self.buf[self.cap_start..self.pos]);
        if bytes.len() > MAX_CAPTURE {
            return Err(self.not_a_state("a top-level value cellbridge reads is larger than 16 MiB"));
        }
        Ok((start, bytes))
    }

    fn decode<T: serde::de::DeserializeOwned>(&self, start: u64, bytes: &[u8], field: &str) -> Result<T> {
        serde_json::from_slice(bytes).map_err(|e| match e.classify() {
            serde_json::error::Category::Data => {
                self.not_a_state(&format!("\"{field}\": {}", strip_position(&e.to_string())))
            }
            _ => self.syntax_at(
                start + offset_of(bytes, e.line(), e.column()),
                strip_position(&e.to_string()),
            ),
        })
    }

    fn top_level(&mut self) -> Result<TopLevel> {
        match self.skip_ws()? {
            Some(b'{') => self.pos += 1,
            Some(_) => return Err(self.not_a_state("the document is not a JSON object")),
            None if self.offset() == 0 => return Err(self.not_a_state("the file is empty")),
            None => return Err(self.truncated()),
        }
        let mut top = TopLevel::default();
        if self.skip_ws()? == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.expect_after_ws(b'"', "a string key")?;
                let key_start = self.offset() - 1;
                self.capture = Some(Vec::new());
                self.cap_start = self.pos;
                let r = self.string_body();
                let mut raw = self.capture.take().expect("capturing");
                r?;
                raw.extend_from_slice(&self.buf[self.cap_start..self.pos]);
                raw.insert(0, b'"');
                let key: String = self.decode(key_start, &raw, "key")?;
                self.expect_after_ws(b':', "`:`")?;
                match key.as_str() {
                    "version" => {
                        let (start, bytes) = self.captured_value()?;
                        let v: u64 = self.decode(start, &bytes, "version")?;
                        // Terraform writes "version" first: a version 3 state is refused
                        // before anything else of it is read.
                        if v != 4 {
                            return Err(StateError::UnsupportedVersion {
                                origin: self.origin.into(),
                                version: v,
                            });
                        }
                        top.version = Some(v);
                    }
                    "serial" | "lineage" | "terraform_version" | "outputs" => {
                        let (start, bytes) = self.captured_value()?;
                        match key.as_str() {
                            "serial" => top.serial = Some(self.decode(start, &bytes, "serial")?),
                            "lineage" => top.lineage = Some(self.decode(start, &bytes, "lineage")?),
                            "terraform_version" => {
                                top.terraform_version = Some(self.decode(start, &bytes, "terraform_version")?)
                            }
                            _ => top.outputs = Some(self.decode(start, &bytes, "outputs")?),
                        }
                    }
                    "resources" => {
                        // Only whether there is any: an empty list is what `terraform destroy`
                        // leaves. The list itself is checked and dropped as it streams past.
                        if self.skip_ws()? == Some(b'[') {
                            self.pos += 1;
                            let empty = self.skip_ws()? == Some(b']');
                            top.resources = Some(!empty);
                            if empty {
                                self.pos += 1;
                            } else {
                                self.rest_of_array()?;
                            }
                        } else {
                            self.value()?;
                        }
                    }
                    _ => self.value()?,
                }
                match self.skip_ws()? {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    Some(_) => return Err(self.syntax("expected `,` or `}`")),
                    None => return Err(self.truncated()),
                }
            }
        }
        if self.skip_ws()?.is_some() {
            return Err(self.syntax("trailing characters after the state object"));
        }
        Ok(top)
    }
}

/// Byte offset of serde_json's 1-based (line, column) inside `bytes`.
fn offset_of(bytes: &[u8], line: usize, column: usize) -> u64 {
    let mut start = 0usize;
    for _ in 1..line {
        match bytes[start..].iter().position(|b| *b == b'\n') {
            Some(i) => start += i + 1,
            None => break,
        }
    }
    (start + column.saturating_sub(1)) as u64
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATE: &str = r#"{
  "version": 4,
  "terraform_version": "1.11.4",
  "serial": 7,
  "lineage": "5f0c1a2b-0000-4000-8000-000000000001",
  "outputs": {
    "cell_metadata": {"value": {"cell_name": "prod-eu-west-1", "schema": "1"}, "type": ["map", "string"]},
    "db_password": {"value": "x", "type": "string", "sensitive": true}
  },
  "resources": [{"mode": "managed", "type": "terraform_data", "name": "x", "instances": [{"attributes": {"id": "a"}}]}],
  "check_results": null
}"#;

    #[test]
    fn reads_scalars_and_outputs() {
        let s = read_state(STATE.as_bytes(), "t.tfstate").unwrap();
        assert_eq!(s.serial, 7);
        assert_eq!(s.lineage, "5f0c1a2b-0000-4000-8000-000000000001");
        assert_eq!(s.terraform_version, "1.11.4");
        assert_eq!(s.outputs.len(), 2);
        assert!(s.outputs["db_password"].sensitive);
        assert_eq!(s.outputs["cell_metadata"].value["cell_name"], "prod-eu-west-1");
    }

    #[test]
    fn syntax_error_names_file_and_byte_offset() {
        let bad = r#"{"version": 4, "serial": 1,, "lineage": "x"}"#;
        let e = read_state(bad.as_bytes(), "bad.tfstate").unwrap_err();
        match &e {
            StateError::NotJson { offset, .. } => assert_eq!(*offset, 27, "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().starts_with("bad.tfstate: not JSON at byte 27"), "{e}");
    }

    #[test]
    fn truncated_state_is_named_truncated() {
        let cut = &STATE[..STATE.len() / 2];
        let e = read_state(cut.as_bytes(), "cut.tfstate").unwrap_err();
        assert!(matches!(e, StateError::Truncated { .. }), "{e:?}");
        assert!(e.to_string().contains("cut.tfstate: truncated"));
    }

    #[test]
    fn version_3_is_refused_by_number() {
        let v3 = r#"{"version": 3, "terraform_version": "0.11.14", "serial": 2, "lineage": "x", "modules": []}"#;
        let e = read_state(v3.as_bytes(), "old.tfstate").unwrap_err();
        assert_eq!(
            e.to_string(),
            "old.tfstate: unsupported state format version 3 (cellbridge reads version 4, written by Terraform 0.12 and later)"
        );
    }

    #[test]
    fn trailing_garbage_is_refused() {
        let e = read_state(format!("{STATE} x").as_bytes(), "t").unwrap_err();
        assert!(matches!(e, StateError::NotJson { .. }), "{e:?}");
    }

    #[test]
    fn a_json_array_is_not_a_state() {
        let e = read_state("[1,2]".as_bytes(), "t").unwrap_err();
        assert!(matches!(e, StateError::NotAState { .. }), "{e:?}");
    }

    /// Hands out one byte per read: every buffer boundary case at once.
    struct OneByte<'a>(&'a [u8]);

    impl Read for OneByte<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.split_first() {
                Some((b, rest)) if !buf.is_empty() => {
                    buf[0] = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn buffer_boundaries_do_not_matter() {
        let a = read_state(STATE.as_bytes(), "t").unwrap();
        let b = read_state(OneByte(STATE.as_bytes()), "t").unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn skipped_sections_are_still_checked_for_structure() {
        for (bad, why) in [
            (
                r#"{"version": 4, "resources": [1 2], "serial": 1, "lineage": "x"}"#,
                "expected `,` or `]`",
            ),
            (
                r#"{"version": 4, "resources": {"a" 1}, "serial": 1, "lineage": "x"}"#,
                "expected `:`",
            ),
            (
                r#"{"version": 4, "resources": [tru], "serial": 1, "lineage": "x"}"#,
                "invalid literal",
            ),
            (
                r#"{"version": 4, "resources": ["a\qb"], "serial": 1, "lineage": "x"}"#,
                "invalid escape",
            ),
            (
                r#"{"version": 4, "resources": [}, "serial": 1, "lineage": "x"}"#,
                "expected a value",
            ),
        ] {
            let e = read_state(bad.as_bytes(), "t").unwrap_err();
            assert!(
                matches!(e, StateError::NotJson { .. }) && e.to_string().contains(why),
                "{bad}: {e}"
            );
        }
        let e = read_state("{\"version\": 4, \"resources\": [\"a\u{1}\"]}".as_bytes(), "t").unwrap_err();
        assert!(e.to_string().contains("control character"), "{e}");
        let e = read_state(r#"{"version": 4, "resources": ["unterminated"#.as_bytes(), "t").unwrap_err();
        assert!(matches!(e, StateError::Truncated { .. }), "{e}");
    }

    #[test]
    fn kept_values_are_fully_parsed() {
        let e = read_state(r#"{"version": 4, "serial": "seven", "lineage": "x"}"#.as_bytes(), "t").unwrap_err();
        assert!(
            matches!(e, StateError::NotAState { .. }) && e.to_string().contains("\"serial\""),
            "{e}"
        );
        let e = read_state(r#"{"version": 4, "serial": 12x, "lineage": "x"}"#.as_bytes(), "t").unwrap_err();
        assert!(matches!(e, StateError::NotJson { offset: 27, .. }), "{e}");
        assert_eq!(
            read_state("".as_bytes(), "t").unwrap_err().to_string(),
            "t: not a Terraform state: the file is empty"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_resources_section_reads_like_a_full_parse(resources in arb_json(), keep in "[a-z]{1,8}") {
            let doc = serde_json::json!({
                "version": 4, "terraform_version": "1.11.4", "serial": 9, "lineage": keep,
                "outputs": {"cell_metadata": {"value": {"cell_name": keep, "x": resources.clone()}}},
                "resources": resources,
                "check_results": null
            });
            let text = serde_json::to_string_pretty(&doc).unwrap();
            let s = read_state(OneByte(text.as_bytes()), "t").unwrap();
            // serde_json's own reading of the same text is the reference (floats included).
            let full: serde_json::Value = serde_json::from_str(&text).unwrap();
            proptest::prop_assert_eq!(&s.outputs["cell_metadata"].value, &full["outputs"]["cell_metadata"]["value"]);
            proptest::prop_assert_eq!(s.serial, 9);
            proptest::prop_assert_eq!(s.has_resources, full["resources"].as_array().is_some_and(|a| !a.is_empty()));
        }
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            ".*".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::from),
                proptest::collection::btree_map(".*", inner, 0..8)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
