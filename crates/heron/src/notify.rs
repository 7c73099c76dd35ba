//! Telling systemd (a `Type=notify` unit) how the server is doing, over
//! the datagram socket named by `NOTIFY_SOCKET`. Without that variable
//! every call here does nothing.

use sd_notify::NotifyState;

/// The zones are loaded and every listener answers.
pub fn ready() {
    send(&[NotifyState::Ready, NotifyState::Status("serving")]);
}

/// A reload starts; [`ready`] says it ended. The monotonic time is what
/// systemd 253's `Type=notify-reload` asks for along with `RELOADING=1`.
pub fn reloading() {
    let mut states = vec![NotifyState::Reloading, NotifyState::Status("reloading")];
    states.extend(NotifyState::monotonic_usec_now().ok());
    send(&states);
}

/// The server stops: `systemctl status` shows "deactivating" at once,
/// not "active" for the seconds the last kept copies and journals take.
pub fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

/// A line for `systemctl status`, e.g. how far a long load is.
pub fn status(line: &str) {
    send(&[NotifyState::Status(line)]);
}

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!("cannot notify the service manager: {e}");
    }
}
