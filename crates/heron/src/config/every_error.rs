//! Every problem of a configuration file in one run (issue 44: one TOML
//! error a run, fixed one at a time). serde stops at the first field it
//! cannot take; when it does, each section (each `[[zone]]` and other
//! array entry on its own) is read again alone, so that every section
//! with a problem names it, with line and column. The sections that read
//! well are then checked as a whole file would be, so that the problems
//! found after parsing (timers, ACLs, ...) are listed in the same run. A
//! TOML syntax error still stops everything: nothing after it can be
//! trusted.

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue, Deserializer, ValueDeserializer};

use super::ConfigFile;

/// What could be read of a file serde refused whole: the problem of each
/// section, and the file without those sections (None after a syntax
/// error, or if what is left still does not read).
#[derive(Debug)]
pub struct Problems {
    pub errors: Vec<String>,
    pub rest: Option<Box<ConfigFile>>,
}

/// `text` read as a configuration file; or every problem found in it.
pub fn parse(text: &str) -> Result<ConfigFile, Problems> {
    let first = match toml::from_str::<ConfigFile>(text) {
        Ok(file) => return Ok(file),
        Err(e) => e.to_string(),
    };
    let Ok(root) = DeTable::parse(text) else {
        return Err(Problems {
            errors: vec![first],
            rest: None,
        });
    };
    let span = root.span();
    let mut errors = Vec::new();
    let mut rest = DeTable::new();
    for (key, value) in root.into_inner() {
        if let Some(kept) = check_section(key.get_ref(), value, text, &mut errors) {
            rest.insert(key, kept);
        }
    }
    let rest = ConfigFile::deserialize_from(Spanned::new(span, rest))
        .ok()
        .map(Box::new);
    if errors.is_empty() {
        // Whatever serde saw, the sections alone did not show it.
        errors.push(first);
    }
    Err(Problems { errors, rest })
}

impl ConfigFile {
    fn deserialize_from(table: Spanned<DeTable<'_>>) -> Result<ConfigFile, toml::de::Error> {
        serde::Deserialize::deserialize(Deserializer::from(table))
    }
}

/// The section `key` if it reads well (an array without its entries that
/// do not); its problems go to `errors`.
fn check_section<'i>(
    key: &str,
    value: Spanned<DeValue<'i>>,
    text: &str,
    errors: &mut Vec<String>,
) -> Option<Spanned<DeValue<'i>>> {
    use super::*;
    let mut problem = |e: Option<String>| match e {
        Some(e) => {
            errors.push(e);
            false
        }
        None => true,
    };
    let fine = match key {
        "server" => problem(read_as::<ServerSection>(&value, text)),
        "tcp" => problem(read_as::<TcpSection>(&value, text)),
        "tls" => problem(read_as::<TlsSection>(&value, text)),
        "secondary" => problem(read_as::<SecondarySection>(&value, text)),
        "xdp" => problem(read_as::<XdpSection>(&value, text)),
        "xfr" => problem(read_as::<sources::XfrSection>(&value, text)),
        "rrl" => problem(read_as::<RrlSection>(&value, text)),
        "cookies" => problem(read_as::<CookiesSection>(&value, text)),
        "dnstap" => problem(read_as::<dnstap::DnstapSection>(&value, text)),
        "metrics" => problem(read_as::<crate::config::metrics::MetricsSection>(
            &value, text,
        )),
        "log" => problem(read_as::<crate::logging::LogSection>(&value, text)),
        "zone" => return each_entry::<ZoneEntry>(value, text, errors),
        "zone-group" => return each_entry::<ZoneGroup>(value, text, errors),
        "key" => return each_entry::<KeyEntry>(value, text, errors),
        "catalog" => return each_entry::<CatalogEntry>(value, text, errors),
        "dnssec-policy" => return each_entry::<dnssec::PolicyEntry>(value, text, errors),
        unknown => {
            let line = line_of(text, value.span().start);
            errors.push(format!(
                "line {line}: unknown section or key '{unknown}': expected server, tcp, tls, \
                 zone, zone-group, key, secondary, catalog, dnssec-policy, xdp, xfr, rrl, \
                 cookies, dnstap, metrics or log"
            ));
            false
        }
    };
    fine.then_some(value)
}

/// The entries of an array of tables (`[[zone]]`, ...) that read well as
/// `T`; each one that does not is an error. Not an array: the error serde
/// gives.
fn each_entry<'i, T: DeserializeOwned>(
    value: Spanned<DeValue<'i>>,
    text: &str,
    errors: &mut Vec<String>,
) -> Option<Spanned<DeValue<'i>>> {
    let span = value.span();
    let DeValue::Array(entries) = value.into_inner() else {
        errors.push(format!(
            "line {}: expected an array of tables ([[...]])",
            line_of(text, span.start)
        ));
        return None;
    };
    let mut kept = DeArray::new();
    for entry in entries.iter() {
        match read_as::<T>(entry, text) {
            Some(e) => errors.push(e),
            None => kept.push(entry.clone()),
        }
    }
    Some(Spanned::new(span, DeValue::Array(kept)))
}

/// Why `value` does not read as `T`, with line and column; None if it
/// does.
fn read_as<T: DeserializeOwned>(value: &Spanned<DeValue<'_>>, text: &str) -> Option<String> {
    let read = T::deserialize(ValueDeserializer::from(value.clone()));
    read.err().map(|mut e| {
        e.set_input(Some(text));
        e.to_string()
    })
}

fn line_of(text: &str, at: usize) -> usize {
    text.get(..at)
        .map_or(0, |before| before.matches('\n').count())
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Problems {
        match parse(text) {
            Ok(_) => panic!("{text} read well"),
            Err(problems) => problems,
        }
    }

    /// Issue 44: one error a run. Problems in four sections are all
    /// named, each with its line.
    #[test]
    fn a_problem_in_each_section_is_named() {
        let text = "[server]\nbogus = 1\n[tcp]\nidle-timeout = \"long\"\n\
                    [[zone]]\norigin = \"a.test\"\nfile = \"a.zone\"\n\
                    [[zone]]\norigin = \"b.test\"\nfiel = \"b.zone\"\n\
                    [nosuch]\nx = 1\n[dnstap]\nsample = \"often\"\n";
        let found = problems(text);
        let errors = found.errors.join("\n---\n");
        assert_eq!(found.errors.len(), 5, "{errors}");
        for needle in [
            "line 2", "`bogus`", "line 4", "line 10", "`fiel`", "'nosuch'", "line 14",
        ] {
            assert!(errors.contains(needle), "{needle} in {errors}");
        }
        let rest = found.rest.expect("the rest reads");
        assert_eq!(rest.zones.len(), 1, "the good zone is kept");
        assert_eq!(rest.zones[0].origin, "a.test");
    }

    /// A syntax error stops the reading: what follows cannot be trusted.
    /// A typo or a bad value in a `[[dnssec-policy]]` is named with its
    /// line and key, as in `[[zone]]`; the section was called unknown.
    #[test]
    fn a_problem_in_a_dnssec_policy_names_its_key() {
        let text = "[[dnssec-policy]]\nname = \"p\"\nalgoritm = \"ed25519\"\n\
                    [[dnssec-policy]]\nname = \"q\"\nnsec3-iterations = -1\n\
                    [[dnssec-policy]]\nname = \"fine\"\n";
        let found = problems(text);
        let errors = found.errors.join("\n---\n");
        assert_eq!(found.errors.len(), 2, "{errors}");
        for needle in ["line 3", "`algoritm`", "line 6", "-1"] {
            assert!(errors.contains(needle), "{needle} in {errors}");
        }
        assert!(!errors.contains("unknown section"), "{errors}");
    }

    #[test]
    fn a_syntax_error_is_the_one_error() {
        let found = problems("[server]\nlisten = [\n[tcp]\nnosuch = 1\n");
        assert_eq!(found.errors.len(), 1, "{:?}", found.errors);
        assert!(found.rest.is_none());
    }

    #[test]
    fn a_file_that_reads_is_read_once() {
        let file = parse("[server]\nworkers = 2\n").unwrap();
        assert_eq!(file.server.workers, Some(2));
    }

    /// Mutated files (bytes flipped, cut, sections swapped in) never
    /// panic, and every failure names at least one problem.
    #[test]
    fn mutated_files_never_panic() {
        let seed = "[server]\nlisten = [\"127.0.0.1:53\"]\nworkers = 2\n[tcp]\nidle-timeout = 5\n\
                    [[zone]]\norigin = \"a.test\"\nfile = \"a.zone\"\n[[key]]\nname = \"k\"\n\
                    algorithm = \"hmac-sha256\"\nsecret = \"AAAA\"\n[dnstap]\nfile = \"t\"\n";
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..2000 {
            let mut bytes = seed.as_bytes().to_vec();
            for _ in 0..(next() % 4 + 1) {
                let at = (next() as usize) % bytes.len();
                match next() % 3 {
                    0 => bytes[at] = b"[]=\"\n#x1-."[(next() % 10) as usize],
                    1 => bytes.truncate(at.max(1)),
                    _ => bytes.insert(at, b"\n[[zone]]\n"[(next() % 10) as usize]),
                }
            }
            let Ok(text) = String::from_utf8(bytes) else {
                continue;
            };
            if let Err(found) = parse(&text) {
                assert!(!found.errors.is_empty(), "{text}");
            }
        }
    }
}
