//! Running dig and kdig against a server and judging their output.

use std::fmt;
use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const DIG: &str = "/usr/bin/dig";
pub const KDIG: &str = "/usr/bin/kdig";

/// dig/kdig get this long in all (their own timeouts are 2 s × 2 tries).
const TOOL_DEADLINE: Duration = Duration::from_secs(15);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigTool {
    /// ISC dig (bind9-dnsutils).
    Dig,
    /// Knot's kdig (knot-dnsutils).
    Kdig,
}

impl DigTool {
    pub fn path(self) -> &'static str {
        match self {
            DigTool::Dig => DIG,
            DigTool::Kdig => KDIG,
        }
    }
}

impl fmt::Display for DigTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DigTool::Dig => "dig",
            DigTool::Kdig => "kdig",
        })
    }
}

/// What one dig/kdig run printed.
#[derive(Debug)]
pub struct DigOutput {
    pub tool: DigTool,
    /// The command line, for reports.
    pub command: String,
    /// `None` when the tool had to be killed at the deadline.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl DigOutput {
    /// Standard output; panics, showing the whole run, unless it exited 0.
    pub fn expect_success(&self) -> &str {
        assert!(
            self.status.is_some_and(|s| s.success()),
            "the tool failed:\n{self}"
        );
        &self.stdout
    }
}

impl fmt::Display for DigOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "$ {}\n(exit: {:?})\n{}{}",
            self.command, self.status, self.stdout, self.stderr
        )
    }
}

/// Runs `dig`/`kdig @ADDR -p PORT QNAME QTYPE +norec` (plus `+tcp`), with
/// bounded timeouts. Panics if the tool is not installed.
pub fn run_dig(tool: DigTool, addr: SocketAddr, qname: &str, qtype: &str, tcp: bool) -> DigOutput {
    let extra: &[&str] = if tcp { &["+tcp"] } else { &[] };
    run_dig_with(tool, addr, qname, qtype, extra)
}

/// kdig's `;; EXPIRE: N` value (`kdig +expire`), if it printed one.
pub fn kdig_expire(output: &str) -> Option<u32> {
    let line = output.lines().find(|l| l.starts_with(";; EXPIRE: "))?;
    line[";; EXPIRE: ".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// [`run_dig`] with other options (`+tls`, `+tls-ca=...`) after the usual.
pub fn run_dig_with(
    tool: DigTool,
    addr: SocketAddr,
    qname: &str,
    qtype: &str,
    extra: &[&str],
) -> DigOutput {
    let path = tool.path();
    if !Path::new(path).exists() {
        panic!("{path} is missing: {}", crate::INSTALL_HINT);
    }
    let mut args = vec![
        format!("@{}", addr.ip()),
        "-p".to_string(),
        addr.port().to_string(),
        qname.to_string(),
        qtype.to_string(),
        "+norec".to_string(),
    ];
    match tool {
        DigTool::Dig => args.extend(["+time=2".into(), "+tries=2".into()]),
        DigTool::Kdig => args.extend(["+time=2".into(), "+retry=1".into()]),
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let command = format!("{path} {}", args.join(" "));
    let mut child = Command::new(path)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {command}: {e}"));
    let mut stdout_pipe = child.stdout.take().expect("piped stdout");
    let mut stderr_pipe = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout_pipe.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr_pipe.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + TOOL_DEADLINE;
    let mut timed_out = true;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            timed_out = false;
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if timed_out {
        let _ = child.kill();
    }
    let status = child.wait().ok().filter(|_| !timed_out);
    let text = |v: Vec<u8>| String::from_utf8_lossy(&v).into_owned();
    DigOutput {
        tool,
        command,
        status,
        stdout: text(out_reader.join().unwrap_or_default()),
        stderr: text(err_reader.join().unwrap_or_default()),
    }
}

/// Lines that say a UDP reply came truncated and the tool retried over TCP.
fn is_truncation_notice(line: &str) -> bool {
    line.starts_with(";; WARNING: truncated reply") // kdig
        || line.starts_with(";; Truncated, retrying in TCP mode") // dig
}

/// Checks a dig/kdig run: exit status 0, the status line shows
/// `expected_status` (e.g. `NXDOMAIN`), and no line warns or reports an
/// error or a malformed message. The tool's notice that a UDP reply was
/// truncated (and retried over TCP) is required when `expect_truncation`
/// and a failure otherwise.
pub fn check_dig_output(
    out: &DigOutput,
    expected_status: &str,
    expect_truncation: bool,
) -> Result<(), String> {
    let mut problems = Vec::new();
    match out.status {
        Some(s) if s.success() => {}
        Some(s) => problems.push(format!("exit status {s}")),
        None => problems.push(format!("still running after {TOOL_DEADLINE:?}")),
    }
    // dig: "status: NXDOMAIN, id"; kdig: "status: NXDOMAIN; id".
    let found = out.stdout.lines().any(|l| {
        l.contains("->>HEADER<<-")
            && l.split("status: ")
                .nth(1)
                .is_some_and(|rest| rest.split([',', ';']).next() == Some(expected_status))
    });
    if !found {
        problems.push(format!("no header line with status {expected_status}"));
    }
    let mut truncated = false;
    for line in out.stdout.lines().chain(out.stderr.lines()) {
        if is_truncation_notice(line) {
            truncated = true;
            continue;
        }
        let lower = line.to_ascii_lowercase();
        if line.contains(";; WARNING")
            || line.contains(";; ERROR")
            || line.contains("Error")
            || lower.contains("malformed")
        {
            problems.push(format!("suspicious line: {line}"));
        }
    }
    if truncated != expect_truncation {
        problems.push(format!(
            "truncation over UDP: expected {expect_truncation}, saw {truncated}"
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\n{out}", problems.join("\n")))
    }
}

/// One query for [`check_with_dig_and_kdig`].
#[derive(Clone, Copy, Debug)]
pub struct ToolQuery<'a> {
    /// As typed on a command line, e.g. `sp\032ace.example.`.
    pub qname: &'a str,
    pub qtype: &'a str,
    /// `NOERROR`, `NXDOMAIN`, `REFUSED`, ...
    pub status: &'a str,
    /// The UDP answer does not fit 512 octets (kdig, which sends no EDNS by
    /// default, sees TC and retries over TCP).
    pub tc_at_512: bool,
    /// The UDP answer does not fit 1232 octets (dig's default EDNS size).
    pub tc_at_1232: bool,
}

/// Runs dig and kdig, each over UDP and TCP (`+tcp`), for `query` against
/// `addr` and checks each output with [`check_dig_output`]. Returns one
/// message per failed run.
pub fn check_with_dig_and_kdig(addr: SocketAddr, query: &ToolQuery) -> Vec<String> {
    let runs = [
        (DigTool::Dig, false, query.tc_at_1232),
        (DigTool::Dig, true, false),
        (DigTool::Kdig, false, query.tc_at_512),
        (DigTool::Kdig, true, false),
    ];
    std::thread::scope(|scope| {
        let handles: Vec<_> = runs
            .iter()
            .map(|&(tool, tcp, tc)| {
                scope.spawn(move || {
                    let out = run_dig(tool, addr, query.qname, query.qtype, tcp);
                    check_dig_output(&out, query.status, tc).err()
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| {
                h.join()
                    .unwrap_or_else(|_| Some("tool thread panicked".into()))
            })
            .collect()
    })
}

/// Runs BIND's `nsupdate` against `server`: `commands` (one `update ...`
/// line or more) for `zone`, signed with the TSIG key `name`/`secret`
/// (hmac-sha256), then `send`. Its output; success means NOERROR.
pub fn nsupdate(
    server: SocketAddr,
    (name, secret): (&str, &str),
    zone: &str,
    commands: &str,
) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new("nsupdate")
        .args(["-t", "5", "-y"])
        .arg(format!("hmac-sha256:{name}:{secret}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nsupdate runs (bind9-dnsutils)");
    let script = format!(
        "server {} {}\nzone {zone}\n{commands}\nsend\n",
        server.ip(),
        server.port()
    );
    let mut stdin = child.stdin.take().expect("piped");
    stdin.write_all(script.as_bytes()).expect("nsupdate reads");
    drop(stdin);
    child.wait_with_output().expect("nsupdate ends")
}

/// `heron ctl --socket SOCKET reconfigure`, with the `heron` binary:
/// whether it exited 0, and what it printed (stdout, then stderr).
pub fn heron_reconfigure(heron: &Path, socket: &Path) -> (bool, String) {
    let out = Command::new(heron)
        .args(["ctl", "--socket"])
        .arg(socket)
        .arg("reconfigure")
        .output()
        .expect("heron ctl runs");
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn output(tool: DigTool, code: i32, stdout: &str) -> DigOutput {
        DigOutput {
            tool,
            command: "test".into(),
            status: Some(ExitStatus::from_raw(code << 8)),
            stdout: stdout.into(),
            stderr: String::new(),
        }
    }

    const DIG: &str = ";; ->>HEADER<<- opcode: QUERY, status: NXDOMAIN, id: 1\n";
    const KDIG: &str = ";; ->>HEADER<<- opcode: QUERY; status: NOERROR; id: 2\n";

    #[test]
    fn status_lines_of_both_tools() {
        assert!(check_dig_output(&output(DigTool::Dig, 0, DIG), "NXDOMAIN", false).is_ok());
        assert!(check_dig_output(&output(DigTool::Dig, 0, DIG), "NOERROR", false).is_err());
        assert!(check_dig_output(&output(DigTool::Kdig, 0, KDIG), "NOERROR", false).is_ok());
        assert!(check_dig_output(&output(DigTool::Kdig, 9, KDIG), "NOERROR", false).is_err());
    }

    #[test]
    fn warnings_and_truncation() {
        let warn = format!(";; WARNING: Message parser reports malformed message packet.\n{DIG}");
        assert!(check_dig_output(&output(DigTool::Dig, 0, &warn), "NXDOMAIN", false).is_err());
        let tc = format!(";; WARNING: truncated reply from x, retrying over TCP\n{KDIG}");
        assert!(check_dig_output(&output(DigTool::Kdig, 0, &tc), "NOERROR", true).is_ok());
        assert!(check_dig_output(&output(DigTool::Kdig, 0, &tc), "NOERROR", false).is_err());
        assert!(check_dig_output(&output(DigTool::Kdig, 0, KDIG), "NOERROR", true).is_err());
        let tc = format!(";; Truncated, retrying in TCP mode.\n{DIG}");
        assert!(check_dig_output(&output(DigTool::Dig, 0, &tc), "NXDOMAIN", true).is_ok());
    }
}
