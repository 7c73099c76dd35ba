//! RDATA read from a message with its names decompressed, for comparing
//! answers from different servers (`heron compare`, the interop tests).

use crate::name::Name;
use crate::types::RType;

/// Names, fixed octets and names again: the RDATA layouts of the RFC 1035
/// types whose names may be compressed (RFC 3597 section 4).
enum Part {
    Name,
    Fixed(usize),
}

fn compressible_layout(rtype: RType) -> Option<&'static [Part]> {
    const ONE: &[Part] = &[Part::Name];
    const TWO: &[Part] = &[Part::Name, Part::Name];
    const SOA: &[Part] = &[Part::Name, Part::Name, Part::Fixed(20)];
    const MX: &[Part] = &[Part::Fixed(2), Part::Name];
    match rtype.0 {
        2..=5 | 7..=9 | 12 => Some(ONE),
        6 => Some(SOA),
        14 | 17 => Some(TWO),
        15 | 18 | 21 => Some(MX),
        _ => None,
    }
}

/// The RDATA at `msg[start..end]`, the names of the compressible types
/// decompressed and lower-cased: servers compress them against the
/// question, so their case follows the query's.
pub fn rdata_uncompressed(
    rtype: RType,
    msg: &[u8],
    start: usize,
    end: usize,
) -> Result<Vec<u8>, String> {
    let Some(layout) = compressible_layout(rtype) else {
        return Ok(msg[start..end].to_vec());
    };
    let mut out = Vec::with_capacity(end - start + 16);
    let mut pos = start;
    for part in layout {
        match part {
            Part::Name => {
                let (name, next) =
                    Name::read(msg, pos).map_err(|e| format!("bad name at offset {pos}: {e}"))?;
                out.extend_from_slice(name.to_lowercase().as_wire());
                pos = next;
            }
            Part::Fixed(n) => {
                let bytes = msg
                    .get(pos..pos + n)
                    .ok_or_else(|| format!("{rtype} RDATA too short"))?;
                out.extend_from_slice(bytes);
                pos += n;
            }
        }
        if pos > end {
            return Err(format!("{rtype} RDATA runs past its length"));
        }
    }
    if pos != end {
        return Err(format!("{rtype} RDATA has {} octets left over", end - pos));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mx_target_is_decompressed_and_lower_cased() {
        // A message: "Example.test" at 0, then MX RDATA: preference 10,
        // "mail" and a pointer to offset 0.
        let mut msg = b"\x07Example\x04test\x00".to_vec();
        let start = msg.len();
        msg.extend_from_slice(&[0, 10, 4, b'm', b'a', b'i', b'l', 0xC0, 0]);
        let rdata = rdata_uncompressed(RType::MX, &msg, start, msg.len()).unwrap();
        assert_eq!(rdata, b"\x00\x0a\x04mail\x07example\x04test\x00");
    }

    #[test]
    fn other_types_are_copied_and_bad_lengths_refused() {
        let msg = [1, 2, 3, 4];
        assert_eq!(rdata_uncompressed(RType::A, &msg, 0, 4).unwrap(), msg);
        // An NS whose name ends before its RDATA does.
        let ns = [0, 9, 9];
        assert!(rdata_uncompressed(RType::NS, &ns, 0, 3).is_err());
    }
}
