//! Hex, base64 (RFC 4648 section 4) and base32hex (RFC 4648 section 7,
//! written without padding as NSEC3 does).

/// Appends `data` as upper-case hex (the style of BIND's output).
pub fn hex_encode(data: &[u8], out: &mut String) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    for &b in data {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 0xF) as usize] as char);
    }
}

/// Decodes hex digits (either case); `None` on a bad digit or an odd count.
pub fn hex_decode(text: &[u8]) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks(2)
        .map(|p| Some(hex_digit(p[0])? << 4 | hex_digit(p[1])?))
        .collect()
}

fn hex_digit(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends `data` in base64 with padding.
pub fn base64_encode(data: &[u8], out: &mut String) {
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i) & 0x3F) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
}

fn base64_value(c: u8) -> Option<u32> {
    B64.iter().position(|&x| x == c).map(|v| v as u32)
}

/// Decodes padded base64; `None` unless the length is a multiple of four
/// with `=` only as the final padding.
pub fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let quads = text.len() / 4;
    for (q, quad) in text.chunks(4).enumerate() {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && q + 1 != quads) {
            return None;
        }
        let mut n = 0u32;
        for &c in &quad[..4 - pad] {
            n = n << 6 | base64_value(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

const B32HEX: &[u8; 32] = b"0123456789ABCDEFGHIJKLMNOPQRSTUV";

/// Appends `data` in upper-case base32hex without padding.
pub fn base32hex_encode(data: &[u8], out: &mut String) {
    let mut acc = 0u32;
    let mut bits = 0;
    for &b in data {
        acc = acc << 8 | b as u32;
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(B32HEX[(acc >> bits & 0x1F) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(B32HEX[(acc << (5 - bits) & 0x1F) as usize] as char);
    }
}

/// Decodes unpadded base32hex (either case). Rejects lengths no encoding
/// produces and non-zero leftover bits, so each value has one spelling.
pub fn base32hex_decode(text: &[u8]) -> Option<Vec<u8>> {
    if matches!(text.len() % 8, 1 | 3 | 6) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 5 / 8);
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in text {
        let v = (c as char).to_digit(32)?;
        acc = (acc << 5 | v) & 0xFFFF;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if acc & ((1 << bits) - 1) != 0 {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(data: &[u8]) -> String {
        let mut s = String::new();
        base64_encode(data, &mut s);
        s
    }

    fn b32(data: &[u8]) -> String {
        let mut s = String::new();
        base32hex_encode(data, &mut s);
        s
    }

    #[test]
    fn base64_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, enc) in cases {
            assert_eq!(b64(plain.as_bytes()), enc);
            assert_eq!(base64_decode(enc.as_bytes()).unwrap(), plain.as_bytes());
        }
        for bad in ["Zg=", "Zg", "Z===", "Zg==Zm8=", "Zm9v!A==", "Zm=v"] {
            assert_eq!(base64_decode(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn base32hex_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "CO"),
            ("fo", "CPNG"),
            ("foo", "CPNMU"),
            ("foob", "CPNMUOG"),
            ("fooba", "CPNMUOJ1"),
            ("foobar", "CPNMUOJ1E8"),
        ];
        for (plain, enc) in cases {
            assert_eq!(b32(plain.as_bytes()), enc);
            assert_eq!(base32hex_decode(enc.as_bytes()).unwrap(), plain.as_bytes());
            let lower = enc.to_ascii_lowercase();
            assert_eq!(
                base32hex_decode(lower.as_bytes()).unwrap(),
                plain.as_bytes()
            );
        }
        // Bad lengths, a letter outside the alphabet, non-zero spare bits.
        for bad in ["C", "CPN", "CPNMUO", "CW", "CP"] {
            assert_eq!(base32hex_decode(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn hex_both_cases() {
        assert_eq!(hex_decode(b"00aBfF").unwrap(), [0x00, 0xAB, 0xFF]);
        assert_eq!(hex_decode(b"abc"), None);
        assert_eq!(hex_decode(b"zz"), None);
        let mut s = String::new();
        hex_encode(&[0x00, 0xAB, 0xFF], &mut s);
        assert_eq!(s, "00ABFF");
    }

    proptest::proptest! {
        #[test]
        fn round_trips(data in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            proptest::prop_assert_eq!(base64_decode(b64(&data).as_bytes()).unwrap(), data.clone());
            proptest::prop_assert_eq!(base32hex_decode(b32(&data).as_bytes()).unwrap(), data.clone());
            let mut h = String::new();
            hex_encode(&data, &mut h);
            proptest::prop_assert_eq!(hex_decode(h.as_bytes()).unwrap(), data);
        }
    }
}
