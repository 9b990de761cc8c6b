//! A tiny structured logger: one line per event on stderr, `TIMESTAMP LEVEL message key=value...`.
//!
//! The level is global (set once at start from `-v` / FIBRE_LOG); lines are written with one
//! `write` each so concurrent threads never interleave within a line.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        match s.to_ascii_lowercase().as_str() {
            "error" => Some(Level::Error),
            "warn" | "warning" => Some(Level::Warn),
            "info" => Some(Level::Info),
            "debug" => Some(Level::Debug),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

pub fn set_level(l: Level) {
    LEVEL.store(l as u8, Ordering::Relaxed);
}

pub fn enabled(l: Level) -> bool {
    l as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// RFC 3339 UTC time with milliseconds.
fn timestamp(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86400, secs % 86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Writes one line; values containing blanks or quotes are quoted.
pub fn write(level: Level, msg: &str, fields: &[(&str, &dyn std::fmt::Display)]) {
    if !enabled(level) {
        return;
    }
    let mut line = format!("{} {:<5} {msg}", timestamp(SystemTime::now()), level.name());
    for (k, v) in fields {
        let v = v.to_string();
        if v.is_empty() || v.contains([' ', '"', '=']) {
            line.push_str(&format!(" {k}={v:?}"));
        } else {
            line.push_str(&format!(" {k}={v}"));
        }
    }
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `log!(Level::Info, "message", key = value, ...)`
#[macro_export]
macro_rules! log {
    ($level:expr, $msg:expr $(, $k:ident = $v:expr)* $(,)?) => {
        if $crate::log::enabled($level) {
            $crate::log::write($level, $msg, &[$((stringify!($k), &$v as &dyn std::fmt::Display)),*]);
        }
    };
}

/// How often a long operation reports how far it got.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Progress of a long operation (a state restore, a mirror's dump): a line at Info at most
/// every [`PROGRESS_EVERY`], so that a large table's minutes are not silent.
pub struct Progress {
    what: &'static str,
    total: usize,
    start: std::time::Instant,
    last: std::time::Instant,
}

impl Progress {
    pub fn new(what: &'static str, total: usize) -> Progress {
        let now = std::time::Instant::now();
        Progress {
            what,
            total,
            start: now,
            last: now,
        }
    }

    /// `done` of the total are done; reports if the last report is old enough.
    pub fn at(&mut self, done: usize) {
        let now = std::time::Instant::now();
        if now.duration_since(self.last) < PROGRESS_EVERY {
            return;
        }
        self.last = now;
        crate::log!(
            Level::Info,
            self.what,
            done = done,
            total = self.total,
            seconds = format_args!("{:.1}", now.duration_since(self.start).as_secs_f64())
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        let t = UNIX_EPOCH + std::time::Duration::from_millis(1_795_000_000_123);
        assert_eq!(timestamp(t), "2026-11-18T11:06:40.123Z");
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn levels_parse_case_insensitively() {
        assert_eq!(Level::parse("DEBUG"), Some(Level::Debug));
        assert_eq!(Level::parse("warning"), Some(Level::Warn));
        assert_eq!(Level::parse("loud"), None);
    }
}
