//! A zone's records as master-file lines (`OWNER TTL IN TYPE RDATA`), for
//! the files Heron writes (kept and signed copies) and for tools. The
//! owner is written as text once a node and every buffer is reused:
//! formatting each line through `write!`, with a string per record and
//! the owner per record, was most of writing a signed zone out.

use heron_proto::RType;
use heron_proto::name::push_name_text;
use heron_proto::rdata::format_text;
use heron_proto::text::decimal;

use super::Node;

/// Writes record lines; keep one for a whole zone so that its buffers are
/// reused.
#[derive(Default)]
pub struct LineWriter {
    owner: String,
    rdata: String,
}

impl LineWriter {
    pub fn new() -> LineWriter {
        LineWriter::default()
    }

    /// Takes `node`'s owner for the lines that follow.
    pub fn start(&mut self, node: &Node) {
        self.start_owner(node.owner_wire());
    }

    /// Takes `owner` (a name in wire form) for the lines that follow.
    pub fn start_owner(&mut self, owner: &[u8]) {
        self.owner.clear();
        push_name_text(&mut self.owner, owner);
    }

    /// Appends one line of the node last started.
    pub fn record(&mut self, out: &mut Vec<u8>, rtype: RType, ttl: u32, rdata: &[u8]) {
        self.rdata.clear();
        format_text(rtype, rdata, &mut self.rdata);
        out.extend_from_slice(self.owner.as_bytes());
        out.push(b' ');
        push_decimal(out, ttl);
        out.extend_from_slice(b" IN ");
        match rtype.mnemonic() {
            Some(m) => out.extend_from_slice(m.as_bytes()),
            None => {
                out.extend_from_slice(b"TYPE");
                push_decimal(out, u32::from(rtype.0));
            }
        }
        out.push(b' ');
        out.extend_from_slice(self.rdata.as_bytes());
        out.push(b'\n');
    }

    /// Appends every line of `node`: each RRset (but those `left_out`)
    /// and then its RRSIGs (unless RRSIG is left out).
    pub fn node(&mut self, out: &mut Vec<u8>, node: &Node, left_out: &dyn Fn(RType) -> bool) {
        self.start(node);
        for set in node.rrsets() {
            if !left_out(set.rtype) {
                for rd in set.rdatas() {
                    self.record(out, set.rtype, set.ttl(), &rd);
                }
            }
            if !left_out(RType::RRSIG) {
                for rd in set.sigs() {
                    self.record(out, RType::RRSIG, set.sig_ttl(), &rd);
                }
            }
        }
    }
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, n: u32) {
    out.extend_from_slice(decimal(n.into(), &mut [0; 20]));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_zone_str;
    use heron_proto::Name;

    #[test]
    fn decimals_are_written_whole() {
        for n in [0, 7, 10, 86400, 2_147_483_647, u32::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }

    /// The lines read back as the same zone, with the owner as written,
    /// types without a mnemonic in RFC 3597 form, and RRSIGs after the
    /// RRset they cover.
    #[test]
    fn lines_read_back_as_the_zone() {
        let origin = Name::parse("l.test").unwrap();
        let text = "$ORIGIN l.test.\n@ 300 IN SOA ns h 1 2 3 4 5\n@ 300 IN NS ns\n\
            Ns 60 IN A 192.0.2.1\nns 60 IN AAAA 2001:db8::1\n\
            x 0 IN TYPE65400 \\# 2 abcd\nx 10 IN TXT \"a b\" c\n\
            ns 60 IN RRSIG A 13 3 60 20300101000000 20200101000000 1 l.test. AQID\n";
        let zone = load_zone_str(text, "l", &origin).unwrap().zone;
        let (mut out, mut lines) = (Vec::new(), LineWriter::new());
        for node in zone.nodes_in_canonical_order() {
            lines.node(&mut out, &node, &|_| false);
        }
        let written = String::from_utf8(out).unwrap();
        assert!(
            written.contains("Ns.l.test. 60 IN A 192.0.2.1\n"),
            "{written}"
        );
        assert!(
            written.contains("x.l.test. 0 IN TYPE65400 \\# 2 abcd\n"),
            "{written}"
        );
        assert!(
            written.contains("x.l.test. 10 IN TXT \"a b\" \"c\"\n"),
            "{written}"
        );
        let a = written.find(" IN A ").unwrap();
        assert!(written[a..].contains(" IN RRSIG A 13 3 60 "), "{written}");
        let again = load_zone_str(&written, "again", &origin).unwrap().zone;
        assert_eq!(again.record_count(), zone.record_count());
        assert!(crate::diff::diff(&zone, &again).is_empty());
    }

    #[test]
    fn left_out_types_and_signatures_are_not_written() {
        let origin = Name::parse("l.test").unwrap();
        let text = "$ORIGIN l.test.\n@ 300 IN SOA ns h 1 2 3 4 5\n@ 300 IN NS ns\n\
            ns 60 IN A 192.0.2.1\n\
            ns 60 IN RRSIG A 13 3 60 20300101000000 20200101000000 1 l.test. AQID\n";
        let zone = load_zone_str(text, "l", &origin).unwrap().zone;
        let (mut out, mut lines) = (Vec::new(), LineWriter::new());
        let skip = |t: RType| matches!(t, RType::RRSIG | RType::NS);
        for node in zone.nodes_in_canonical_order() {
            lines.node(&mut out, &node, &skip);
        }
        let written = String::from_utf8(out).unwrap();
        assert!(
            !written.contains("RRSIG") && !written.contains(" NS "),
            "{written}"
        );
        assert!(
            written.contains("ns.l.test. 60 IN A 192.0.2.1\n"),
            "{written}"
        );
    }
}
