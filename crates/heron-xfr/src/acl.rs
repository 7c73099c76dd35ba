//! Access control for transfers and NOTIFY: who may ask, by address
//! prefix and, optionally, TSIG key. An empty list allows nobody, so
//! transfers are refused unless the operator opens them.

use std::fmt;
use std::net::IpAddr;

use heron_proto::Name;

pub use heron_proto::prefix::Prefix;

/// One entry: requests from inside `prefix`, signed with `key` if one is
/// named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub prefix: Prefix,
    pub key: Option<Name>,
}

/// A list of rules; a request is allowed if any rule matches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acl {
    rules: Vec<Rule>,
}

/// Why a request was not allowed (for the log line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// No rule covers the address.
    Address,
    /// A rule covers the address but wants a TSIG key the request lacks.
    Key,
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Denied::Address => "address not allowed",
            Denied::Key => "not signed with an allowed TSIG key",
        })
    }
}

impl Acl {
    pub fn new(rules: Vec<Rule>) -> Acl {
        Acl { rules }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The TSIG key names the rules ask for, in their order.
    pub fn key_names(&self) -> impl Iterator<Item = &Name> + '_ {
        self.rules.iter().filter_map(|r| r.key.as_ref())
    }

    /// The address prefixes of the rules that allow by address alone (no
    /// TSIG key required): a key rule says nothing about who connects.
    pub fn keyless_prefixes(&self) -> impl Iterator<Item = Prefix> + '_ {
        self.rules
            .iter()
            .filter(|r| r.key.is_none())
            .map(|r| r.prefix)
    }

    /// Checks a request from `ip`, verified as signed by `key` (None when
    /// unsigned).
    pub fn check(&self, ip: IpAddr, key: Option<&Name>) -> Result<(), Denied> {
        let mut address_matched = false;
        for rule in self.rules.iter().filter(|r| r.prefix.contains(ip)) {
            address_matched = true;
            match (&rule.key, key) {
                (None, _) => return Ok(()),
                (Some(want), Some(got)) if want == got => return Ok(()),
                _ => {}
            }
        }
        Err(if address_matched {
            Denied::Key
        } else {
            Denied::Address
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn rule(prefix: &str, key: Option<&str>) -> Rule {
        Rule {
            prefix: prefix.parse().unwrap(),
            key: key.map(|k| Name::parse(k).unwrap()),
        }
    }

    #[test]
    fn the_empty_list_allows_nobody() {
        assert_eq!(
            Acl::default().check(ip("127.0.0.1"), None),
            Err(Denied::Address)
        );
    }

    #[test]
    fn rules_with_a_key_need_that_key() {
        let key = Name::parse("xfr.key").unwrap();
        let other = Name::parse("other.key").unwrap();
        let acl = Acl::new(vec![rule("127.0.0.0/8", Some("xfr.key"))]);
        assert_eq!(acl.check(ip("127.0.0.1"), Some(&key)), Ok(()));
        assert_eq!(acl.check(ip("127.0.0.1"), None), Err(Denied::Key));
        assert_eq!(acl.check(ip("127.0.0.1"), Some(&other)), Err(Denied::Key));
        assert_eq!(acl.check(ip("10.0.0.1"), Some(&key)), Err(Denied::Address));
    }

    #[test]
    fn any_matching_rule_allows() {
        let acl = Acl::new(vec![
            rule("127.0.0.0/8", Some("xfr.key")),
            rule("127.0.0.2", None),
        ]);
        assert_eq!(acl.check(ip("127.0.0.2"), None), Ok(()));
        assert_eq!(acl.check(ip("127.0.0.3"), None), Err(Denied::Key));
    }
}
