//! The fake Kubernetes API server (`tests/fakes/kube_fake.py`), served over TLS with its own CA
//! as an EKS endpoint is, and a little plain-HTTP client for its control API and moto's.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::process::{python, repo_root};

/// One fake API server process; it dies with this handle.
pub struct KubeFake {
    child: Child,
    _stdin: ChildStdin,
    pub port: u16,
    pub control_port: u16,
    pub ca_pem: String,
    dir: tempfile::TempDir,
}

impl KubeFake {
    /// A TLS API server that accepts `token` (kubeconfig users) and EKS tokens.
    pub fn start() -> KubeFake {
        Self::start_with(&[])
    }

    pub fn start_with(extra: &[&str]) -> KubeFake {
        let dir = tempfile::tempdir().unwrap();
        let ca_path = dir.path().join("ca.pem");
        let mut child = Command::new(python())
            .arg(repo_root().join("tests/fakes/kube_fake.py"))
            .args(["--port", "0", "--tls", "--ca-out"])
            .arg(&ca_path)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cannot start tests/fakes/kube_fake.py");
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let (mut port, mut control_port) = (0u16, 0u16);
        let mut line = String::new();
        while port == 0 {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "kube_fake.py exited before printing its port"
            );
            let l = line.trim();
            if let Some(p) = l.strip_prefix("PORT=") {
                port = p.parse().unwrap();
            } else if let Some(p) = l.strip_prefix("CONTROL_PORT=") {
                control_port = p.parse().unwrap();
            }
        }
        std::thread::spawn(move || for _ in out.lines() {});
        let ca_pem = std::fs::read_to_string(&ca_path).unwrap();
        KubeFake {
            child,
            _stdin: stdin,
            port,
            control_port,
            ca_pem,
            dir,
        }
    }

    /// The API server's URL, what DescribeCluster's `endpoint` says.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    pub fn control(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = http_json(method, &format!("http://127.0.0.1:{}{path}", self.control_port), body);
        assert!(status < 300, "kube fake {method} {path}: {status} {v}");
        v
    }

    /// Every API request so far: `{method, path, query, status, mutated, fault}`.
    pub fn requests(&self) -> Vec<Value> {
        self.control("GET", "/_fake/requests", None)
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub fn clear_requests(&self) {
        self.control("DELETE", "/_fake/requests", None);
    }

    /// Injects a fault: `{method, path (regex), status | sleep, count, skip}`.
    pub fn fault(&self, f: Value) {
        self.control("POST", "/_fake/faults", Some(f));
    }

    pub fn clear_faults(&self) {
        self.control("DELETE", "/_fake/faults", None);
    }

    /// Stored objects, of one kind or all.
    pub fn objects(&self, kind: Option<&str>) -> Vec<Value> {
        let q = kind.map(|k| format!("?kind={k}")).unwrap_or_default();
        self.control("GET", &format!("/_fake/objects{q}"), None)
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Makes every GitRepository report Ready shortly after it is applied, as source-controller would.
    pub fn auto_ready(&self, ready: bool) {
        self.control("POST", "/_fake/auto-ready", Some(json!({"delay": 0.2, "ready": ready})));
    }

    /// Writes an object's status as its controller would (through the status subresource): the
    /// object must be there.
    pub fn set_status(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str, status: Value) {
        self.control(
            "POST",
            "/_fake/status",
            Some(json!({"apiVersion": api_version, "kind": kind, "namespace": namespace, "name": name, "status": status})),
        );
    }

    /// Stores an object the cluster's own controllers make (a ReplicaSet's Pod), status included.
    pub fn put_object(&self, object: Value) {
        self.control("POST", "/_fake/object", Some(object));
    }

    /// Stores an object a controller makes (the Flux Operator makes Flux's CRDs and sync
    /// objects) once its kind is served: a CRD just stored takes a moment to be Established.
    pub fn put_object_when_served(&self, object: Value) {
        let url = format!("http://127.0.0.1:{}/_fake/object", self.control_port);
        for _ in 0..100 {
            let (status, v) = http_json("POST", &url, Some(object.clone()));
            match status {
                200 => return,
                404 => std::thread::sleep(std::time::Duration::from_millis(50)),
                _ => panic!("kube fake POST /_fake/object: {status} {v}"),
            }
        }
        panic!("kube fake: {} never served", object["kind"]);
    }

    /// `count` Nodes have joined the cluster (none before).
    pub fn nodes(&self, count: usize) {
        self.control("POST", "/_fake/nodes", Some(json!({"count": count})));
    }

    /// How lists page: whether they say `remainingItemCount`, and how many continued lists
    /// answer 410 Expired before one succeeds.
    pub fn lists(&self, remaining_count: bool, expire_continue: usize) {
        self.control(
            "POST",
            "/_fake/lists",
            Some(json!({"remaining_count": remaining_count, "expire_continue": expire_continue})),
        );
    }

    /// A kubeconfig for this server with its static admin token, as `kubectl` needs it.
    pub fn kubeconfig(&self) -> PathBuf {
        let ca = self.dir.path().join("ca.pem");
        let path = self.dir.path().join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: admin\n  user:\n    token: fake-admin-token\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: admin\ncurrent-context: fake\n",
            self.url(),
            ca.display()
        );
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for KubeFake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain-HTTP JSON request (the fakes' control APIs): `(status, body)`.
pub fn http_json(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    let rest = url.strip_prefix("http://").expect("plain http URL");
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let mut s = TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let data = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{data}",
        data.len()
    )
    .unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).unwrap();
    let text = String::from_utf8_lossy(&resp);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// A fresh ed25519 key pair in OpenSSH form `(private, public)`, made by the test bed's Python.
pub fn ssh_keypair() -> (String, String) {
    let script = "from cryptography.hazmat.primitives.asymmetric import ed25519\n\
from cryptography.hazmat.primitives import serialization as s\n\
k = ed25519.Ed25519PrivateKey.generate()\n\
print(k.private_bytes(s.Encoding.PEM, s.PrivateFormat.OpenSSH, s.NoEncryption()).decode(), end='')\n\
print('@@')\n\
print(k.public_key().public_bytes(s.Encoding.OpenSSH, s.PublicFormat.OpenSSH).decode() + ' flux@cellbridge')\n";
    let out = Command::new(python()).args(["-c", script]).output().unwrap();
    assert!(
        out.status.success(),
        "key generation failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (private, public) = text.split_once("@@\n").unwrap();
    (private.to_owned(), public.trim().to_owned())
}
