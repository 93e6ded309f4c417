//! Suite-wide secret-leak capture.
//!
//! Tests register every secret value they hand to cellbridge (`secret`), and everything
//! cellbridge says goes to capture files: every tracing event of the test binary (`init`, or
//! `init_with` for a binary that keeps its own subscriber too) and the handlers' results and
//! errors (`capture`). The fakes register the secrets they mint themselves (installation
//! tokens, the App key) in the same directory. `tests/leak_check.py DIR` then fails if any
//! registered value, or a recognisable piece of one, appears in any capture file.
//!
//! Layout of the directory (`CELLBRIDGE_LEAK_DIR`, default `<repo>/target/leak-capture`):
//! `secrets.jsonl` (one `{"id", "value", "from"}` per line, appended by every process) and
//! `<test binary>-<pid>.log` (one per test process, so processes never interleave).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

pub const SECRETS_FILE: &str = "secrets.jsonl";

/// The capture directory, created on first use.
pub fn dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::var_os("CELLBRIDGE_LEAK_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| crate::process::repo_root().join("target/leak-capture"));
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("leak capture dir {}: {e}", d.display()));
        d
    })
    .clone()
}

fn binary() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "test".into())
}

fn append(path: PathBuf) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn capture_file() -> &'static Mutex<File> {
    static FILE: OnceLock<Mutex<File>> = OnceLock::new();
    FILE.get_or_init(|| Mutex::new(append(dir().join(format!("{}-{}.log", binary(), std::process::id())))))
}

/// Registers a secret value this test gives cellbridge; `id` names it in the checker's report
/// (the value itself is never printed).
pub fn secret(id: &str, value: &str) {
    let line = serde_json::json!({"id": id, "value": value, "from": binary()}).to_string() + "\n";
    // One write per line on an O_APPEND file: lines of concurrent processes do not interleave.
    append(dir().join(SECRETS_FILE))
        .write_all(line.as_bytes())
        .expect("write the secrets file");
}

/// Records output that did not go through tracing: a handler's result, an error's text.
pub fn capture(what: &str, text: &str) {
    let mut f = capture_file().lock().unwrap_or_else(|p| p.into_inner());
    let _ = writeln!(f, "== {what}\n{text}");
}

/// The start of the header of a block holding a `Debug` rendering a test made itself: cellbridge
/// never shows one, but a secret in it would leak all the same, so the leak check reads it; the
/// log check (tests/log_check.py), which checks what operators read, leaves it out.
pub const TEST_DEBUG: &str = "a test's Debug rendering: ";

/// Records a `Debug` rendering a test made (see [`TEST_DEBUG`]).
pub fn capture_debug(what: &str, text: &str) {
    capture(&format!("{TEST_DEBUG}{what}"), text);
}

/// The capture file as a tracing writer.
#[derive(Clone, Copy, Default)]
pub struct Writer;

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        capture_file()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The capturing layer: every event of every crate (cellbridge, the SDK, hyper, octocrab, the
/// kube client) at TRACE, the most a user can turn on with `RUST_LOG`, so a secret that only a
/// trace line would print is caught too; through the same `credential_safe` floor as every
/// subscriber the product installs.
pub fn layer<S>() -> impl Layer<S> + Send + Sync + 'static
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let filter = Targets::new().with_default(tracing::Level::TRACE);
    tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(|| Writer)
        .with_filter(filter)
        .with_filter(cellbridge::shell::telemetry::credential_safe())
}

/// Installs the process-wide subscriber that writes every event to the capture file. Call it
/// from every test that handles secrets; later calls do nothing.
pub fn init() {
    INSTALLED.get_or_init(|| {
        // Fails only if the binary installed another global subscriber: that one then must use
        // `init_with`, and the failure here says so loudly rather than capturing nothing.
        tracing_subscriber::registry()
            .with(layer())
            .try_init()
            .expect("leak::init: another global subscriber is installed; use leak::init_with");
    });
}

/// The same, for a test binary that needs its own layer too (its own in-memory capture).
pub fn init_with<L>(extra: L)
where
    L: Layer<tracing_subscriber::Registry> + Send + Sync + 'static,
{
    let mut extra = Some(extra);
    INSTALLED.get_or_init(|| {
        let extra = extra.take().expect("first call");
        tracing_subscriber::registry().with(extra).with(layer()).init();
    });
    assert!(
        extra.is_none(),
        "leak::init_with after the subscriber was installed: its layer would be lost"
    );
}

static INSTALLED: OnceLock<()> = OnceLock::new();
