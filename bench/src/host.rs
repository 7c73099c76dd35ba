//! The machine and the build measured: facts the run records in its
//! results (and the transfer benchmark in its own).

use std::fs;
use std::path::Path;

pub fn read_first_line(path: &str, key: &str) -> String {
    fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with(key))
                .map(|l| l.split_once(':').map_or(l, |x| x.1).trim().to_string())
        })
        .unwrap_or_default()
}

/// Which Heron was measured: the commit checked out (and whether it had
/// changes) and when the binary was built.
pub fn heron_build(heron: &Path) -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let commit = git(&["rev-parse", "--short", "HEAD"]);
    let dirty = !git(&["status", "--porcelain", "--untracked-files=no"]).is_empty();
    let built = fs::metadata(heron)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(String::new(), |d| utc(d.as_secs()));
    format!(
        "commit {commit}{}, binary built {built}",
        if dirty {
            " with uncommitted changes"
        } else {
            ""
        }
    )
}

/// "YYYY-MM-DD HH:MM UTC" from Unix seconds.
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let (h, m) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    let (y, mo, d) = heron_proto::rdata::civil_from_days(days);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{m:02} UTC")
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The 1, 5 and 15 minute load averages.
pub fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
