//! Starting the Python services of the test bed.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};

/// The repository root (the tests crate lives in `tests/`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The Python that has the test bed installed: `CELLBRIDGE_TEST_PYTHON`, else the project's
/// `.venv` that `make test` creates. Panics with the set-up command when neither exists, so a
/// test never silently runs without its services.
pub fn python() -> PathBuf {
    if let Ok(p) = std::env::var("CELLBRIDGE_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = repo_root().join(".venv/bin/python");
    assert!(
        venv.exists(),
        "the test bed is not installed: run `make test` (or `make testbed`) first; looked for {}",
        venv.display()
    );
    venv
}

/// A service process that lives as long as this handle (its stdin is its lifeline).
pub struct Service {
    child: Child,
    _stdin: ChildStdin,
    pub port: u16,
}

impl Service {
    /// Runs `python tests/fakes/<script> --port 0 <args>` and waits for its `PORT=<n>` line.
    // The child is waited for in Drop; clippy cannot see that through the struct.
    #[allow(clippy::zombie_processes)]
    pub fn start(script: &str, args: &[&str]) -> Service {
        let mut child = Command::new(python())
            .arg(repo_root().join("tests/fakes").join(script))
            .args(["--port", "0"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start tests/fakes/{script}: {e}"));
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            let n = out.read_line(&mut line).unwrap();
            assert!(n > 0, "tests/fakes/{script} exited before printing its port");
            if let Some(p) = line.trim().strip_prefix("PORT=") {
                let port = p.parse().unwrap();
                // Keep draining stdout so the child never blocks on a full pipe.
                std::thread::spawn(move || for _ in out.lines() {});
                return Service {
                    child,
                    _stdin: stdin,
                    port,
                };
            }
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
