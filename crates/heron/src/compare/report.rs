//! The tally of differences by kind, each with its first examples, and the
//! report printed from it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::classify::{DiffKind, Finding, Got, classify, rcode_name};
use super::normalize::{Response, SECTION_NAMES};
use super::probes::Probe;

/// How to compare.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub ignore_ttl: bool,
    pub strict: bool,
    /// Examples kept per kind.
    pub examples: usize,
}

/// One probe that showed a kind of difference, as the report shows it.
#[derive(Clone, Debug)]
pub struct Example {
    pub probe: String,
    pub detail: String,
    pub old: String,
    pub heron: String,
}

#[derive(Clone, Debug, Default)]
pub struct KindTally {
    /// Probes that showed this kind.
    pub probes: usize,
    pub examples: Vec<Example>,
}

/// What the probes found.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub probes: usize,
    /// Probes with at least one difference not tolerated.
    pub differing: usize,
    /// Probes the old server did not answer.
    pub unanswered_old: usize,
    pub kinds: BTreeMap<DiffKind, KindTally>,
}

impl Tally {
    /// Classifies each probe's pair of answers.
    pub fn of(probes: &[Probe], old: &[Got], heron: &[Got], options: Options) -> Tally {
        let mut tally = Tally::default();
        for ((probe, old), heron) in probes.iter().zip(old).zip(heron) {
            if identical(old, heron) {
                tally.probes += 1;
                continue;
            }
            let findings = classify(old, heron, options.ignore_ttl, options.strict);
            tally.add(probe, old, heron, &findings, options);
        }
        tally
    }

    fn add(
        &mut self,
        probe: &Probe,
        old: &Got,
        heron: &Got,
        findings: &[Finding],
        options: Options,
    ) {
        self.probes += 1;
        self.unanswered_old += matches!(old, Got::NoAnswer) as usize;
        self.differing += findings.iter().any(|f| !f.kind.is_tolerated()) as usize;
        let mut seen: Vec<DiffKind> = Vec::new();
        for finding in findings {
            let entry = self.kinds.entry(finding.kind).or_default();
            if !seen.contains(&finding.kind) {
                seen.push(finding.kind);
                entry.probes += 1;
            }
            if entry.examples.len() < options.examples {
                entry.examples.push(Example {
                    probe: probe.to_string(),
                    detail: finding.detail.clone(),
                    old: describe(old),
                    heron: describe(heron),
                });
            }
        }
    }

    pub fn merge(&mut self, other: Tally, options: Options) {
        self.probes += other.probes;
        self.differing += other.differing;
        self.unanswered_old += other.unanswered_old;
        for (kind, theirs) in other.kinds {
            let mine = self.kinds.entry(kind).or_default();
            mine.probes += theirs.probes;
            let room = options.examples.saturating_sub(mine.examples.len());
            mine.examples.extend(theirs.examples.into_iter().take(room));
        }
    }

    /// Kinds of differences that count (not tolerated).
    pub fn difference_kinds(&self) -> usize {
        self.kinds.keys().filter(|k| !k.is_tolerated()).count()
    }

    /// The report: each kind with its count and examples, the tolerated
    /// kinds, and a summary line.
    pub fn render(&self, heading: &str) -> String {
        let mut out = format!("{heading}\n");
        for (kind, t) in self.kinds.iter().filter(|(k, _)| !k.is_tolerated()) {
            let _ = writeln!(
                out,
                "\n{kind}: {} {} — {}",
                t.probes,
                queries(t.probes),
                kind.meaning()
            );
            for e in &t.examples {
                let _ = writeln!(
                    out,
                    "  e.g. {}\n    {}\n    old:   {}\n    heron: {}",
                    e.probe, e.detail, e.old, e.heron
                );
            }
        }
        let tolerated: Vec<_> = self
            .kinds
            .iter()
            .filter(|(k, _)| k.is_tolerated())
            .collect();
        if !tolerated.is_empty() {
            out.push_str("\ntolerated (allowed to differ; --strict counts them):\n");
            for (kind, t) in &tolerated {
                let _ = writeln!(
                    out,
                    "  {kind}: {} {} — {}",
                    t.probes,
                    queries(t.probes),
                    kind.meaning()
                );
            }
        }
        let tolerated_probes: usize = tolerated.iter().map(|(_, t)| t.probes).sum();
        let _ = writeln!(
            out,
            "\nsummary: {} {} compared, {} with differences ({} kinds), {} unanswered by the old server, {} tolerated",
            self.probes,
            queries(self.probes),
            self.differing,
            self.difference_kinds(),
            self.unanswered_old,
            tolerated_probes,
        );
        out
    }
}

/// The same bytes but the message ID: nothing to parse.
fn identical(old: &Got, heron: &Got) -> bool {
    match (old, heron) {
        (Got::Answer(a), Got::Answer(b)) => a.len() > 2 && a.get(2..) == b.get(2..),
        _ => false,
    }
}

fn queries(n: usize) -> &'static str {
    if n == 1 { "query" } else { "queries" }
}

/// A response in one line: rcode, flags and the records of each section.
pub fn describe(got: &Got) -> String {
    let Got::Answer(bytes) = got else {
        return "no answer".into();
    };
    let response = match Response::parse(bytes, false) {
        Ok(r) => r,
        Err(why) => return format!("malformed ({why}), {} octets", bytes.len()),
    };
    let mut out = rcode_name(response.rcode);
    for (bit, name) in [(0x0400, "aa"), (0x0200, "tc")] {
        if response.has(bit) {
            let _ = write!(out, " {name}");
        }
    }
    for (section, records) in response.sections.iter().enumerate() {
        if records.is_empty() {
            continue;
        }
        let text: Vec<String> = records.iter().map(super::classify::record_text).collect();
        let _ = write!(out, " | {}: {}", SECTION_NAMES[section], text.join("; "));
    }
    if out.chars().count() > 400 {
        out = format!("{}…", out.chars().take(400).collect::<String>());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::probes::{Kind, Variant};
    use heron_proto::{Name, RType};

    fn probe() -> Probe {
        Probe {
            qname: Name::parse("x.test").unwrap(),
            qtype: RType::A,
            variant: Variant::Udp1232,
            kind: Kind::Existing,
        }
    }

    #[test]
    fn kinds_are_counted_per_probe_with_bounded_examples() {
        let options = Options {
            ignore_ttl: false,
            strict: false,
            examples: 2,
        };
        let probes = vec![probe(); 5];
        let old = vec![Got::NoAnswer; 5];
        let heron = vec![Got::Answer(vec![0; 3]); 5];
        let mut tally = Tally::of(&probes, &old, &heron, options);
        tally.merge(Tally::of(&probes, &old, &heron, options), options);
        assert_eq!(tally.probes, 10);
        assert_eq!(tally.differing, 10);
        assert_eq!(tally.unanswered_old, 10);
        assert_eq!(tally.difference_kinds(), 2);
        for t in tally.kinds.values() {
            assert_eq!(t.probes, 10);
            assert_eq!(t.examples.len(), 2);
        }
        let text = tally.render("heading");
        assert!(text.contains("no-answer-old: 10 queries"), "{text}");
        assert!(text.contains("malformed-heron: 10 queries"), "{text}");
        assert!(
            text.contains("summary: 10 queries compared, 10 with differences"),
            "{text}"
        );
    }
}
