//! Source addresses of outgoing SOA queries, transfers and NOTIFYs, so
//! that a server with many addresses uses the one its peers' ACLs allow
//! (BIND's `transfer-source`/`notify-source`, Knot's `via`, NSD's
//! `outgoing-interface`): `[xfr] source` and `notify-source` for all
//! zones, one address per family, and `via ADDRESS` after a primary or a
//! NOTIFY target for that one alone.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use heron_proto::Name;
use heron_xfr::primary::ZonePolicy;
use heron_xfr::secondary::refresh::{Primaries, SecondaryZone};
use serde::Deserialize;

/// `[xfr]`: each key an address, or a list with at most one IPv4 and one
/// IPv6 address.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct XfrSection {
    /// Of SOA queries and transfers to primaries.
    pub source: Option<toml::Value>,
    /// Of NOTIFYs to secondaries.
    pub notify_source: Option<toml::Value>,
}

/// The server-wide source addresses, at most one per family.
#[derive(Debug, Default)]
pub struct Sources {
    transfer: Vec<IpAddr>,
    notify: Vec<IpAddr>,
}

impl Sources {
    pub fn read(section: &XfrSection) -> Result<Sources, Vec<String>> {
        let transfer = addresses(&section.source, "[xfr] source");
        let notify = addresses(&section.notify_source, "[xfr] notify-source");
        match (transfer, notify) {
            (Ok(transfer), Ok(notify)) => Ok(Sources { transfer, notify }),
            (transfer, notify) => Err([transfer.err(), notify.err()]
                .into_iter()
                .flatten()
                .collect()),
        }
    }

    /// Gives every primary and NOTIFY target without a `via` of its own
    /// the server-wide source of its family, if there is one.
    pub fn apply(
        &self,
        secondaries: &mut [SecondaryZone],
        policies: &mut HashMap<Name, ZonePolicy>,
        catalogs: &mut [super::CatalogConfig],
    ) {
        if self.transfer.is_empty() && self.notify.is_empty() {
            return;
        }
        // Zones share their list of primaries: the lists with sources
        // given are shared the same way.
        let mut given = HashMap::new();
        for zone in secondaries.iter_mut() {
            self.to_primaries(&mut zone.primaries, &mut given);
        }
        self.to_notify_targets(policies.values_mut());
        // Catalog members are configured by their templates: the same
        // defaults reach them.
        for template in catalogs.iter_mut().flat_map(|c| c.templates_mut()) {
            self.to_primaries(&mut template.primaries, &mut given);
            self.to_notify_targets(std::iter::once(Arc::make_mut(&mut template.policy)));
        }
    }

    fn to_primaries(&self, primaries: &mut Primaries, given: &mut GivenSources) {
        if self.transfer.is_empty() || primaries.iter().all(|up| up.source.is_some()) {
            return;
        }
        let with_sources = given.entry(primaries.clone()).or_insert_with(|| {
            let mut list = primaries.to_vec();
            for up in list.iter_mut().filter(|up| up.source.is_none()) {
                up.source = same_family(&self.transfer, up.addr);
            }
            list.into()
        });
        *primaries = with_sources.clone();
    }

    fn to_notify_targets<'a>(&self, policies: impl Iterator<Item = &'a mut ZonePolicy>) {
        let targets = policies.flat_map(|p| p.notify.iter_mut());
        for target in targets.filter(|t| t.source.is_none()) {
            target.source = same_family(&self.notify, target.addr);
        }
    }
}

/// Lists of primaries given sources, by the list they were made from.
type GivenSources = HashMap<Primaries, Primaries>;

fn same_family(sources: &[IpAddr], peer: SocketAddr) -> Option<IpAddr> {
    sources
        .iter()
        .copied()
        .find(|s| s.is_ipv4() == peer.is_ipv4())
}

/// An address or a list of them, at most one per family.
fn addresses(value: &Option<toml::Value>, what: &str) -> Result<Vec<IpAddr>, String> {
    let texts: Vec<&toml::Value> = match value {
        None => return Ok(Vec::new()),
        Some(toml::Value::Array(items)) => items.iter().collect(),
        Some(one) => vec![one],
    };
    let mut found: Vec<IpAddr> = Vec::new();
    for text in texts {
        let Some(text) = text.as_str() else {
            return Err(format!(
                "{what}: expected an address, not {}",
                text.type_str()
            ));
        };
        let address: IpAddr =
            (text.parse()).map_err(|_| format!("{what}: {text} is not an IPv4 or IPv6 address"))?;
        if found.iter().any(|f| f.is_ipv4() == address.is_ipv4()) {
            return Err(format!(
                "{what}: more than one address of the family of {address}"
            ));
        }
        found.push(address);
    }
    Ok(found)
}

/// Takes `via ADDRESS` out of a primary or NOTIFY target entry: the
/// entry without it, and the address, which must be of the family of
/// `peer_of(rest)` (checked by [`check_family`]).
pub fn take_via(item: &str) -> Result<(String, Option<IpAddr>), String> {
    let words: Vec<&str> = item.split_whitespace().collect();
    // A TSIG key or a TLS name may itself be "via".
    let is_via = |i: usize| words[i] == "via" && (i == 0 || !matches!(words[i - 1], "key" | "tls"));
    let Some(at) = (0..words.len()).find(|&i| is_via(i)) else {
        return Ok((item.to_string(), None));
    };
    let Some(address) = words.get(at + 1) else {
        return Err("expected an address after 'via'".into());
    };
    let source: IpAddr = address
        .parse()
        .map_err(|_| format!("via {address}: not an IPv4 or IPv6 address"))?;
    let rest: Vec<&str> = (words[..at].iter().chain(&words[at + 2..]))
        .copied()
        .collect();
    Ok((rest.join(" "), Some(source)))
}

/// A `via` address must be of the peer's family: no socket of one family
/// reaches an address of the other.
pub fn check_family(source: Option<IpAddr>, peer: SocketAddr) -> Result<(), String> {
    match source {
        Some(s) if s.is_ipv4() != peer.is_ipv4() => Err(format!(
            "via {s}: not of the address family of {}",
            peer.ip()
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(text: &str) -> XfrSection {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn one_address_or_one_per_family() {
        let one = Sources::read(&section("source = \"192.0.2.1\"")).unwrap();
        assert_eq!(one.transfer, ["192.0.2.1".parse::<IpAddr>().unwrap()]);
        assert!(one.notify.is_empty());
        let both = Sources::read(&section("notify-source = [\"192.0.2.1\", \"2001:db8::1\"]"));
        assert_eq!(both.unwrap().notify.len(), 2);
        for (text, error) in [
            (
                "source = [\"192.0.2.1\", \"192.0.2.2\"]",
                "more than one address",
            ),
            ("source = \"192.0.2.300\"", "not an IPv4 or IPv6 address"),
            (
                "notify-source = 7",
                "[xfr] notify-source: expected an address, not integer",
            ),
            ("source = [\"::1\", \"::2\"]", "family of ::2"),
        ] {
            let errors = Sources::read(&section(text)).unwrap_err();
            assert!(errors[0].contains(error), "{text}: {errors:?}");
        }
    }

    #[test]
    fn via_is_taken_out_wherever_it_stands() {
        let via = |item| take_via(item).unwrap();
        let source = Some("192.0.2.9".parse().unwrap());
        assert_eq!(via("192.0.2.1"), ("192.0.2.1".into(), None));
        assert_eq!(via("192.0.2.1 via 192.0.2.9"), ("192.0.2.1".into(), source));
        assert_eq!(
            via("192.0.2.1 via 192.0.2.9 key k tls"),
            ("192.0.2.1 key k tls".into(), source)
        );
        assert_eq!(
            via("192.0.2.1 key via"),
            ("192.0.2.1 key via".into(), None),
            "a key named via"
        );
        assert!(
            take_via("192.0.2.1 via")
                .unwrap_err()
                .contains("expected an address")
        );
        assert!(
            take_via("192.0.2.1 via nowhere")
                .unwrap_err()
                .contains("via nowhere")
        );
        let v4: SocketAddr = "192.0.2.1:53".parse().unwrap();
        assert!(check_family(source, v4).is_ok());
        let v6 = Some("2001:db8::9".parse().unwrap());
        assert!(check_family(v6, v4).unwrap_err().contains("address family"));
    }
}
