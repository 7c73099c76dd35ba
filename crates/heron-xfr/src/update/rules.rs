//! Who may change what in a zone (`allow-update`, RFC 3007 with TSIG):
//! rules in BIND's `update-policy` kinds, each naming who (a TSIG key, an
//! address prefix, or both), which names and which types. A change is
//! allowed when some rule allows it; every change of an update must be.
//!
//! The form of one rule, as configured:
//! `[PREFIX] [key NAME] KIND [TARGET] TYPE...`, KIND one of `name`,
//! `subdomain`, `wildcard` (these take a TARGET), `zonesub`, `self`,
//! `selfsub` (these take none; `self*` need a key), TYPE a type mnemonic
//! or `ANY`.

use std::fmt;
use std::net::IpAddr;

use heron_proto::{Name, RType};

use crate::acl::Prefix;

/// Which names a rule covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Names {
    /// Exactly this name.
    Name(Name),
    /// This name and every name below it.
    Subdomain(Name),
    /// Every name of the zone.
    ZoneSub,
    /// The names a wildcard (`*.example.com`) matches: those strictly
    /// below its parent.
    Wildcard(Name),
    /// The key's own name.
    OwnName,
    /// The key's own name and every name below it.
    OwnSubdomain,
}

/// One `allow-update` rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateRule {
    /// Requests from inside it (None: from anywhere).
    pub prefix: Option<Prefix>,
    /// Requests signed with it (None: signed or not).
    pub key: Option<Name>,
    pub names: Names,
    /// Empty: every type (`ANY`).
    pub types: Vec<RType>,
}

/// Who asks: the request's source address and the TSIG key that verified.
#[derive(Clone, Copy, Debug)]
pub struct Requester<'a> {
    pub ip: IpAddr,
    pub key: Option<&'a Name>,
}

/// A zone's `allow-update` rules; empty: updates are not taken.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpdatePolicy {
    rules: Vec<UpdateRule>,
}

impl UpdatePolicy {
    pub fn new(rules: Vec<UpdateRule>) -> UpdatePolicy {
        UpdatePolicy { rules }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn rules(&self) -> &[UpdateRule] {
        &self.rules
    }

    /// Whether some rule is for `who` at all: a request no rule is for is
    /// refused before it is read.
    pub fn admits(&self, who: Requester) -> bool {
        self.rules.iter().any(|r| r.is_for(who))
    }

    /// Whether `who` may change `owner`'s records of `rtype`.
    pub fn allows(&self, who: Requester, owner: &Name, rtype: RType) -> bool {
        self.rules
            .iter()
            .any(|r| r.is_for(who) && r.covers_name(who, owner) && r.covers_type(rtype))
    }

    /// Whether some rule lets `who` change `owner`, of any type.
    pub fn allows_name(&self, who: Requester, owner: &Name) -> bool {
        (self.rules.iter()).any(|r| r.is_for(who) && r.covers_name(who, owner))
    }
}

impl UpdateRule {
    fn is_for(&self, who: Requester) -> bool {
        let address = self.prefix.is_none_or(|p| p.contains(who.ip));
        let key = match (&self.key, who.key) {
            (None, _) => true,
            (Some(want), Some(got)) => want == got,
            (Some(_), None) => false,
        };
        address && key
    }

    fn covers_name(&self, who: Requester, owner: &Name) -> bool {
        match &self.names {
            Names::Name(name) => owner == name,
            Names::Subdomain(name) => owner.is_subdomain_of(name),
            Names::ZoneSub => true,
            Names::Wildcard(pattern) => pattern
                .parent()
                .is_some_and(|base| owner != &base && owner.is_subdomain_of(&base)),
            Names::OwnName => who.key.is_some_and(|k| owner == k),
            Names::OwnSubdomain => who.key.is_some_and(|k| owner.is_subdomain_of(k)),
        }
    }

    fn covers_type(&self, rtype: RType) -> bool {
        self.types.is_empty() || self.types.contains(&rtype)
    }

    /// Reads one rule; `zone` is the zone's origin, which a TARGET must
    /// be in (a rule for names outside it could never allow anything).
    pub fn parse(text: &str, zone: &Name) -> Result<UpdateRule, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let mut rest = words.as_slice();
        let mut prefix = None;
        if let Some((first, tail)) = rest.split_first()
            && *first != "key"
        {
            prefix = Some(first.parse::<Prefix>()?);
            rest = tail;
        }
        let mut key = None;
        if let ["key", name, tail @ ..] = rest {
            key = Some(Name::parse(name).map_err(|e| format!("bad key name {name}: {e}"))?);
            rest = tail;
        }
        let Some((kind, tail)) = rest.split_first() else {
            return Err("expected [PREFIX] [key NAME] KIND [TARGET] TYPE...".into());
        };
        rest = tail;
        let mut target = || -> Result<Name, String> {
            let (name, tail) = rest
                .split_first()
                .ok_or_else(|| format!("`{kind}` needs a name"))?;
            rest = tail;
            let name = Name::parse(name).map_err(|e| format!("bad name {name}: {e}"))?;
            match name.is_subdomain_of(zone) {
                true => Ok(name),
                false => Err(format!("{name} is outside the zone {zone}")),
            }
        };
        let names = match *kind {
            "name" => Names::Name(target()?),
            "subdomain" => Names::Subdomain(target()?),
            "wildcard" => {
                let pattern = target()?;
                if !pattern.is_wildcard() {
                    return Err(format!("wildcard {pattern}: not a wildcard (*.NAME)"));
                }
                Names::Wildcard(pattern)
            }
            "zonesub" => Names::ZoneSub,
            "self" => Names::OwnName,
            "selfsub" => Names::OwnSubdomain,
            other => {
                return Err(format!(
                    "unknown rule kind `{other}` (name, subdomain, wildcard, zonesub, self, selfsub)"
                ));
            }
        };
        if prefix.is_none() && key.is_none() {
            return Err("a rule needs a key, an address prefix, or both".into());
        }
        if matches!(names, Names::OwnName | Names::OwnSubdomain) && key.is_none() {
            return Err(format!("`{kind}` is the key's own name: it needs a key"));
        }
        let types = parse_types(rest)?;
        Ok(UpdateRule {
            prefix,
            key,
            names,
            types,
        })
    }
}

/// A type list: mnemonics (or `TYPEnnn`), or `ANY` alone (every type).
fn parse_types(words: &[&str]) -> Result<Vec<RType>, String> {
    if words.is_empty() {
        return Err("no types: name them, or ANY".into());
    }
    if words.iter().any(|w| w.eq_ignore_ascii_case("ANY")) {
        return match words.len() {
            1 => Ok(Vec::new()),
            _ => Err("ANY covers every type: name no other".into()),
        };
    }
    let mut types = Vec::with_capacity(words.len());
    for word in words {
        let rtype =
            RType::from_mnemonic(word.as_bytes()).ok_or_else(|| format!("unknown type {word}"))?;
        if rtype.is_meta() {
            return Err(format!("{word} is not a type records have"));
        }
        if super::is_dnssec_type(rtype) {
            return Err(format!(
                "{word}: DNSSEC records are the signer's, not updatable"
            ));
        }
        types.push(rtype);
    }
    Ok(types)
}

impl fmt::Display for UpdateRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut words: Vec<String> = Vec::new();
        if let Some(p) = &self.prefix {
            words.push(p.to_string());
        }
        if let Some(k) = &self.key {
            words.push(format!("key {k}"));
        }
        words.push(match &self.names {
            Names::Name(n) => format!("name {n}"),
            Names::Subdomain(n) => format!("subdomain {n}"),
            Names::ZoneSub => "zonesub".into(),
            Names::Wildcard(n) => format!("wildcard {n}"),
            Names::OwnName => "self".into(),
            Names::OwnSubdomain => "selfsub".into(),
        });
        match self.types.is_empty() {
            true => words.push("ANY".into()),
            false => words.extend(self.types.iter().map(RType::to_string)),
        }
        f.write_str(&words.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::parse(s).unwrap()
    }

    fn policy(rules: &[&str]) -> UpdatePolicy {
        let zone = name("example.com");
        UpdatePolicy::new(
            rules
                .iter()
                .map(|r| UpdateRule::parse(r, &zone).unwrap_or_else(|e| panic!("{r}: {e}")))
                .collect(),
        )
    }

    const HERE: &str = "192.0.2.1";

    fn asks<'a>(key: Option<&'a Name>) -> Requester<'a> {
        Requester {
            ip: HERE.parse().unwrap(),
            key,
        }
    }

    fn allowed(p: &UpdatePolicy, key: Option<&str>, owner: &str, rtype: RType) -> bool {
        let key = key.map(name);
        p.allows(asks(key.as_ref()), &name(owner), rtype)
    }

    #[test]
    fn name_allows_that_name_and_its_types_only() {
        let p = policy(&["key acme.example.com name _acme-challenge.example.com TXT"]);
        let key = Some("acme.example.com");
        assert!(allowed(&p, key, "_acme-challenge.example.com", RType::TXT));
        assert!(allowed(&p, key, "_ACME-challenge.Example.com", RType::TXT));
        assert!(!allowed(&p, key, "_acme-challenge.example.com", RType::A));
        assert!(!allowed(
            &p,
            key,
            "x._acme-challenge.example.com",
            RType::TXT
        ));
        assert!(!allowed(&p, key, "www.example.com", RType::TXT));
        assert!(!allowed(
            &p,
            Some("other.example.com"),
            "_acme-challenge.example.com",
            RType::TXT
        ));
        assert!(!allowed(
            &p,
            None,
            "_acme-challenge.example.com",
            RType::TXT
        ));
    }

    #[test]
    fn subdomain_allows_the_name_and_below() {
        let p = policy(&["key dhcp.example.com subdomain hosts.example.com A AAAA"]);
        let key = Some("dhcp.example.com");
        assert!(allowed(&p, key, "hosts.example.com", RType::A));
        assert!(allowed(&p, key, "pc1.hosts.example.com", RType::AAAA));
        assert!(!allowed(&p, key, "pc1.hosts.example.com", RType::TXT));
        assert!(!allowed(&p, key, "hostsx.example.com", RType::A));
        assert!(!allowed(&p, key, "example.com", RType::A));
    }

    #[test]
    fn zonesub_allows_every_name_and_any_every_type() {
        let p = policy(&["key ops.example.com zonesub ANY"]);
        let key = Some("ops.example.com");
        for (owner, rtype) in [("example.com", RType::NS), ("a.b.example.com", RType::MX)] {
            assert!(allowed(&p, key, owner, rtype));
        }
        assert!(!allowed(
            &p,
            Some("dhcp.example.com"),
            "example.com",
            RType::A
        ));
    }

    #[test]
    fn wildcard_allows_names_strictly_below_its_parent() {
        let p = policy(&["key k.example.com wildcard *.dyn.example.com A"]);
        let key = Some("k.example.com");
        assert!(allowed(&p, key, "h.dyn.example.com", RType::A));
        assert!(allowed(&p, key, "a.h.dyn.example.com", RType::A));
        assert!(!allowed(&p, key, "dyn.example.com", RType::A));
        assert!(!allowed(&p, key, "h.other.example.com", RType::A));
    }

    #[test]
    fn self_allows_the_key_name_only() {
        let p = policy(&["key host1.example.com self A"]);
        assert!(allowed(
            &p,
            Some("host1.example.com"),
            "host1.example.com",
            RType::A
        ));
        assert!(!allowed(
            &p,
            Some("host1.example.com"),
            "host2.example.com",
            RType::A
        ));
        assert!(!allowed(
            &p,
            Some("host1.example.com"),
            "x.host1.example.com",
            RType::A
        ));
    }

    #[test]
    fn selfsub_allows_the_key_name_and_below() {
        let p = policy(&["key _acme-challenge.www.example.com selfsub TXT"]);
        let key = Some("_acme-challenge.www.example.com");
        assert!(allowed(
            &p,
            key,
            "_acme-challenge.www.example.com",
            RType::TXT
        ));
        assert!(allowed(
            &p,
            key,
            "x._acme-challenge.www.example.com",
            RType::TXT
        ));
        assert!(!allowed(&p, key, "www.example.com", RType::TXT));
    }

    #[test]
    fn address_rules_match_the_source_with_or_without_a_key() {
        let p = policy(&[
            "192.0.2.0/24 subdomain lan.example.com A",
            "::1 key k zonesub ANY",
        ]);
        let k = name("k");
        assert!(allowed(&p, None, "pc.lan.example.com", RType::A));
        assert!(allowed(&p, Some("k"), "pc.lan.example.com", RType::A));
        let far = Requester {
            ip: "198.51.100.1".parse().unwrap(),
            key: None,
        };
        assert!(!p.allows(far, &name("pc.lan.example.com"), RType::A));
        let local = |key| Requester {
            ip: "::1".parse().unwrap(),
            key,
        };
        assert!(p.allows(local(Some(&k)), &name("example.com"), RType::MX));
        assert!(!p.allows(local(None), &name("example.com"), RType::MX));
        assert!(p.admits(local(Some(&k))) && !p.admits(local(None)));
    }

    #[test]
    fn no_rule_allows_nothing() {
        let p = UpdatePolicy::default();
        assert!(p.is_empty());
        assert!(!allowed(&p, Some("k"), "example.com", RType::A));
    }

    #[test]
    fn bad_rules_say_why() {
        let zone = name("example.com");
        for (text, says) in [
            ("", "KIND"),
            ("key k", "KIND"),
            ("key k name", "needs a name"),
            ("key k name www.example.com", "no types"),
            ("key k name www.other.com A", "outside the zone"),
            ("key k bogus A", "unknown rule kind"),
            ("key k zonesub A BOGUS", "unknown type"),
            ("key k zonesub ANY A", "ANY covers"),
            ("key k zonesub AXFR", "not a type"),
            ("key k zonesub RRSIG", "DNSSEC"),
            ("192.0.2.0/24 self A", "needs a key"),
            ("192.0.2.0/40 zonesub A", "prefix"),
            ("key k wildcard www.example.com A", "not a wildcard"),
            ("zonesub A", "not an IP address"),
        ] {
            let e = UpdateRule::parse(text, &zone).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn rules_print_as_written() {
        let zone = name("example.com");
        for text in [
            "key acme.example. name _acme-challenge.example.com. TXT",
            "192.0.2.0/24 key k. subdomain hosts.example.com. A AAAA",
            "key ops. zonesub ANY",
        ] {
            let rule = UpdateRule::parse(text, &zone).unwrap();
            assert_eq!(rule.to_string(), text);
            assert_eq!(UpdateRule::parse(&rule.to_string(), &zone).unwrap(), rule);
        }
    }
}
