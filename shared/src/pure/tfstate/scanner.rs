//! The validating JSON scanner behind [`super::read_state`]: it walks the state's top-level
//! object, hands the few values cellbridge keeps to serde_json, and checks everything else for
//! well-formedness as it streams past without building it.

use std::collections::BTreeMap;
use std::io::Read;

use super::{Output, Result, StateError};

#[derive(Default)]
pub(super) struct TopLevel {
    pub(super) version: Option<u64>,
    pub(super) serial: Option<u64>,
    pub(super) lineage: Option<String>,
    pub(super) terraform_version: Option<String>,
    pub(super) outputs: Option<BTreeMap<String, Output>>,
    pub(super) resources: Option<bool>,
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

pub(super) struct Scanner<'o, R> {
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
    pub(super) fn new(reader: R, origin: &'o str) -> Self {
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

    pub(super) fn not_a_state(&self, reason: &str) -> StateError {
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

    /// Consumes one whole JSON value, checking its structure.
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

    pub(super) fn top_level(&mut self) -> Result<TopLevel> {
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
