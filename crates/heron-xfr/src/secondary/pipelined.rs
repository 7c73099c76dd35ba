//! One long-lived TCP connection to a primary carrying many single-answer
//! exchanges at once (RFC 7766 6.2.1.1 pipelining): SOA checks of many
//! zones go out back to back and their answers come back in any order,
//! matched by message ID. A reader task owns the read half; whoever sends
//! takes the write half for one write.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::oneshot;
use tokio::time::timeout;

use super::tls::Stream;

type Waiting = Arc<Mutex<HashMap<u16, oneshot::Sender<Vec<u8>>>>>;

/// Why an exchange on a line failed.
#[derive(Debug)]
pub enum LineError {
    Io(io::Error),
    Timeout,
    /// The connection closed before the answer came (the primary closes
    /// idle connections): worth one more try on a new line.
    Closed,
}

/// A pipelined connection. Once it fails, it stays failed; the owner
/// replaces it.
pub struct Line {
    writer: tokio::sync::Mutex<WriteHalf<Stream>>,
    waiting: Waiting,
    next_id: AtomicU16,
    open: Arc<AtomicBool>,
}

impl Line {
    /// Starts the reader task on a connected `stream` (TLS or not).
    pub fn start(stream: Stream) -> Line {
        let (read, write) = tokio::io::split(stream);
        let waiting: Waiting = Arc::default();
        let open = Arc::new(AtomicBool::new(true));
        tokio::spawn(read_answers(read, waiting.clone(), open.clone()));
        Line {
            writer: tokio::sync::Mutex::new(write),
            waiting,
            next_id: AtomicU16::new(heron_proto::message::random_id()),
            open,
        }
    }

    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    /// Sends `query` (its ID replaced by one unique on this line; `sign`
    /// runs after that, so a TSIG MAC covers the final ID) and returns the
    /// answer with the same ID.
    pub async fn exchange(
        &self,
        mut query: Vec<u8>,
        sign: impl FnOnce(&mut Vec<u8>),
        io_timeout: Duration,
    ) -> Result<Vec<u8>, LineError> {
        let (id, answer) = self.wait_for_new_id();
        // Registered after the reader ended: nobody would answer.
        if !self.is_open() {
            self.waiting.lock().unwrap().remove(&id);
            return Err(LineError::Closed);
        }
        query[..2].copy_from_slice(&id.to_be_bytes());
        sign(&mut query);
        let mut framed = (query.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&query);
        let sent = {
            let mut writer = self.writer.lock().await;
            timeout(io_timeout, async {
                writer.write_all(&framed).await?;
                writer.flush().await // TLS holds what it has not sent
            })
            .await
        };
        let outcome = match sent {
            Err(_) => Err(LineError::Timeout),
            Ok(Err(e)) => Err(LineError::Io(e)),
            Ok(Ok(())) => match timeout(io_timeout, answer).await {
                Err(_) => Err(LineError::Timeout),
                Ok(Err(_)) => Err(LineError::Closed),
                Ok(Ok(msg)) => return Ok(msg),
            },
        };
        self.waiting.lock().unwrap().remove(&id);
        if !matches!(outcome, Err(LineError::Timeout)) {
            self.open.store(false, Ordering::Relaxed);
        }
        outcome
    }

    /// An ID no exchange on this line is waiting for, registered.
    fn wait_for_new_id(&self) -> (u16, oneshot::Receiver<Vec<u8>>) {
        let (tx, rx) = oneshot::channel();
        let mut waiting = self.waiting.lock().unwrap();
        loop {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            if let std::collections::hash_map::Entry::Vacant(slot) = waiting.entry(id) {
                slot.insert(tx);
                return (id, rx);
            }
        }
    }
}

/// Hands each answer to the exchange waiting for its ID; when the
/// connection ends, every exchange still waiting learns it (its sender is
/// dropped).
async fn read_answers(mut read: ReadHalf<Stream>, waiting: Waiting, open: Arc<AtomicBool>) {
    loop {
        let mut len = [0u8; 2];
        if read.read_exact(&mut len).await.is_err() {
            break;
        }
        let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
        if msg.len() < 2 || read.read_exact(&mut msg).await.is_err() {
            break;
        }
        let id = u16::from_be_bytes([msg[0], msg[1]]);
        if let Some(tx) = waiting.lock().unwrap().remove(&id) {
            let _ = tx.send(msg);
        }
    }
    open.store(false, Ordering::Relaxed);
    waiting.lock().unwrap().clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use tokio::net::{TcpListener, TcpStream};

    async fn connect(addr: SocketAddr) -> Line {
        Line::start(Stream::Tcp(TcpStream::connect(addr).await.unwrap()))
    }

    /// A server that reads `n` framed queries, then answers them in reverse
    /// order, each answer being the query itself.
    async fn reversing_server(n: usize) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut queries = Vec::new();
            for _ in 0..n {
                let mut len = [0u8; 2];
                s.read_exact(&mut len).await.unwrap();
                let mut q = vec![0u8; u16::from_be_bytes(len) as usize];
                s.read_exact(&mut q).await.unwrap();
                queries.push(q);
            }
            for q in queries.into_iter().rev() {
                s.write_all(&(q.len() as u16).to_be_bytes()).await.unwrap();
                s.write_all(&q).await.unwrap();
            }
            // Then close: anything still waiting must learn it.
        });
        addr
    }

    #[tokio::test]
    async fn answers_in_any_order_reach_their_askers() {
        let addr = reversing_server(20).await;
        let line = Arc::new(connect(addr).await);
        let mut asks = Vec::new();
        for i in 0..20u8 {
            let line = line.clone();
            asks.push(tokio::spawn(async move {
                let query = vec![0, 0, i, i, i];
                let answer = line
                    .exchange(query, |_| {}, Duration::from_secs(5))
                    .await
                    .unwrap();
                assert_eq!(&answer[2..], &[i, i, i], "each asker gets its own answer");
            }));
        }
        for a in asks {
            a.await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_closed_connection_fails_the_waiting_exchange() {
        let addr = reversing_server(1).await;
        let line = connect(addr).await;
        line.exchange(vec![0, 0, 1], |_| {}, Duration::from_secs(5))
            .await
            .unwrap();
        // The server has closed; the next exchange fails as Closed or Io.
        let second = line
            .exchange(vec![0, 0, 2], |_| {}, Duration::from_secs(5))
            .await;
        assert!(
            matches!(second, Err(LineError::Closed | LineError::Io(_))),
            "{second:?}"
        );
        assert!(!line.is_open());
    }

    #[tokio::test]
    async fn the_signer_sees_the_final_id() {
        let addr = reversing_server(1).await;
        let line = connect(addr).await;
        let answer = line
            .exchange(vec![0, 0], |q| q.push(q[0] ^ q[1]), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(answer[2], answer[0] ^ answer[1]);
    }
}
