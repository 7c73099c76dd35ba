//! The control socket: a Unix stream socket on which `heron ctl` (and its
//! short form `heron reload`) asks a running server to do something, and
//! waits to hear how that went (SIGHUP reloads too but cannot answer).
//!
//! One request per connection, then the server closes. A request is one
//! line of JSON, `{"version":1,"command":"zone-status","zones":[...]}`,
//! answered by one line of JSON, a [`Response`]. A bare word (`reload`) is
//! the older text form, answered in text: `ok` or `error` first. Each
//! client is served on a task of its own, with a wait for its request
//! and one for its reply to be read, and [`MAX_CLIENTS`] at most at once.
//! The socket is readable and writable by its owner only, from the
//! moment it appears at its path: whoever may control the server may
//! already write its files.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use heron_server::processor::cookies::random_bytes;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

/// The protocol version this build speaks; a request with another is
/// refused rather than half understood.
pub const PROTOCOL_VERSION: u32 = 1;
/// Longest request read; longer ones are refused.
const MAX_REQUEST: usize = 16 << 10;
/// How long a client may take to send its request.
const COMMAND_WAIT: Duration = Duration::from_secs(5);
/// How much, and how long, a client's leftover input is read after the
/// reply.
const DRAIN_LIMIT: u64 = 64 << 10;
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// What a client asks.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub version: u32,
    pub command: String,
    /// The zones it is about; empty for all (or none).
    #[serde(default)]
    pub zones: Vec<String>,
    /// `reload --force`: read the files even if they look unchanged.
    #[serde(default)]
    pub force: bool,
    /// `stats --reset`: set the counters back to zero.
    #[serde(default)]
    pub reset: bool,
    /// `roll ZONE KEY`: the key (id, tag or role).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl Request {
    pub fn new(command: &str) -> Request {
        Request {
            version: PROTOCOL_VERSION,
            command: command.into(),
            zones: Vec::new(),
            force: false,
            reset: false,
            key: None,
        }
    }
}

/// What the server says back to one request.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Response {
    pub version: u32,
    pub ok: bool,
    /// One line that sums up.
    pub message: String,
    /// What went wrong, one problem a line.
    #[serde(default)]
    pub errors: Vec<String>,
    /// The command's result, for `--json` and the tables.
    #[serde(default)]
    pub data: serde_json::Value,
    /// Not done because the request was refused before anything was
    /// tried (an unknown command or zone, a zone of the wrong kind, the
    /// socket busy), as opposed to tried and failed: `heron ctl` exits
    /// 4, not 1.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
}

impl Response {
    pub fn ok(message: impl Into<String>, data: serde_json::Value) -> Response {
        Response {
            version: PROTOCOL_VERSION,
            ok: true,
            message: message.into(),
            errors: Vec::new(),
            data,
            refused: false,
        }
    }

    /// The request is refused: nothing was tried.
    pub fn refused(message: impl Into<String>) -> Response {
        Response {
            refused: true,
            ..Response::error(message)
        }
    }

    pub fn error(message: impl Into<String>) -> Response {
        Response {
            ok: false,
            ..Response::ok(message, serde_json::Value::Null)
        }
    }

    /// The older text form: the status word and the message, then each
    /// error on a line.
    fn text(&self) -> String {
        let status = if self.ok { "ok" } else { "error" };
        let mut text = if self.message.is_empty() {
            format!("{status}\n")
        } else {
            format!("{status}: {}\n", self.message)
        };
        for line in &self.errors {
            text += line;
            text.push('\n');
        }
        text
    }
}

/// Whether a running server answers on the control socket at `path`:
/// asked before a start reads back journals and signed copies, which
/// that server owns, so that a second start by mistake leaves them be.
pub fn in_use(path: &Path) -> Option<String> {
    std::os::unix::net::UnixStream::connect(path)
        .is_ok()
        .then(|| {
            format!(
                "control socket {}: another server answers on it; nothing was read or changed",
                path.display()
            )
        })
}

/// Binds the control socket at `path`: a socket file left by a server
/// that is gone is replaced; one that a running server answers on is an
/// error, not taken over; anything else there (a data file, a folder, a
/// symbolic link) is an error and left as it is.
#[cfg(test)]
pub fn bind(path: &Path) -> Result<UnixListener, String> {
    let listener = bind_std(path)?;
    let shown = path.display();
    (listener.set_nonblocking(true)).map_err(|e| format!("control socket {shown}: {e}"))?;
    UnixListener::from_std(listener).map_err(|e| format!("control socket {shown}: {e}"))
}

/// [`bind`] outside the async runtime: a start binds the socket before it
/// reads anything, so that a second server started on the same files
/// finds it at once, not only once the first has loaded every zone
/// (black-box finding DE-1: a second start during a long load signed and
/// wrote keys beside the first). Connections wait in its backlog until
/// it is served.
pub fn bind_std(path: &Path) -> Result<std::os::unix::net::UnixListener, String> {
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
    let staged = Staging::create(path).map_err(|e| format!("control socket {shown}: {e}"))?;
    let listener = (staged.bind()).map_err(|e| format!("control socket {shown}: {e}"))?;
    match staged.publish() {
        Ok(()) => Ok(listener),
        // Two servers started at once: the other linked its socket,
        // listening already, after the look above.
        Err(e)
            if e.kind() == io::ErrorKind::AlreadyExists
                && std::os::unix::net::UnixStream::connect(path).is_ok() =>
        {
            Err(format!(
                "control socket {shown}: another server answers on it"
            ))
        }
        Err(e) => Err(format!("control socket {shown}: {e}")),
    }
}

/// A socket made owner-only before anyone else can reach it: bound in a
/// fresh folder only its owner may enter (mode 0700, beside the final
/// path so that both are on one file system, under a name nobody can
/// foresee), set to 0600 there, and only then linked at the final path. Binding at the final path and
/// setting the mode after left a moment in which the socket had the
/// mode the umask allows. A umask of 0o077 held around the bind would
/// close that moment too, but the umask belongs to the whole process:
/// a file another thread creates meanwhile would get it.
struct Staging {
    /// `.heron-` and 12 random hex digits, beside the target.
    folder: PathBuf,
    socket: PathBuf,
    target: PathBuf,
}

/// Names tried for the staging folder when one is taken: with 48
/// random bits, a second is already beyond chance.
const STAGING_TRIES: u32 = 3;

impl Staging {
    /// The private folder for `target`'s socket, created now under a
    /// random name. `mkdir` never follows a link nor takes a name that is
    /// there already: whatever someone planted beside the target (a link
    /// to a folder of theirs, say) is left alone, and another name tried.
    fn create(target: &Path) -> io::Result<Staging> {
        use std::os::unix::fs::DirBuilderExt;
        let parent = match target.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let mut tries = 0;
        let folder = loop {
            // Short, so that the staged path is hardly longer than the
            // target (a socket's path is limited to 107 octets).
            let suffix: [u8; 6] = random_bytes();
            let suffix: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
            let folder = parent.join(format!(".heron-{suffix}"));
            match std::fs::DirBuilder::new().mode(0o700).create(&folder) {
                Ok(()) => break folder,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < STAGING_TRIES => {
                    tries += 1
                }
                Err(e) => return Err(e),
            }
        };
        let staging = Staging {
            socket: folder.join("s"),
            folder,
            target: target.to_path_buf(),
        };
        // The umask can only narrow the mode; this makes it exactly 0700.
        std::fs::set_permissions(&staging.folder, std::fs::Permissions::from_mode(0o700))?;
        Ok(staging)
    }

    /// Binds the socket in the private folder and makes it owner-only.
    fn bind(&self) -> io::Result<std::os::unix::net::UnixListener> {
        let listener = std::os::unix::net::UnixListener::bind(&self.socket)?;
        std::fs::set_permissions(&self.socket, std::fs::Permissions::from_mode(0o600))?;
        Ok(listener)
    }

    /// Links the socket at the final path. A link never replaces what is
    /// there: if something took the path since it was checked, this fails.
    fn publish(&self) -> io::Result<()> {
        std::fs::hard_link(&self.socket, &self.target)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_dir(&self.folder);
    }
}

/// Answers requests until `shutdown` turns true, each client on a task
/// of its own (so a slow one holds up nobody else), then removes the
/// socket file. `handle` runs each request and says what became of it.
/// At shutdown the replies under way get [`SHUTDOWN_GRACE`], then every
/// client is dropped: none holds the process up.
pub async fn serve<F, Fut>(
    listener: UnixListener,
    path: PathBuf,
    mut shutdown: watch::Receiver<bool>,
    handle: F,
) where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let handle = Arc::new(handle);
    let mut clients = Clients::default();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => break,
        };
        match accepted {
            Ok((stream, _)) => clients.admit(stream, &handle),
            // Out of descriptors and the like: the next accept may work.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    drop(listener);
    let _ = std::fs::remove_file(&path);
    clients.finish().await;
}

/// Control clients held at once: waiting for their request, running
/// their command, or being written their reply. Past this, the one
/// that has waited longest without sending its request is told so and
/// dropped to make room; if none is waiting, the newcomer is refused
/// with a reply saying that the socket is busy.
pub const MAX_CLIENTS: usize = 64;
/// How long a reply may take to write: a client that does not read is
/// dropped.
const REPLY_WAIT: Duration = Duration::from_secs(5);
/// At shutdown, how long replies under way (`stop`'s among them) are
/// given before every client is dropped.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);
/// What a client dropped to make room is told.
const MADE_ROOM: &str = "error: no request yet, and the control socket is full: \
    dropped to make room for another client\n";

/// The clients waiting for their request, oldest first, by number, each
/// with the means to tell it to go.
type Waiting = VecDeque<(u64, oneshot::Sender<()>)>;

/// The clients being served, and those of them still waiting for their
/// request.
#[derive(Default)]
struct Clients {
    served: JoinSet<()>,
    waiting: Arc<Mutex<Waiting>>,
    next_id: u64,
    /// Clients refused as busy, each being told so; as many at most.
    refused: JoinSet<()>,
}

impl Clients {
    /// Serves `stream` on a task of its own, making room for it first
    /// if [`MAX_CLIENTS`] are held.
    fn admit<F, Fut>(&mut self, stream: UnixStream, handle: &Arc<F>)
    where
        F: Fn(Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Response> + Send + 'static,
    {
        while self.served.try_join_next().is_some() {}
        while self.refused.try_join_next().is_some() {}
        if self.served.len() >= MAX_CLIENTS && !self.make_room() {
            if self.refused.len() < MAX_CLIENTS {
                self.refused.spawn(refuse(stream));
            }
            return;
        }
        let (id, (tell, told)) = (self.next_id, oneshot::channel());
        self.next_id += 1;
        self.waiting_list().push_back((id, tell));
        let waiting = self.waiting.clone();
        self.served
            .spawn(client(stream, handle.clone(), told, move || {
                let mut list = waiting.lock().unwrap_or_else(|e| e.into_inner());
                list.retain(|(waiter, _)| *waiter != id);
            }));
    }

    fn waiting_list(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells the client that has waited longest for its request to go;
    /// false if every client held has sent its request.
    fn make_room(&self) -> bool {
        let Some((_, tell)) = self.waiting_list().pop_front() else {
            return false;
        };
        // A client gone meanwhile has made room itself.
        let _ = tell.send(());
        true
    }

    /// Gives the clients [`SHUTDOWN_GRACE`] to finish, then drops them.
    async fn finish(mut self) {
        let all_done = async { while self.served.join_next().await.is_some() {} };
        if tokio::time::timeout(SHUTDOWN_GRACE, all_done)
            .await
            .is_err()
        {
            tracing::debug!("control clients still connected at shutdown: dropped");
        }
        self.served.abort_all();
        self.refused.abort_all();
    }
}

/// One client: its request read (unless it is `told` to make room
/// first; `requested` runs once it has sent it), run and answered.
async fn client<F, Fut>(
    mut stream: UnixStream,
    handle: Arc<F>,
    told: oneshot::Receiver<()>,
    requested: impl FnOnce(),
) where
    F: Fn(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let line = tokio::select! {
        line = tokio::time::timeout(COMMAND_WAIT, read_line(&mut stream)) => line,
        Ok(()) = told => {
            // Sent nothing yet: the message fits the empty buffer.
            let _ = stream.try_write(MADE_ROOM.as_bytes());
            return;
        }
    };
    requested();
    if let Err(e) = answer(stream, line, &*handle).await {
        tracing::debug!("control connection ended: {e}");
    }
}

/// A client past [`MAX_CLIENTS`] when every one held is busy: its
/// request is read and answered with an error that says so.
async fn refuse(mut stream: UnixStream) {
    let busy = |_| async {
        Response::refused(format!(
            "the control socket is busy: {MAX_CLIENTS} clients at once, each running its \
             command or being answered; try again in a few seconds"
        ))
    };
    let line = tokio::time::timeout(COMMAND_WAIT, read_line(&mut stream)).await;
    let _ = answer(stream, line, &busy).await;
}

/// Answers the request `line` (or says why there is none), writes the
/// reply within [`REPLY_WAIT`], and reads what the client sends after.
async fn answer<F, Fut>(
    mut stream: UnixStream,
    line: Result<io::Result<String>, tokio::time::error::Elapsed>,
    handle: &F,
) -> io::Result<()>
where
    F: Fn(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let reply = match line {
        Err(_) => Response::error("no request within 5 s").text(),
        // A JSON request gets its refusal in JSON (black-box finding
        // BB-7: `heron ctl` read the text as a server that is not ours).
        Ok(Err(e)) if e.get_ref().is_some_and(|e| e.is::<JsonTooLong>()) => {
            let mut text = serde_json::to_string(&Response::refused(e.to_string()))
                .expect("a response serializes");
            text.push('\n');
            text
        }
        Ok(Err(e)) => Response::error(e.to_string()).text(),
        Ok(Ok(line)) if line.starts_with('{') => {
            let response = match serde_json::from_str::<Request>(&line) {
                Err(e) => Response::refused(format!("request is not understood: {e}")),
                Ok(r) if r.version != PROTOCOL_VERSION => Response::refused(format!(
                    "protocol version {} is not spoken here (this server speaks {PROTOCOL_VERSION}): \
                     use the heron ctl of the server's version",
                    r.version
                )),
                Ok(request) => handle(request).await,
            };
            let mut text = serde_json::to_string(&response).expect("a response serializes");
            text.push('\n');
            text
        }
        Ok(Ok(line)) => match line.as_str() {
            "reload" => handle(Request::new("reload")).await.text(),
            other => Response::refused(format!("unknown command '{other}'; known: reload")).text(),
        },
    };
    let written = async {
        stream.write_all(reply.as_bytes()).await?;
        stream.shutdown().await
    };
    tokio::time::timeout(REPLY_WAIT, written)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the client does not read"))??;
    // Read what is left of a request too long to take, until the client
    // closes: closing with it unread would reset the connection, and the
    // client could lose the reply.
    let (mut leftover, mut sink) = (stream.take(DRAIN_LIMIT), tokio::io::sink());
    let _ = tokio::time::timeout(DRAIN_WAIT, tokio::io::copy(&mut leftover, &mut sink)).await;
    Ok(())
}

/// The first line the client sends, trimmed; at most [`MAX_REQUEST`]
/// octets.
async fn read_line(stream: &mut UnixStream) -> io::Result<String> {
    let mut line = Vec::new();
    let mut limited = BufReader::new(stream.take(MAX_REQUEST as u64 + 1));
    limited.read_until(b'\n', &mut line).await?;
    if line.len() > MAX_REQUEST {
        return Err(match line.first() {
            Some(b'{') => io::Error::new(io::ErrorKind::InvalidData, JsonTooLong),
            _ => io::Error::new(io::ErrorKind::InvalidData, "request too long"),
        });
    }
    String::from_utf8(line)
        .map(|l| l.trim().to_string())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "request is not text"))
}

/// A JSON request longer than [`MAX_REQUEST`].
#[derive(Debug)]
struct JsonTooLong;

impl std::fmt::Display for JsonTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "request too long: at most {} KiB (name fewer zones at once)",
            MAX_REQUEST >> 10
        )
    }
}

impl std::error::Error for JsonTooLong {}

/// Why a request got no response.
pub enum Unanswered {
    /// Nothing within the wait, the request not even taken.
    TimedOut,
    /// The request was written and no result came within the wait: the
    /// server may still be carrying it out (or be wedged: a socket takes
    /// a request into its buffer either way).
    NoResultYet,
    /// Cannot connect, or the exchange broke.
    Unreachable(io::Error),
    /// Something came back that is not a response.
    Garbled(String),
}

impl Unanswered {
    /// What to tell the user, naming the socket at `path`.
    pub fn explain(&self, path: &Path, wait: Duration) -> String {
        let shown = path.display();
        match self {
            Unanswered::TimedOut => format!(
                "control socket {shown}: no answer within {} s: the server does not accept or \
                 answer (it may still be loading its zones at its start, or a reload may still \
                 be under way; its log says how it went; --timeout waits longer)",
                wait.as_secs_f64()
            ),
            Unanswered::NoResultYet => format!(
                "control socket {shown}: request sent, no result within {} s: the server may \
                 still be loading its zones at its start (it answers once they are loaded), or \
                 carrying the request out (a transfer or a reload can take longer; its log says \
                 how it went), or it does not answer; --timeout waits longer",
                wait.as_secs_f64()
            ),
            Unanswered::Unreachable(e) if e.kind() == io::ErrorKind::PermissionDenied => format!(
                "control socket {shown}: {e}: only the server's user (and root) may use it; run \
                 heron ctl as that user"
            ),
            // A file or folder there is no server's socket: said so, not
            // "connection refused" (black-box finding DE-10).
            Unanswered::Unreachable(_) if not_a_socket(path) => format!(
                "control socket {shown}: what is there is not a socket (a file or folder): \
                 check the path, the server's [server] control or --control"
            ),
            Unanswered::Unreachable(e) => format!(
                "control socket {shown}: {e} (is heron serve running with this control socket?)"
            ),
            Unanswered::Garbled(what) => {
                format!("control socket {shown}: the answer is not understood: {what}")
            }
        }
    }
}

/// Whether something other than a socket is at `path` (a link followed,
/// as connecting follows it).
fn not_a_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| !m.file_type().is_socket())
}

/// Sends `request` to the server on `path` and returns its response,
/// waiting at most `wait` in all.
pub fn ask(path: &Path, request: &Request, wait: Duration) -> Result<Response, Unanswered> {
    let line = serde_json::to_string(request).expect("a request serializes");
    if line.len() > MAX_REQUEST {
        // Refused here as the server would refuse it: a request, not the
        // server, is at fault (black-box finding BB-7: exit 3, "not
        // understood").
        let why = format!("{JsonTooLong} ({} KiB asked)", line.len().div_ceil(1024));
        return Ok(Response::refused(why));
    }
    let sent = Arc::new(AtomicBool::new(false));
    let text = exchange_within(path, &line, wait, sent.clone()).map_err(|e| match e.kind() {
        io::ErrorKind::TimedOut if sent.load(Ordering::Acquire) => Unanswered::NoResultYet,
        io::ErrorKind::TimedOut => Unanswered::TimedOut,
        _ => Unanswered::Unreachable(e),
    })?;
    if text.trim().is_empty() {
        // A server stopping drops the clients it has not answered.
        let why = "the server closed the connection without an answer (is it stopping?)";
        return Err(Unanswered::Unreachable(io::Error::other(why)));
    }
    serde_json::from_str(text.trim()).map_err(|e| Unanswered::Garbled(format!("{e}: {text}")))
}

/// [`exchange`] bounded as a whole by `wait`: a connect to a server that
/// does not accept blocks once its backlog is full, and a read from one
/// that does not answer blocks forever. The exchange runs on a thread of
/// its own, left behind when the time is up (the process ends soon after).
/// `sent` is set once the request is written.
fn exchange_within(
    path: &Path,
    command: &str,
    wait: Duration,
    sent: Arc<AtomicBool>,
) -> io::Result<String> {
    let (done, outcome) = std::sync::mpsc::channel();
    let (path, command) = (path.to_path_buf(), command.to_string());
    std::thread::spawn(move || done.send(exchange_noting(&path, &command, &sent)));
    outcome
        .recv_timeout(wait)
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
}

/// One request and its response, with no bound on the wait.
#[cfg(test)]
fn exchange(path: &Path, command: &str) -> io::Result<String> {
    exchange_noting(path, command, &AtomicBool::new(false))
}

/// [`exchange`], setting `sent` once the request is written.
fn exchange_noting(path: &Path, command: &str, sent: &AtomicBool) -> io::Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(path)?;
    stream.write_all(format!("{command}\n").as_bytes())?;
    sent.store(true, Ordering::Release);
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    fn socket_path(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("heron-control-{tag}-{}", std::process::id()))
    }

    #[test]
    fn a_request_sent_without_a_result_is_not_called_unreachable() {
        let path = socket_path("no-result");
        let _ = std::fs::remove_file(&path);
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let wait = Duration::from_millis(300);
        let Err(why) = ask(&path, &Request::new("status"), wait) else {
            panic!("nobody answers");
        };
        let said = why.explain(&path, wait);
        assert!(
            said.contains("request sent, no result within 0.3 s"),
            "{said}"
        );
        std::fs::remove_file(&path).unwrap();
        let denied = Unanswered::Unreachable(io::ErrorKind::PermissionDenied.into());
        let said = denied.explain(&path, wait);
        assert!(said.contains("only the server's user"), "{said}");
        assert!(!said.contains("is heron serve running"), "{said}");
    }

    /// A file or folder at the path is said to be no socket, not
    /// "connection refused" (black-box finding DE-10).
    #[test]
    fn a_file_at_the_socket_path_is_said_to_be_no_socket() {
        let path = socket_path("not-a-socket");
        std::fs::write(&path, "x").unwrap();
        let wait = Duration::from_millis(300);
        let Err(why) = ask(&path, &Request::new("status"), wait) else {
            panic!("nobody answers");
        };
        let said = why.explain(&path, wait);
        assert!(said.contains("what is there is not a socket"), "{said}");
        std::fs::remove_file(&path).unwrap();
        let said = why.explain(&path, wait);
        assert!(said.contains("is heron serve running"), "{said}");
    }

    /// Runs a control socket whose `reload` says `ok: reloaded`, and whose
    /// other commands fail naming themselves, and returns what `exchange`
    /// got for each line sent.
    fn exchanges(tag: &str, commands: &[&str]) -> Vec<io::Result<String>> {
        let path = socket_path(tag);
        let rt = runtime();
        let replies = rt.block_on(async {
            let (stop, stopped) = watch::channel(false);
            let listener = bind(&path).unwrap();
            let handle = |request: Request| async move {
                match request.command.as_str() {
                    "reload" => Response::ok("reloaded", serde_json::json!(request.zones)),
                    other => Response::error(format!("no {other} here")),
                }
            };
            let server = tokio::spawn(serve(listener, path.clone(), stopped, handle));
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
    fn the_text_form_knows_reload_only() {
        let long = "x".repeat(MAX_REQUEST + 1);
        let at_limit = "x".repeat(MAX_REQUEST - 1);
        let replies = exchanges("cmds", &["reload", "  reload  ", "stop", &at_limit, &long]);
        let texts: Vec<String> = replies.into_iter().map(Result::unwrap).collect();
        assert_eq!(texts[0], "ok: reloaded\n");
        assert_eq!(texts[1], "ok: reloaded\n");
        assert_eq!(texts[2], "error: unknown command 'stop'; known: reload\n");
        assert!(
            texts[3].starts_with("error: unknown command 'xxx"),
            "read whole at the limit"
        );
        assert_eq!(texts[4], "error: request too long\n");
    }

    /// A JSON request past the limit is refused in JSON, which `heron
    /// ctl` reads (black-box finding BB-7: plain text, "not understood",
    /// exit 3); `ask` refuses to send one.
    #[test]
    fn a_json_request_too_long_is_refused_in_json() {
        let long = format!("{{\"command\":\"{}\"}}", "x".repeat(MAX_REQUEST));
        let refused = response_to(&long);
        assert!(refused.refused && !refused.ok, "{refused:?}");
        assert!(
            refused.message.contains("request too long: at most 16 KiB"),
            "{refused:?}"
        );
        let zones = (0..1000)
            .map(|i| format!("zone{i:05}.example.test"))
            .collect();
        let request = Request {
            zones,
            ..Request::new("reload")
        };
        let nowhere = Path::new("/nonexistent/heron-control.sock");
        let Ok(asked) = ask(nowhere, &request, Duration::from_secs(1)) else {
            panic!("refused before connecting");
        };
        assert!(
            asked.refused && asked.message.contains("KiB asked"),
            "{asked:?}"
        );
    }

    fn response_to(line: &str) -> Response {
        let text = exchanges("json", &[line]).pop().unwrap().unwrap();
        assert!(text.ends_with('\n') && text.lines().count() == 1, "{text}");
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn json_requests_get_json_responses() {
        let request = Request {
            zones: vec!["a.test".into()],
            ..Request::new("reload")
        };
        let response = response_to(&serde_json::to_string(&request).unwrap());
        assert!(response.ok);
        assert_eq!(response.version, PROTOCOL_VERSION);
        assert_eq!(response.data, serde_json::json!(["a.test"]));
        let failed = response_to(r#"{"version":1,"command":"nope"}"#);
        assert!(!failed.ok);
        assert_eq!(failed.message, "no nope here");
    }

    #[test]
    fn malformed_and_other_version_requests_are_refused_with_the_reason() {
        let garbled = response_to(r#"{"version":1,"command":"#);
        assert!(garbled.message.contains("not understood"), "{garbled:?}");
        let no_command = response_to(r#"{"version":1}"#);
        assert!(no_command.message.contains("command"), "{no_command:?}");
        let future = response_to(r#"{"version":2,"command":"reload"}"#);
        assert!(!future.ok);
        assert!(future.message.contains("protocol version 2"), "{future:?}");
    }

    /// A client that connects and sends nothing is given up on, and the
    /// next one is answered.
    #[test]
    fn a_silent_client_does_not_hold_the_socket() {
        let path = socket_path("silent");
        let rt = runtime();
        rt.block_on(async {
            let (stop, stopped) = watch::channel(false);
            let listener = bind(&path).unwrap();
            let handle = |_: Request| async { Response::ok("reloaded", serde_json::Value::Null) };
            let server = tokio::spawn(serve(listener, path.clone(), stopped, handle));
            let silent = UnixStream::connect(&path).await.unwrap();
            let asked = path.clone();
            let reply = tokio::task::spawn_blocking(move || exchange(&asked, "reload"));
            assert_eq!(reply.await.unwrap().unwrap(), "ok: reloaded\n");
            let mut told = String::new();
            let mut silent = silent;
            silent.read_to_string(&mut told).await.unwrap();
            assert_eq!(told, "error: no request within 5 s\n");
            stop.send(true).unwrap();
            server.await.unwrap();
        });
    }

    /// A control socket whose `reload` waits until `release` turns true.
    struct HeldReloads {
        stop: watch::Sender<bool>,
        release: watch::Sender<bool>,
        /// The reloads begun.
        running: Arc<std::sync::atomic::AtomicUsize>,
        server: tokio::task::JoinHandle<()>,
    }

    fn serve_held_reloads(path: &Path) -> HeldReloads {
        let (stop, stopped) = watch::channel(false);
        let (release, released) = watch::channel(false);
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = running.clone();
        let handle = move |_: Request| {
            let (mut released, running) = (released.clone(), counted.clone());
            async move {
                running.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let _ = released.wait_for(|r| *r).await;
                Response::ok("reloaded", serde_json::Value::Null)
            }
        };
        let listener = bind(path).unwrap();
        let server = tokio::spawn(serve(listener, path.to_path_buf(), stopped, handle));
        HeldReloads {
            stop,
            release,
            running,
            server,
        }
    }

    impl HeldReloads {
        fn running(&self) -> usize {
            self.running.load(std::sync::atomic::Ordering::Relaxed)
        }

        /// Connects `count` clients that each send `reload`, and waits
        /// (bounded) until all their reloads run.
        async fn clients_running_reloads(&self, path: &Path, count: usize) -> Vec<UnixStream> {
            let mut clients = Vec::new();
            for _ in 0..count {
                let mut client = UnixStream::connect(path).await.unwrap();
                client.write_all(b"reload\n").await.unwrap();
                clients.push(client);
            }
            for _ in 0..1000 {
                if self.running() == count {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(self.running(), count);
            clients
        }
    }

    /// At the limit every client's command runs; past it, with none of
    /// them waiting for its request, the newcomer is told the socket is
    /// busy (in the form it asked in); once they are done, the next one
    /// is served.
    #[test]
    fn past_the_limit_with_every_client_busy_a_newcomer_is_refused() {
        let path = socket_path("busy");
        runtime().block_on(async {
            let held = serve_held_reloads(&path);
            let busy = held.clients_running_reloads(&path, MAX_CLIENTS).await;
            let asked = path.clone();
            let json = r#"{"version":1,"command":"status"}"#;
            let refused = tokio::task::spawn_blocking(move || exchange(&asked, json));
            let refused: Response = serde_json::from_str(&refused.await.unwrap().unwrap()).unwrap();
            assert!(!refused.ok);
            assert!(refused.message.contains("busy"), "{refused:?}");
            assert!(refused.message.contains("64 clients"), "{refused:?}");
            held.release.send(true).unwrap();
            for mut client in busy {
                let mut told = String::new();
                client.read_to_string(&mut told).await.unwrap();
                assert_eq!(told, "ok: reloaded\n");
            }
            assert_eq!(reload_once_slots_free(&path).await, "ok: reloaded\n");
            held.stop.send(true).unwrap();
            held.server.await.unwrap();
        });
    }

    /// Asks for a reload until the server has noticed that the answered
    /// clients closed: a client's slot is freed when its task ends, just
    /// after the client reads its answer and closes, so the first newcomer
    /// may still be told the socket is busy. Bounded to 10 s.
    async fn reload_once_slots_free(path: &std::path::Path) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let asked = path.to_path_buf();
            let told = tokio::task::spawn_blocking(move || exchange(&asked, "reload"));
            let told = told.await.unwrap().unwrap();
            if !told.contains("busy") || std::time::Instant::now() > deadline {
                return told;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Shutdown gives clients a moment, not more: one whose command is
    /// still running is dropped, and `serve` returns.
    #[test]
    fn shutdown_does_not_wait_for_a_command_that_does_not_end() {
        let path = socket_path("shutdown");
        runtime().block_on(async {
            let held = serve_held_reloads(&path);
            let mut clients = held.clients_running_reloads(&path, 1).await;
            held.stop.send(true).unwrap();
            let ended = tokio::time::timeout(Duration::from_secs(20), held.server).await;
            assert!(ended.is_ok(), "serve returned");
            let mut told = String::new();
            clients[0].read_to_string(&mut told).await.unwrap();
            assert_eq!(told, "", "dropped without an answer");
        });
        assert!(!path.exists());
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

    /// No moment of wider access, by construction: the socket exists in a
    /// folder nobody else may enter until it is owner-only, and appears
    /// at its path only then; nothing of the staging is left.
    #[test]
    fn the_socket_is_owner_only_before_it_appears_at_its_path() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("heron.sock");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _in_runtime = rt.enter();
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
        let staging = Staging::create(&path).unwrap();
        assert_eq!(
            staging.folder.parent(),
            Some(dir.path()),
            "same file system"
        );
        assert_eq!(mode(&staging.folder), 0o700, "only its owner may enter");
        let uid = std::fs::metadata(dir.path()).unwrap().uid();
        assert_eq!(std::fs::metadata(&staging.folder).unwrap().uid(), uid);
        let listener = staging.bind().unwrap();
        assert_eq!(mode(&staging.socket), 0o600);
        assert!(!path.exists(), "not at its path before it is owner-only");
        staging.publish().unwrap();
        assert_eq!(mode(&path), 0o600);
        drop(staging);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(left.len(), 1, "only the socket: {left:?}");
        // Reached at its path after the staging name is gone.
        let _client = std::os::unix::net::UnixStream::connect(&path).unwrap();
        drop(listener);
        // Something that took the path meanwhile is never replaced.
        let staging = Staging::create(&path).unwrap();
        let _second = staging.bind().unwrap();
        assert!(staging.publish().is_err());
        assert_eq!(mode(&path), 0o600);
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
                Arc::default(),
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
    fn text_replies_put_the_status_first() {
        let reply = Response {
            errors: vec!["a.zone:3: error: bad".into()],
            ..Response::error("1 failed")
        };
        assert_eq!(reply.text(), "error: 1 failed\na.zone:3: error: bad\n");
        let empty = Response::ok("", serde_json::Value::Null);
        assert_eq!(empty.text(), "ok\n");
    }
}
