//! What a benchmarked child process used. Its peak memory and CPU time are only in wait4's
//! rusage, which std does not expose; so the child is reaped here, and std's `Child::wait`
//! cannot stand in.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::time::Duration;

/// A reaped child's status and resource use.
pub struct Usage {
    pub status: ExitStatus,
    /// Peak resident set size in KiB (Linux's unit for `ru_maxrss`).
    pub max_rss_kb: i64,
    /// User + system.
    pub cpu: Duration,
}

impl Usage {
    pub fn max_rss_mb(&self) -> f64 {
        self.max_rss_kb as f64 / 1024.0
    }
}

/// Waits for `child`, which nothing has waited for yet, and reaps it.
#[allow(unsafe_code)]
pub fn wait(child: &Child) -> Usage {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: plain wait4 on our own child with valid out-pointers; a zeroed rusage is a valid
    // value of that plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "wait4 on {pid}: {e}");
    }
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    Usage {
        status: ExitStatus::from_raw(status),
        max_rss_kb: usage.ru_maxrss,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
    }
}
