//! The shape of the UDP client population a cell is loaded with (issue
//! 40): one socket of one address (a front end that forwards from one
//! socket: dnsdist, a load balancer, one busy resolver), four sockets of
//! one address (the matrix as it was), or many resolvers, each its own
//! address and port, whose replies never form runs for UDP segmentation.

use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

/// Sockets of the `many` shape, and the source addresses they spread over.
pub const MANY_SOCKETS: usize = 1_024;
pub const MANY_ADDRESSES: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientShape {
    OneSocket,
    FourSockets,
    Many,
}

impl ClientShape {
    pub const ALL: [ClientShape; 3] = [
        ClientShape::OneSocket,
        ClientShape::FourSockets,
        ClientShape::Many,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ClientShape::OneSocket => "one-socket",
            ClientShape::FourSockets => "four-sockets",
            ClientShape::Many => "many",
        }
    }

    pub fn parse(s: &str) -> Option<ClientShape> {
        Self::ALL.into_iter().find(|c| c.name() == s)
    }

    /// Sockets in all.
    pub fn sockets(self) -> usize {
        match self {
            ClientShape::OneSocket => 1,
            ClientShape::FourSockets => 4,
            ClientShape::Many => MANY_SOCKETS,
        }
    }

    /// The source addresses the sockets are bound to, in turn (socket i
    /// on address i mod len).
    pub fn sources(self) -> Vec<IpAddr> {
        match self {
            ClientShape::Many => many_sources(MANY_ADDRESSES),
            _ => vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
        }
    }

    /// Whether each query goes out on the next socket (many resolvers,
    /// so no two consecutive datagrams share a source), rather than a
    /// batch of them on one socket.
    pub fn spread(self) -> bool {
        self == ClientShape::Many
    }
}

/// `n` loopback addresses besides 127.0.0.1: 127.0.1.1, 127.0.1.2, ...
/// (all of 127.0.0.0/8 is the loopback's on Linux, nothing to set up).
pub fn many_sources(n: usize) -> Vec<IpAddr> {
    (0..n.min(254))
        .map(|i| IpAddr::V4(Ipv4Addr::new(127, 0, 1, 1 + i as u8)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_many_has_a_thousand_sockets_over_sixteen_addresses() {
        for s in ClientShape::ALL {
            assert_eq!(ClientShape::parse(s.name()), Some(s));
        }
        assert_eq!(ClientShape::parse("five"), None);
        assert_eq!(ClientShape::OneSocket.sockets(), 1);
        let many = ClientShape::Many;
        assert!(many.sockets() >= 1_000);
        let sources = many.sources();
        assert!(sources.len() >= 16);
        assert!(sources.iter().all(|a| a.is_loopback()));
        let distinct: std::collections::BTreeSet<_> = sources.iter().collect();
        assert_eq!(distinct.len(), sources.len());
        assert!(!sources.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)));
    }
}
