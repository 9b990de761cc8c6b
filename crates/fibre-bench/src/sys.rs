//! What the machine says about itself beside every figure: its load, and this process's
//! memory.

use std::process::Command;

/// `uptime`'s line (the machine is shared: every figure is printed beside it).
pub fn uptime() -> String {
    Command::new("uptime")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// The 1, 5 and 15-minute load averages, as `/proc/loadavg` has them.
pub fn loadavg() -> String {
    let s = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let v: Vec<&str> = s.split_whitespace().take(3).collect();
    v.join(" ")
}

/// This process's memory: resident bytes and the C allocator's bytes in use.
#[derive(Clone, Copy)]
pub struct Mem {
    pub rss: usize,
    pub heap: usize,
}

/// Memory now, after the allocator returned what it could (so freed memory does not count).
pub fn memory() -> Mem {
    // SAFETY: malloc_trim and mallinfo2 only read and adjust the allocator's own state.
    let info = unsafe {
        libc::malloc_trim(0);
        libc::mallinfo2()
    };
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let rss_kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    Mem {
        rss: rss_kib * 1024,
        heap: info.uordblks + info.hblkhd,
    }
}

/// How long the calling thread has been runnable but waiting for a CPU (schedstat's second
/// field).
pub fn run_delay() -> std::time::Duration {
    let ns = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    std::time::Duration::from_nanos(ns)
}

/// The scheduling share of this process's autogroup (Linux groups a session's tasks, and
/// shares the CPUs between groups before it looks at a task's own nice value), raised while
/// the value lives and restored when dropped.
pub struct GroupShare {
    old: Option<String>,
}

const AUTOGROUP: &str = "/proc/self/autogroup";

impl GroupShare {
    /// Sets the group's nice value to `nice`; does nothing where autogroups are off or the
    /// process may not raise its share (not root).
    pub fn raise(nice: i32) -> GroupShare {
        let old = std::fs::read_to_string(AUTOGROUP)
            .ok()
            .and_then(|s| Some(s.split_whitespace().last()?.to_owned()));
        let set = old.is_some() && std::fs::write(AUTOGROUP, nice.to_string()).is_ok();
        GroupShare {
            old: if set { old } else { None },
        }
    }

    pub fn raised(&self) -> bool {
        self.old.is_some()
    }
}

impl Drop for GroupShare {
    fn drop(&mut self) {
        if let Some(old) = &self.old {
            let _ = std::fs::write(AUTOGROUP, old);
        }
    }
}
