//! The CHAOS class: the server's version and identity, which operators
//! ask with `dig CH TXT version.bind` (RFC 4892).

use heron_proto::writer::Section;
use heron_proto::{Class, RType, Rcode};

use super::Responder;

impl Responder<'_> {
    /// CH TXT `version.bind`/`version.server` and `id.server`/
    /// `hostname.bind` (RFC 4892), from [`AnswerConfig`](super::AnswerConfig); REFUSED for
    /// any other name or type (as NSD and Knot: a NODATA would have no
    /// SOA to be cached by), or when the configuration has no text for it
    /// or an empty one (hidden, as Knot reads an empty value: a TXT of
    /// no character-string would be malformed).
    pub(super) fn answer_chaos(&mut self) {
        let text = match self.q.qname_lower.as_wire() {
            b"\x07version\x04bind\x00" | b"\x07version\x06server\x00" => &self.config.version,
            b"\x02id\x06server\x00" | b"\x08hostname\x04bind\x00" => &self.config.identity,
            _ => &None,
        };
        let Some(text) = text.as_deref().filter(|text| !text.is_empty()) else {
            self.rcode = Rcode::REFUSED;
            return;
        };
        if !matches!(self.q.qtype, RType::TXT | RType::ANY) {
            self.rcode = Rcode::REFUSED;
            return;
        }
        let mut rd = Vec::with_capacity(text.len() + 1);
        for chunk in text.as_bytes().chunks(255) {
            rd.push(chunk.len() as u8);
            rd.extend_from_slice(chunk);
        }
        self.aa = true;
        self.w.section(Section::Answer);
        if self
            .w
            .record(self.qname, RType::TXT, Class::CH, 0, &rd)
            .is_err()
        {
            self.truncate();
        }
    }
}
