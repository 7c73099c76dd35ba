//! Logging to stderr: the `[log]` section (format, level, a level per
//! target) and the `HERON_LOG` variable, which replaces the file's levels
//! when set so that one start can be made louder without editing the file.
//! Under systemd, when stderr is the journal's stream (`JOURNAL_STREAM`),
//! each line starts with its syslog priority (`<3>` for an error), which
//! journald reads and strips: errors are filed as errors, not as info.

use std::collections::BTreeMap;
use std::fmt;
use std::io::IsTerminal;
use std::path::Path;
use std::str::FromStr;

use std::sync::OnceLock;

use serde::Deserialize;
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

/// The variable whose filter directives replace `[log] level` and `targets`.
const ENV: &str = "HERON_LOG";

/// `[log]`: how and how much the server logs.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSection {
    pub format: LogFormat,
    /// The level of every target not named in `targets`.
    pub level: Level,
    /// A level per target: a crate or module path, e.g. `heron_xfr` or
    /// `heron_xfr::secondary`.
    #[serde(deserialize_with = "module_paths")]
    pub targets: BTreeMap<String, Level>,
}

/// `targets`, each key a module path (`heron_xfr::secondary`). The keys
/// go into the filter's text as they are: `"heron=trace,x"` was read as
/// two directives and changed the level of all of `heron` (AL-5).
fn module_paths<'de, D: serde::Deserializer<'de>>(
    de: D,
) -> Result<BTreeMap<String, Level>, D::Error> {
    let targets = BTreeMap::<String, Level>::deserialize(de)?;
    match targets.keys().find(|t| !is_module_path(t)) {
        Some(bad) => Err(serde::de::Error::custom(format!(
            "log target {bad:?}: expected a crate or module path such as heron_xfr or heron_xfr::secondary"
        ))),
        None => Ok(targets),
    }
}

/// Whether `text` is `NAME(::NAME)*`, each name of ASCII letters, digits
/// and underscores.
fn is_module_path(text: &str) -> bool {
    text.split("::")
        .all(|name| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One readable line per event, fields as `key=value` after the message.
    #[default]
    Text,
    /// One JSON object per line; the event's fields are top-level keys.
    Json,
}

/// A level as the file names it: off, error, warn, info, debug or trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level(LevelFilter);

impl Default for Level {
    fn default() -> Level {
        Level(LevelFilter::INFO)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<'de> Deserialize<'de> for Level {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Level, D::Error> {
        let text = String::deserialize(de)?;
        LevelFilter::from_str(&text).map(Level).map_err(|_| {
            serde::de::Error::custom(format!(
                "log level {text:?}: expected off, error, warn, info, debug or trace"
            ))
        })
    }
}

impl LogSection {
    /// The file's levels as filter directives, e.g. `info,heron_xfr=debug`.
    fn directives(&self) -> String {
        let targets = self.targets.iter().map(|(t, l)| format!(",{t}={l}"));
        std::iter::once(self.level.to_string())
            .chain(targets)
            .collect()
    }

    /// `HERON_LOG`'s directives `text`, after the file's `level` when they
    /// name targets only: `HERON_LOG=heron_xfr=debug` otherwise turned
    /// every other target off, errors included (AL-11).
    fn under_env(&self, text: String) -> String {
        match text.split(',').any(|d| !d.contains('=')) {
            true => text,
            false => format!("{},{text}", self.level),
        }
    }

    /// `HERON_LOG` if it is set and valid, else the file's levels.
    fn filter(&self) -> EnvFilter {
        env_directives()
            .map(|text| self.under_env(text))
            .and_then(|text| EnvFilter::try_new(text).ok())
            .unwrap_or_else(|| {
                // Targets are free text: one the filter cannot read is
                // dropped rather than stopping the server.
                EnvFilter::builder().parse_lossy(self.directives())
            })
    }
}

/// `HERON_LOG` when it is set and every directive in it is a level or
/// `TARGET=LEVEL`. The filter's own syntax reads anything: `warning`
/// (a target of that name) or an empty value turned every line off,
/// errors included, where the docs promise an invalid value is ignored.
fn env_directives() -> Option<String> {
    std::env::var(ENV)
        .ok()
        .filter(|text| valid_directives(text))
}

fn valid_directives(text: &str) -> bool {
    // `LevelFilter` reads "" as error: a level must be named.
    let is_level =
        |level: &str| !level.trim().is_empty() && LevelFilter::from_str(level.trim()).is_ok();
    let mut directives = text.split(',').map(str::trim).peekable();
    directives.peek().is_some()
        && directives.all(|d| match d.rsplit_once('=') {
            Some((target, level)) => !target.trim().is_empty() && is_level(level),
            None => is_level(d),
        })
}

/// A line for a `HERON_LOG` that is set but was not used, at error so
/// that `level = "error"` does not hide it (regression hunt).
fn say_if_env_ignored() {
    if let Ok(text) = std::env::var(ENV)
        && !valid_directives(&text)
    {
        tracing::error!(
            "{ENV}={text:?} ignored: expected a level (off, error, warn, info, debug, trace) or TARGET=LEVEL, comma-separated; the configuration's levels apply"
        );
    }
}

/// The `[log]` section of the configuration file at `path`, read before
/// anything else so that the rest of the start is logged as asked. A file
/// that cannot be read or parsed gives the defaults here: the full read
/// that follows reports why.
pub fn section_of(path: &Path) -> LogSection {
    #[derive(Deserialize)]
    struct OnlyLog {
        #[serde(default)]
        log: Option<toml::Value>,
    }
    let Ok(text) = heron_sys::files::read_settings_text(path) else {
        return LogSection::default();
    };
    toml::from_str::<OnlyLog>(&text)
        .ok()
        .and_then(|file| file.log)
        .and_then(|log| log.try_into().ok())
        .unwrap_or_default()
}

/// The running filter, so that a reload can change the levels.
static LEVELS: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Starts logging to stderr as `section` says.
pub fn init(section: &LogSection) {
    let journal = stderr_is_the_journal();
    let (filter, levels) = reload::Layer::new(section.filter());
    let _ = LEVELS.set(levels);
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry().with(filter);
    match section.format {
        LogFormat::Text => {
            let format = tracing_subscriber::fmt::format().with_target(false);
            let layer = layer
                .with_ansi(std::io::stderr().is_terminal() && !journal)
                .event_format(SyslogPrefix::new(format, journal));
            registry.with(layer).init()
        }
        // The target says which part spoke: kept for filtering by it.
        LogFormat::Json => {
            let format = tracing_subscriber::fmt::format()
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_span_list(false);
            let layer = layer
                .json()
                .event_format(SyslogPrefix::new(format, journal));
            registry.with(layer).init()
        }
    }
    say_if_env_ignored();
}

/// Applies `section`'s levels from now on (a reload read the file again);
/// `HERON_LOG`, when set, still wins. The format stays as started.
/// Returns whether the levels changed.
pub fn apply_levels(section: &LogSection) -> bool {
    let Some(levels) = LEVELS.get() else {
        return false;
    };
    let filter = section.filter();
    let before = levels.with_current(|f| f.to_string()).unwrap_or_default();
    if filter.to_string() == before {
        return false;
    }
    match levels.reload(filter) {
        Ok(()) => {
            tracing::info!("log levels now {}", section.directives());
            true
        }
        Err(e) => {
            tracing::warn!("log levels not changed: {e}");
            false
        }
    }
}

/// Whether stderr is the stream systemd connected to the journal: it
/// names it in `JOURNAL_STREAM` as `DEVICE:INODE`, and a process whose
/// stderr was redirected since keeps the variable but not the stream.
fn stderr_is_the_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(named) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    std::fs::metadata("/proc/self/fd/2")
        .is_ok_and(|stderr| is_stream(&named, stderr.dev(), stderr.ino()))
}

/// Whether `JOURNAL_STREAM`'s `DEVICE:INODE` is the file `dev`, `ino`.
fn is_stream(named: &str, dev: u64, ino: u64) -> bool {
    named
        .split_once(':')
        .is_some_and(|(d, i)| d.parse() == Ok(dev) && i.parse() == Ok(ino))
}

/// The syslog priority of a level, as `sd-daemon(3)` prefixes read it.
fn syslog_priority(level: &tracing::Level) -> u8 {
    match *level {
        tracing::Level::ERROR => 3,
        tracing::Level::WARN => 4,
        tracing::Level::INFO => 6,
        _ => 7,
    }
}

/// An event format that starts each line with `<PRIORITY>` when `on`.
struct SyslogPrefix<F> {
    inner: F,
    on: bool,
}

impl<F> SyslogPrefix<F> {
    fn new(inner: F, on: bool) -> SyslogPrefix<F> {
        SyslogPrefix { inner, on }
    }
}

impl<S, N, F> FormatEvent<S, N> for SyslogPrefix<F>
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
        if !self.on {
            return self.inner.format_event(ctx, writer, event);
        }
        // journald files each line apart: a message of several lines (a
        // TOML error with its caret) gets the priority on every line, or
        // its cause is filed as info (black-box finding DE-2).
        let mut text = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut text), event)?;
        let priority = syslog_priority(event.metadata().level());
        writer.write_str(&with_priority(&text, priority))
    }
}

/// `text` (lines ending in a newline) with `<priority>` before each line.
fn with_priority(text: &str, priority: u8) -> String {
    let prefix = format!("<{priority}>");
    let lines = text.split_inclusive('\n');
    lines.map(|line| format!("{prefix}{line}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LogSection, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// What `HERON_LOG` may say; anything else is ignored (black-box
    /// finding: `warning` and an empty value silenced every line).
    #[test]
    fn heron_log_takes_levels_and_target_levels_only() {
        for good in [
            "debug",
            "WARN",
            "warn,heron_xfr=debug",
            " info , heron=trace",
            "off",
        ] {
            assert!(valid_directives(good), "{good}");
        }
        for bad in [
            "",
            "warning",
            "err",
            "info,",
            "heron_xfr=loud",
            "=debug",
            "x y",
        ] {
            assert!(!valid_directives(bad), "{bad}");
        }
    }

    /// Black-box AL-5: a target key was spliced into the filter as it
    /// was, so `"heron=trace,x"` set `heron` to trace.
    #[test]
    fn targets_must_be_module_paths() {
        let with = |key: &str| parse(&format!("[targets]\n{key:?} = \"warn\"\n"));
        for good in ["heron", "heron_xfr::secondary", "a1::b_2"] {
            assert!(with(good).is_ok(), "{good}");
        }
        for bad in [
            "heron=trace,x",
            "",
            "a=b,c",
            "heron::",
            "::heron",
            "he ron",
            "a:b",
        ] {
            let said = with(bad).unwrap_err();
            assert!(
                said.contains("expected a crate or module path"),
                "{bad}: {said}"
            );
        }
    }

    /// Black-box AL-11: `HERON_LOG` naming targets only silenced the rest.
    #[test]
    fn heron_log_of_targets_only_keeps_the_files_level() {
        let section = parse("level = \"warn\"\n").unwrap();
        let under = |text: &str| section.under_env(text.to_string());
        assert_eq!(under("heron_xfr=debug"), "warn,heron_xfr=debug");
        assert_eq!(under("error,heron_xfr=debug"), "error,heron_xfr=debug");
        assert_eq!(under("debug"), "debug");
    }

    #[test]
    fn the_journal_stream_is_recognised_by_device_and_inode() {
        assert!(is_stream("8:12345", 8, 12345));
        assert!(!is_stream("8:12345", 8, 12346));
        assert!(!is_stream("9:12345", 8, 12345));
        for bad in ["", ":", "8", "8:", ":12345", "x:y", "8:12345:1", "-1:5"] {
            assert!(!is_stream(bad, 8, 12345), "{bad:?}");
        }
    }

    /// Every line of a message of several lines carries the priority.
    #[test]
    fn each_line_of_a_message_gets_the_priority() {
        let text = "ERROR a.toml: TOML parse error\n  |\n9 | x\nwhy\n";
        assert_eq!(
            with_priority(text, 3),
            "<3>ERROR a.toml: TOML parse error\n<3>  |\n<3>9 | x\n<3>why\n"
        );
        assert_eq!(with_priority("one line\n", 6), "<6>one line\n");
    }

    #[test]
    fn priorities_are_syslogs() {
        use tracing::Level;
        let p = |l| syslog_priority(&l);
        assert_eq!(
            [
                p(Level::ERROR),
                p(Level::WARN),
                p(Level::INFO),
                p(Level::DEBUG),
                p(Level::TRACE)
            ],
            [3, 4, 6, 7, 7]
        );
    }

    #[test]
    fn defaults_are_text_at_info() {
        let log = parse("").unwrap();
        assert_eq!(log.format, LogFormat::Text);
        assert_eq!(log.directives(), "info");
    }

    #[test]
    fn targets_become_directives_after_the_level() {
        let log = parse(
            "format = \"json\"\nlevel = \"warn\"\n\
             targets = { \"heron_xfr\" = \"debug\", \"heron::serve\" = \"info\" }",
        )
        .unwrap();
        assert_eq!(log.format, LogFormat::Json);
        assert_eq!(log.directives(), "warn,heron::serve=info,heron_xfr=debug");
    }

    #[test]
    fn unknown_levels_formats_and_keys_are_errors() {
        let level = parse("level = \"loud\"").unwrap_err();
        assert!(level.contains("expected off, error"), "{level}");
        assert!(parse("targets = { heron = \"chatty\" }").is_err());
        assert!(parse("format = \"xml\"").is_err());
        assert!(parse("colour = true").is_err());
    }

    #[test]
    fn section_of_a_file_that_does_not_parse_is_the_default() {
        let dir = std::env::temp_dir().join(format!("heron-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("broken.toml");
        std::fs::write(&path, "[log\nformat = \"json\"").unwrap();
        assert_eq!(section_of(&path).format, LogFormat::Text);
        std::fs::write(&path, "[server]\nworkers = 1\n[log]\nformat = \"json\"\n").unwrap();
        assert_eq!(section_of(&path).format, LogFormat::Json);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
