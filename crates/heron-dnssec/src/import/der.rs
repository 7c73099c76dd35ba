//! The little DER that key files need: PKCS#8 built from raw key parts
//! (RFC 5208, RFC 5915, RFC 8410, RFC 8017), and a reader of
//! tag-length-value items that never reads past its input.

/// A tag and its contents.
pub(super) fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = contents.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(contents);
    out
}

pub(super) const SEQUENCE: u8 = 0x30;
pub(super) const INTEGER: u8 = 0x02;
pub(super) const BIT_STRING: u8 = 0x03;
pub(super) const OCTET_STRING: u8 = 0x04;
pub(super) const OID: u8 = 0x06;

/// An unsigned big-endian number as a DER INTEGER (no superfluous leading
/// zeros; one added when the top bit is set).
pub(super) fn unsigned_integer(number: &[u8]) -> Vec<u8> {
    let start = number.iter().take_while(|&&b| b == 0).count();
    let digits = &number[start..];
    let mut contents = Vec::with_capacity(digits.len() + 1);
    if digits.first().is_none_or(|&b| b & 0x80 != 0) {
        contents.push(0);
    }
    contents.extend_from_slice(digits);
    tlv(INTEGER, &contents)
}

pub(super) fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    tlv(SEQUENCE, &parts.concat())
}

/// id-ecPublicKey, prime256v1, id-Ed25519, rsaEncryption (DER contents).
pub(super) const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
pub(super) const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
pub(super) const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];
pub(super) const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

/// PKCS#8 of a P-256 key: the scalar and the uncompressed public point
/// (04 | x | y), as ring's `EcdsaKeyPair::from_pkcs8` reads it.
pub(super) fn pkcs8_p256(scalar: &[u8], public_point: &[u8]) -> Vec<u8> {
    let algorithm = sequence(&[&tlv(OID, OID_EC_PUBLIC_KEY), &tlv(OID, OID_P256)]);
    let mut bits = vec![0];
    bits.extend_from_slice(public_point);
    let ec_private_key = sequence(&[
        &tlv(INTEGER, &[1]),
        &tlv(OCTET_STRING, scalar),
        &tlv(0xa1, &tlv(BIT_STRING, &bits)),
    ]);
    sequence(&[
        &tlv(INTEGER, &[0]),
        &algorithm,
        &tlv(OCTET_STRING, &ec_private_key),
    ])
}

/// PKCS#8 v2 of an Ed25519 key (RFC 8410 7): the seed and the public key,
/// as ring's `Ed25519KeyPair::from_pkcs8` reads it.
pub(super) fn pkcs8_ed25519(seed: &[u8], public_key: &[u8]) -> Vec<u8> {
    let mut bits = vec![0];
    bits.extend_from_slice(public_key);
    sequence(&[
        &tlv(INTEGER, &[1]),
        &sequence(&[&tlv(OID, OID_ED25519)]),
        &tlv(OCTET_STRING, &tlv(OCTET_STRING, seed)),
        // publicKey [1] IMPLICIT BIT STRING
        &tlv(0x81, &bits),
    ])
}

/// PKCS#8 of an RSA key from its eight numbers (RFC 8017 A.1.2), in the
/// order n, e, d, p, q, dP, dQ, qInv.
pub(super) fn pkcs8_rsa(numbers: &[&[u8]; 8]) -> Vec<u8> {
    let mut parts = vec![unsigned_integer(&[0])];
    parts.extend(numbers.iter().map(|n| unsigned_integer(n)));
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let rsa_private_key = sequence(&refs);
    let algorithm = sequence(&[&tlv(OID, OID_RSA), &[0x05, 0x00]]);
    sequence(&[
        &tlv(INTEGER, &[0]),
        &algorithm,
        &tlv(OCTET_STRING, &rsa_private_key),
    ])
}

/// Reads DER items one after another.
pub(super) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(input: &'a [u8]) -> Reader<'a> {
        Reader { rest: input }
    }

    /// The next item: its tag and contents; `None` if malformed.
    pub(super) fn item(&mut self) -> Option<(u8, &'a [u8])> {
        let (&tag, rest) = self.rest.split_first()?;
        let (&first, mut rest) = rest.split_first()?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 4 || rest.len() < count {
                return None;
            }
            let (bytes, after) = rest.split_at(count);
            rest = after;
            bytes.iter().fold(0usize, |n, &b| (n << 8) | usize::from(b))
        };
        if rest.len() < len {
            return None;
        }
        let (contents, after) = rest.split_at(len);
        self.rest = after;
        Some((tag, contents))
    }

    /// The next item if it has `tag`.
    pub(super) fn expect(&mut self, tag: u8) -> Option<&'a [u8]> {
        match self.item()? {
            (found, contents) if found == tag => Some(contents),
            _ => None,
        }
    }
}

/// What a PKCS#8 PrivateKeyInfo holds: the algorithm OID, the parameter
/// OID if any, and the private key octets.
pub(super) type PrivateKeyInfo<'a> = (&'a [u8], Option<&'a [u8]>, &'a [u8]);

pub(super) fn read_pkcs8(der: &[u8]) -> Option<PrivateKeyInfo<'_>> {
    let mut outer = Reader::new(der);
    let mut info = Reader::new(outer.expect(SEQUENCE)?);
    info.expect(INTEGER)?;
    let mut algorithm = Reader::new(info.expect(SEQUENCE)?);
    let oid = algorithm.expect(OID)?;
    let parameter = match algorithm.item() {
        Some((OID, parameter)) => Some(parameter),
        _ => None,
    };
    let private_key = info.expect(OCTET_STRING)?;
    Some((oid, parameter, private_key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_take_long_form_past_127() {
        assert_eq!(tlv(4, &[9; 2]), [4, 2, 9, 9]);
        assert_eq!(tlv(4, &[0; 200])[..3], [4, 0x81, 200]);
        assert_eq!(tlv(4, &[0; 300])[..4], [4, 0x82, 1, 44]);
        let long = tlv(4, &[7; 300]);
        assert_eq!(Reader::new(&long).item(), Some((4, &[7u8; 300][..])));
    }

    #[test]
    fn integers_are_minimal_and_positive() {
        assert_eq!(unsigned_integer(&[0, 0, 5]), [2, 1, 5]);
        assert_eq!(unsigned_integer(&[0x80]), [2, 2, 0, 0x80]);
        assert_eq!(unsigned_integer(&[]), [2, 1, 0]);
    }

    #[test]
    fn the_reader_refuses_truncated_and_oversized_items() {
        for bad in [
            &[][..],
            &[4],
            &[4, 3, 1],
            &[4, 0x85, 1, 1, 1, 1, 1],
            &[4, 0x80],
            &[4, 0x82, 1],
        ] {
            assert_eq!(Reader::new(bad).item(), None, "{bad:?}");
        }
        assert_eq!(read_pkcs8(&[0x30, 0]), None);
    }
}
