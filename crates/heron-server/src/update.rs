//! Where an admitted UPDATE goes from a transport: a bounded queue to the
//! server's update task, with the way back to the client (a datagram
//! socket to send from, or a channel the stream connection awaits). The
//! processor decides; this only carries the request and its answer.

use std::net::UdpSocket;
use std::sync::Arc;

use heron_proto::Rcode;
use tokio::sync::{mpsc, oneshot};

use crate::processor::UpdateRequest;
use heron_proto::time::unix_now;

/// Updates waiting for the update task at most; more are answered
/// SERVFAIL at once (the queue is what a flood of updates can hold).
pub const QUEUE_LEN: usize = 1024;

/// How the answer goes back.
#[derive(Debug)]
pub enum Reply {
    /// Sent from the socket the request came to, from the address it
    /// was sent to when that socket is bound to a wildcard.
    Datagram(Arc<UdpSocket>, heron_sys::udp::Destination),
    /// Written by the connection, which awaits it.
    Stream(oneshot::Sender<Vec<u8>>),
}

/// An UPDATE for the update task, and the way back.
#[derive(Debug)]
pub struct Update {
    pub request: Box<UpdateRequest>,
    reply: Reply,
}

impl Update {
    pub fn new(request: Box<UpdateRequest>, reply: Reply) -> Update {
        Update { request, reply }
    }

    /// Whether the answer goes back in a datagram (UDP).
    pub fn is_datagram(&self) -> bool {
        matches!(self.reply, Reply::Datagram(..))
    }

    /// Sends `response` to the client (a client gone is no error), and
    /// logs the exchange to the query log.
    pub fn answer(self, response: Vec<u8>) {
        self.request.log_answer(&response);
        self.request.keep_answer(&response);
        match self.reply {
            Reply::Datagram(socket, from) => {
                let to = self.request.peer;
                if let Err(e) = heron_sys::udp::send_one(&*socket, &response, to, from) {
                    tracing::debug!("update answer to {}: {e}", self.request.peer);
                }
            }
            Reply::Stream(channel) => {
                let _ = channel.send(response);
            }
        }
    }

    /// Answers with `rcode` alone (signed as the request was).
    pub fn answer_rcode(self, rcode: Rcode) {
        let response = self.request.response(rcode, unix_now());
        self.answer(response);
    }
}

/// The sending side of the queue.
pub type UpdateSender = mpsc::Sender<Update>;

/// A new queue to the update task.
pub fn queue() -> (UpdateSender, mpsc::Receiver<Update>) {
    mpsc::channel(QUEUE_LEN)
}
