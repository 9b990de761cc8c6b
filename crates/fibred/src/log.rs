//! fibred's logs: `tracing` events written to stderr, one line each, as text
//! (`TIME LEVEL target: message key=value ...`) or JSON (one object per line, for a log
//! shipper), each call site limited to a rate so that a flood of one event (a peer sending
//! garbage, a client reconnecting in a loop) cannot bury the others or slow the writer.
//!
//! The rate limit is a token bucket per call site: [`Settings::burst`] events pass at once,
//! then [`Settings::per_second`]. What it suppresses is counted, and the next line of that
//! call site says how many were lost (`suppressed=N`, or `"suppressed":N` in JSON), so a reader
//! knows a flood happened and how large it was. A call site that falls silent after a flood
//! reports its count only when it speaks again.
//!
//! [`init`] installs the subscriber once, from `main`; libraries and tests emit events through
//! `tracing`'s macros and see nothing written unless a subscriber is installed.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::callsite::Identifier;
use tracing::level_filters::LevelFilter;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::fmt::format::{format, JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::{Context, Filter, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// Events of one call site that pass at once before the rate applies: enough for a burst of
/// connections or a resync's few lines, few enough that a flood shows as one screenful.
pub const DEFAULT_BURST: u32 = 20;

/// Events per second of one call site once its burst is spent.
pub const DEFAULT_PER_SECOND: f64 = 5.0;

/// How lines look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "text" => Some(Format::Text),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// `error`, `warn` (or `warning`), `info` or `debug`, in any case.
pub fn parse_level(s: &str) -> Option<LevelFilter> {
    match s.to_ascii_lowercase().as_str() {
        "error" => Some(LevelFilter::ERROR),
        "warn" | "warning" => Some(LevelFilter::WARN),
        "info" => Some(LevelFilter::INFO),
        "debug" => Some(LevelFilter::DEBUG),
        _ => None,
    }
}

/// What [`init`] installs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    pub level: LevelFilter,
    pub format: Format,
    /// Events of one call site let through at once; 0 turns the limit off.
    pub burst: u32,
    pub per_second: f64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            level: LevelFilter::INFO,
            format: Format::Text,
            burst: DEFAULT_BURST,
            per_second: DEFAULT_PER_SECOND,
        }
    }
}

/// Installs the process's subscriber (stderr). Fails if one is installed already.
pub fn init(s: &Settings) -> Result<(), String> {
    tracing::subscriber::set_global_default(subscriber(s, std::io::stderr))
        .map_err(|e| format!("cannot install the logger: {e}"))
}

/// The subscriber [`init`] installs, writing to `out`.
fn subscriber<W>(s: &Settings, out: W) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let limit = RateLimit::new(s.level, s.burst, s.per_second);
    let fmt = tracing_subscriber::fmt::layer().with_writer(out);
    match s.format {
        Format::Text => {
            let layer = fmt.event_format(Suppressed(format().with_ansi(false)));
            Box::new(tracing_subscriber::registry().with(layer.with_filter(limit)))
        }
        Format::Json => {
            let layer = fmt
                .event_format(Suppressed(format().json().flatten_event(true)))
                .fmt_fields(JsonFields::new());
            Box::new(tracing_subscriber::registry().with(layer.with_filter(limit)))
        }
    }
}

/// One call site's bucket.
struct Bucket {
    tokens: f64,
    at: Instant,
    suppressed: u64,
}

/// The level filter and the per-call-site token buckets (see the module comment). A mutex
/// guards the buckets: logging is the control plane's, never a worker's per-packet path, and
/// the lock is held for a map lookup.
struct RateLimit<K = Identifier> {
    level: LevelFilter,
    burst: u32,
    per_second: f64,
    sites: Mutex<HashMap<K, Bucket>>,
}

/// What [`RateLimit::admit`] decided for one event.
#[derive(Debug, PartialEq, Eq)]
enum Admit {
    /// Written, after this many of its call site's were suppressed.
    Pass(u64),
    Suppress,
}

impl<K: std::hash::Hash + Eq> RateLimit<K> {
    fn new(level: LevelFilter, burst: u32, per_second: f64) -> RateLimit<K> {
        RateLimit {
            level,
            burst,
            per_second,
            sites: Mutex::new(HashMap::new()),
        }
    }

    fn admit(&self, site: K, now: Instant) -> Admit {
        if self.burst == 0 {
            return Admit::Pass(0);
        }
        let mut sites = self.sites.lock().unwrap_or_else(|p| p.into_inner());
        let full = f64::from(self.burst);
        let b = sites.entry(site).or_insert(Bucket {
            tokens: full,
            at: now,
            suppressed: 0,
        });
        let refill = now.saturating_duration_since(b.at).as_secs_f64() * self.per_second;
        b.tokens = (b.tokens + refill).min(full);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Admit::Pass(std::mem::take(&mut b.suppressed))
        } else {
            b.suppressed += 1;
            Admit::Suppress
        }
    }
}

std::thread_local! {
    /// The suppressed count of the event being written, from the filter to the formatter:
    /// both run on the emitting thread, one right after the other.
    static SUPPRESSED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl<S> Filter<S> for RateLimit<Identifier> {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        *meta.level() <= self.level
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.level)
    }

    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        match self.admit(event.metadata().callsite(), Instant::now()) {
            Admit::Pass(n) => {
                SUPPRESSED.with(|c| c.set(n));
                true
            }
            Admit::Suppress => false,
        }
    }
}

/// An event format that adds the suppressed count, when there is one, to the line its inner
/// format writes: as a last `key=value` for text, as the first member of a JSON object.
struct Suppressed<F>(F);

impl<S, N, F> FormatEvent<S, N> for Suppressed<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let n = SUPPRESSED.with(|c| c.replace(0));
        if n == 0 {
            return self.0.format_event(ctx, writer, event);
        }
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        writer.write_str(&with_suppressed(&line, n))
    }
}

/// `line` (one formatted event, ending in a newline) with `n` suppressed events noted.
fn with_suppressed(line: &str, n: u64) -> String {
    let body = line.strip_suffix('\n').unwrap_or(line);
    match body.strip_prefix('{') {
        Some(rest) => format!("{{\"suppressed\":{n},{rest}\n"),
        None => format!("{body} suppressed={n}\n"),
    }
}

/// How often a long operation reports how far it got.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// Progress of a long operation (a state restore, a mirror's dump): a line at Info at most
/// every [`PROGRESS_EVERY`], so that a large table's minutes are not silent.
pub struct Progress {
    what: &'static str,
    total: usize,
    start: Instant,
    last: Instant,
}

impl Progress {
    pub fn new(what: &'static str, total: usize) -> Progress {
        let now = Instant::now();
        Progress {
            what,
            total,
            start: now,
            last: now,
        }
    }

    /// `done` of the total are done; reports if the last report is old enough.
    pub fn at(&mut self, done: usize) {
        let now = Instant::now();
        if now.duration_since(self.last) < PROGRESS_EVERY {
            return;
        }
        self.last = now;
        let seconds = now.duration_since(self.start).as_secs_f64();
        tracing::info!(
            done,
            total = self.total,
            seconds = format_args!("{seconds:.1}"),
            "{}",
            self.what
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;

    /// The one call site of the bucket tests (buckets are keyed by any identity).
    const SITE: u8 = 0;

    #[test]
    fn a_call_site_passes_its_burst_then_its_rate_and_counts_what_it_suppressed() {
        let r = RateLimit::new(LevelFilter::INFO, 3, 2.0);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(r.admit(SITE, t0), Admit::Pass(0));
        }
        for _ in 0..5 {
            assert_eq!(r.admit(SITE, t0), Admit::Suppress);
        }
        // Half a second at 2 per second: one token, and the five lost are reported with it.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(r.admit(SITE, t1), Admit::Pass(5));
        assert_eq!(r.admit(SITE, t1), Admit::Suppress);
        // A long silence refills the burst, never beyond it.
        let t2 = t1 + Duration::from_secs(3600);
        assert_eq!(r.admit(SITE, t2), Admit::Pass(1));
        for _ in 0..2 {
            assert_eq!(r.admit(SITE, t2), Admit::Pass(0));
        }
        assert_eq!(r.admit(SITE, t2), Admit::Suppress);
    }

    #[test]
    fn a_burst_of_zero_turns_the_limit_off() {
        let r = RateLimit::new(LevelFilter::INFO, 0, 0.0);
        let t = Instant::now();
        assert!((0..1000).all(|_| r.admit(SITE, t) == Admit::Pass(0)));
    }

    #[test]
    fn the_suppressed_count_joins_text_and_json_lines() {
        assert_eq!(
            with_suppressed("2026-11-27T11:00:00Z  WARN fibred: fpm frame dropped\n", 7),
            "2026-11-27T11:00:00Z  WARN fibred: fpm frame dropped suppressed=7\n"
        );
        assert_eq!(
            with_suppressed("{\"level\":\"WARN\",\"message\":\"x\"}\n", 7),
            "{\"suppressed\":7,\"level\":\"WARN\",\"message\":\"x\"}\n"
        );
    }

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);
    impl Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What the subscriber [`init`] installs writes, when `emit` runs under it.
    fn written(format: Format, burst: u32, per_second: f64, emit: impl FnOnce()) -> String {
        let out = Lines::default();
        let w = out.clone();
        let s = Settings {
            format,
            burst,
            per_second,
            ..Settings::default()
        };
        tracing::subscriber::with_default(subscriber(&s, move || w.clone()), emit);
        let bytes = out.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn a_flood_of_json_lines_is_cut_to_the_burst() {
        let text = written(Format::Json, 4, 0.0, || {
            for i in 0..100u32 {
                tracing::warn!(conn = i, "fpm frame dropped");
            }
            tracing::debug!("below the level");
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        for (i, l) in lines.iter().enumerate() {
            assert!(l.starts_with('{') && l.ends_with('}'), "{l}");
            assert!(l.contains("\"level\":\"WARN\""), "{l}");
            assert!(l.contains("\"message\":\"fpm frame dropped\""), "{l}");
            assert!(l.contains(&format!("\"conn\":{i}")), "{l}");
        }
    }

    #[test]
    fn text_lines_carry_the_level_target_message_and_fields() {
        let text = written(Format::Text, 0, 0.0, || {
            tracing::info!(address = "127.0.0.1:2620", "fpm listening");
        });
        assert!(
            text.ends_with(" INFO fibred::log::tests: fpm listening address=\"127.0.0.1:2620\"\n"),
            "{text}"
        );
    }

    #[test]
    fn the_line_after_a_flood_counts_what_was_suppressed() {
        // One call site, four events.
        let dropped = || tracing::warn!("fpm frame dropped");
        let text = written(Format::Json, 1, 20.0, || {
            for _ in 0..3 {
                dropped();
            }
            // A twentieth of a second at 20 per second: one more line may pass.
            std::thread::sleep(Duration::from_millis(60));
            dropped();
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(!lines[0].contains("suppressed"), "{text}");
        assert!(lines[1].starts_with("{\"suppressed\":2,"), "{text}");
    }
}
