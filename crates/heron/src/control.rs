//! The control socket: a Unix stream socket on which `heron reload` asks a
//! running server to re-read its changed zone files, and waits to hear
//! how that went (SIGHUP does the same but cannot answer).
//!
//! One command per connection: a line of text in, lines of text out, then
//! the server closes. The first word out is `ok` or `error`. The socket
//! is made readable and writable by its owner only: whoever may reload
//! the server's zones may already write its files.

use std::future::Future;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

/// Longest command line read; longer ones are refused.
const MAX_COMMAND: usize = 256;
/// How long a client may take to send its command.
const COMMAND_WAIT: Duration = Duration::from_secs(5);
/// How much, and how long, a client's leftover input is read after the
/// reply.
const DRAIN_LIMIT: u64 = 64 << 10;
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// What the server says back to one command.
pub struct Reply {
    pub ok: bool,
    /// The lines after the status word: the first sums up, any others
    /// say what went wrong.
    pub lines: Vec<String>,
}

impl Reply {
    fn error(line: String) -> Reply {
        Reply {
            ok: false,
            lines: vec![line],
        }
    }

    fn text(&self) -> String {
        let status = if self.ok { "ok" } else { "error" };
        let Some((first, rest)) = self.lines.split_first() else {
            return format!("{status}\n");
        };
        let mut text = format!("{status}: {first}\n");
        for line in rest {
            text += line;
            text.push('\n');
        }
        text
    }
}

/// Binds the control socket at `path`: a socket file left by a server
/// that is gone is replaced; one that a running server answers on is an
/// error, not taken over; anything else there (a data file, a folder, a
/// symbolic link) is an error and left as it is.
pub fn bind(path: &Path) -> Result<UnixListener, String> {
    use std::os::unix::fs::FileTypeExt;
    let shown = path.display();
    // Not followed: a link is not a socket, whatever it points to.
    if let Ok(found) = std::fs::symlink_metadata(path) {
        if !found.file_type().is_socket() {
            return Err(format!(
                "control socket {shown}: something that is not a socket is there; \
                 heron does not replace it: remove it or choose another path"
            ));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(format!(
                "control socket {shown}: another server answers on it"
            ));
        }
        std::fs::remove_file(path)
            .map_err(|e| format!("control socket {shown}: cannot remove the stale one: {e}"))?;
    }
    let listener = UnixListener::bind(path).map_err(|e| format!("control socket {shown}: {e}"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("control socket {shown}: {e}"))?;
    Ok(listener)
}

/// Answers commands until `shutdown` turns true, then removes the socket
/// file. `reload` is what the `reload` command runs.
pub async fn serve<F, Fut>(
    listener: UnixListener,
    path: PathBuf,
    mut shutdown: watch::Receiver<bool>,
    reload: F,
) where
    F: Fn() -> Fut,
    Fut: Future<Output = Reply>,
{
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => break,
        };
        let Ok((stream, _)) = accepted else {
            // Out of descriptors and the like: the next accept may work.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        // One command at a time: reloads do not overlap anyway.
        if let Err(e) = answer(stream, &reload).await {
            tracing::debug!("control connection ended: {e}");
        }
    }
    let _ = std::fs::remove_file(&path);
}

async fn answer<F, Fut>(mut stream: UnixStream, reload: &F) -> io::Result<()>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Reply>,
{
    let reply = match tokio::time::timeout(COMMAND_WAIT, read_command(&mut stream)).await {
        Err(_) => Reply::error("no command within 5 s".into()),
        Ok(Err(e)) => Reply::error(e.to_string()),
        Ok(Ok(command)) => match command.as_str() {
            "reload" => reload().await,
            other => Reply::error(format!("unknown command '{other}'; known: reload")),
        },
    };
    stream.write_all(reply.text().as_bytes()).await?;
    stream.shutdown().await?;
    // Read what is left of a command too long to take, until the client
    // closes: closing with it unread would reset the connection, and the
    // client could lose the reply.
    let (mut leftover, mut sink) = (stream.take(DRAIN_LIMIT), tokio::io::sink());
    let _ = tokio::time::timeout(DRAIN_WAIT, tokio::io::copy(&mut leftover, &mut sink)).await;
    Ok(())
}

/// The first line the client sends, trimmed; at most [`MAX_COMMAND`]
/// octets.
async fn read_command(stream: &mut UnixStream) -> io::Result<String> {
    let mut line = Vec::new();
    let mut limited = BufReader::new(stream.take(MAX_COMMAND as u64 + 1));
    limited.read_until(b'\n', &mut line).await?;
    if line.len() > MAX_COMMAND {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "command too long",
        ));
    }
    String::from_utf8(line)
        .map(|l| l.trim().to_string())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "command is not text"))
}

/// `heron reload`: sends `command` to the server on `path` and prints what
/// it says, waiting at most `wait`. Exit status 0 when it says `ok`, 1 when
/// it says `error`, 2 when it cannot be reached or does not answer in time.
pub fn send(path: &Path, command: &str, wait: Duration) -> ExitCode {
    match exchange_within(path, command, wait) {
        Ok(reply) => {
            print!("{reply}");
            if reply.starts_with("ok") {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
            eprintln!(
                "control socket {}: no answer within {} s: the server does not accept or \
                 answer (a reload may still be under way; its log says how it went; \
                 --timeout waits longer)",
                path.display(),
                wait.as_secs_f64()
            );
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!(
                "control socket {}: {e} (is heron serve running with this control socket?)",
                path.display()
            );
            ExitCode::from(2)
        }
    }
}

/// [`exchange`] bounded as a whole by `wait`: a connect to a server that
/// does not accept blocks once its backlog is full, and a read from one
/// that does not answer blocks forever. The exchange runs on a thread of
/// its own, left behind when the time is up (the process ends soon after).
fn exchange_within(path: &Path, command: &str, wait: Duration) -> io::Result<String> {
    let (done, outcome) = std::sync::mpsc::channel();
    let (path, command) = (path.to_path_buf(), command.to_string());
    std::thread::spawn(move || done.send(exchange(&path, &command)));
    outcome
        .recv_timeout(wait)
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
}

fn exchange(path: &Path, command: &str) -> io::Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(path)?;
    stream.write_all(format!("{command}\n").as_bytes())?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn socket_path(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("heron-control-{tag}-{}", std::process::id()))
    }

    /// Runs a control socket whose reload says `ok: reloaded` and returns
    /// what `exchange` got for each command.
    fn exchanges(tag: &str, commands: &[&str]) -> Vec<io::Result<String>> {
        let path = socket_path(tag);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let replies = rt.block_on(async {
            let (stop, stopped) = watch::channel(false);
            let listener = bind(&path).unwrap();
            let reload = || async {
                Reply {
                    ok: true,
                    lines: vec!["reloaded".into()],
                }
            };
            let server = tokio::spawn(serve(listener, path.clone(), stopped, reload));
            let mut replies = Vec::new();
            for c in commands {
                let (path, c) = (path.clone(), c.to_string());
                let reply = tokio::task::spawn_blocking(move || exchange(&path, &c));
                replies.push(reply.await.unwrap());
            }
            stop.send(true).unwrap();
            server.await.unwrap();
            replies
        });
        assert!(!path.exists(), "the socket file is removed at shutdown");
        replies
    }

    #[test]
    fn reload_is_answered_and_other_commands_refused() {
        let replies = exchanges("cmds", &["reload", "  reload  ", "stop", &"x".repeat(300)]);
        let texts: Vec<String> = replies.into_iter().map(Result::unwrap).collect();
        assert_eq!(texts[0], "ok: reloaded\n");
        assert_eq!(texts[1], "ok: reloaded\n");
        assert_eq!(texts[2], "error: unknown command 'stop'; known: reload\n");
        assert_eq!(texts[3], "error: command too long\n");
    }

    #[test]
    fn a_stale_socket_is_replaced_and_a_live_one_refused() {
        let path = socket_path("stale");
        let _ = std::fs::remove_file(&path);
        // A socket file nobody listens on, as a killed server leaves.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _in_runtime = rt.enter();
        let live = bind(&path).expect("stale file replaced");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "owner only");
        let err = bind(&path).err().unwrap();
        assert!(err.contains("another server answers"), "{err}");
        drop(live);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_server_that_neither_accepts_nor_answers_is_waited_for_a_bounded_time() {
        let path = socket_path("deaf");
        let _ = std::fs::remove_file(&path);
        // Bound, listening, never accepting: connects queue, nobody answers.
        let deaf = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let (done, outcome) = std::sync::mpsc::channel();
        let asked = path.clone();
        std::thread::spawn(move || {
            let _ = done.send(exchange_within(
                &asked,
                "reload",
                Duration::from_millis(300),
            ));
        });
        // Fails rather than hangs when the wait is not bounded.
        let result = outcome
            .recv_timeout(Duration::from_secs(20))
            .expect("exchange_within returned");
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::TimedOut);
        drop(deaf);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn what_is_not_a_socket_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("victim.txt");
        std::fs::write(&data, "precious").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&data, &link).unwrap();
        let folder = dir.path().join("folder");
        std::fs::create_dir(&folder).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _in_runtime = rt.enter();
        for path in [&data, &link, &folder] {
            let err = bind(path).expect_err("refused");
            assert!(err.contains("not a socket"), "{err}");
            assert!(err.contains(&path.display().to_string()), "{err}");
        }
        assert_eq!(std::fs::read_to_string(&data).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert!(folder.is_dir());
    }

    #[test]
    fn replies_put_the_status_first() {
        let reply = Reply {
            ok: false,
            lines: vec!["1 failed".into(), "a.zone:3: error: bad".into()],
        };
        assert_eq!(reply.text(), "error: 1 failed\na.zone:3: error: bad\n");
        let empty = Reply {
            ok: true,
            lines: vec![],
        };
        assert_eq!(empty.text(), "ok\n");
    }
}
