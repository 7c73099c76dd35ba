//! Frame Streams (the transport of dnstap): data frames, and the control
//! frames of the handshake a writer makes with a reader.
//!
//! A data frame is a 32-bit big-endian length (not zero) and that many
//! bytes. A control frame starts with an escape (a zero length), then
//! the control frame's length, its type, and fields; the one field
//! defined is a content type. Over a socket the writer sends READY, the
//! reader ACCEPT, the writer START, data, and at the end STOP, answered
//! by FINISH. A file holds START, data frames and STOP.
//!
//! Control frames from a reader are remote input: [`decode`] bounds
//! their length ([`MAX_CONTROL_LEN`]) and each content type's
//! ([`MAX_CONTENT_TYPE_LEN`]), as `libfstrm` does.

use std::fmt;
use std::io::{self, Read, Write};

/// What dnstap's frames hold.
pub const CONTENT_TYPE: &[u8] = b"protobuf:dnstap.Dnstap";
/// Longest control frame accepted (its length field's value), as `libfstrm`.
pub const MAX_CONTROL_LEN: usize = 512;
/// Longest content type accepted, as `libfstrm`.
pub const MAX_CONTENT_TYPE_LEN: usize = 256;

/// The field type of a content type in a control frame.
const FIELD_CONTENT_TYPE: u32 = 1;

/// Control frame types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlType {
    Accept = 1,
    Start = 2,
    Stop = 3,
    Ready = 4,
    Finish = 5,
}

impl ControlType {
    fn from_u32(v: u32) -> Option<ControlType> {
        Some(match v {
            1 => ControlType::Accept,
            2 => ControlType::Start,
            3 => ControlType::Stop,
            4 => ControlType::Ready,
            5 => ControlType::Finish,
            _ => return None,
        })
    }
}

/// A decoded control frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Control {
    pub kind: ControlType,
    pub content_types: Vec<Vec<u8>>,
}

impl Control {
    /// Whether the frame names `content_type` among its content types.
    pub fn offers(&self, content_type: &[u8]) -> bool {
        self.content_types.iter().any(|c| c == content_type)
    }
}

/// Why bytes are not a control frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// More bytes are needed: at least this many in all.
    Incomplete(usize),
    /// A data frame where a control frame was expected.
    NotControl,
    /// The control frame's length is below 4 or above [`MAX_CONTROL_LEN`].
    BadLength(u32),
    UnknownType(u32),
    /// A field runs past the frame's end, or is too long.
    BadField,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Incomplete(n) => write!(f, "truncated control frame ({n} bytes needed)"),
            FrameError::NotControl => f.write_str("a data frame where a control frame was due"),
            FrameError::BadLength(n) => write!(f, "control frame length {n} out of bounds"),
            FrameError::UnknownType(t) => write!(f, "unknown control frame type {t}"),
            FrameError::BadField => f.write_str("malformed control frame field"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Appends a control frame of `kind`, with `content_type` if given.
pub fn control(kind: ControlType, content_type: Option<&[u8]>, out: &mut Vec<u8>) {
    let fields = content_type.map_or(0, |c| 8 + c.len());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&((4 + fields) as u32).to_be_bytes());
    out.extend_from_slice(&(kind as u32).to_be_bytes());
    if let Some(c) = content_type {
        out.extend_from_slice(&FIELD_CONTENT_TYPE.to_be_bytes());
        out.extend_from_slice(&(c.len() as u32).to_be_bytes());
        out.extend_from_slice(c);
    }
}

/// Appends a data frame holding `payload` (not empty).
pub fn data(payload: &[u8], out: &mut Vec<u8>) {
    debug_assert!(!payload.is_empty());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
}

/// The length of the control frame whose first 8 bytes (escape and
/// length) are `head`.
fn control_length(head: [u8; 8]) -> Result<usize, FrameError> {
    if head[..4] != [0; 4] {
        return Err(FrameError::NotControl);
    }
    let len = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
    if !(4..=MAX_CONTROL_LEN as u32).contains(&len) {
        return Err(FrameError::BadLength(len));
    }
    Ok(len as usize)
}

/// Decodes the control frame at the start of `bytes`; returns it and the
/// bytes it took.
pub fn decode(bytes: &[u8]) -> Result<(Control, usize), FrameError> {
    let head: [u8; 8] = (bytes.get(..8))
        .ok_or(FrameError::Incomplete(8))?
        .try_into()
        .expect("8 bytes");
    let len = control_length(head)?;
    let body = bytes
        .get(8..8 + len)
        .ok_or(FrameError::Incomplete(8 + len))?;
    Ok((decode_body(body)?, 8 + len))
}

/// Reads one control frame from `reader` (a reader's socket).
pub fn read(reader: &mut impl Read) -> io::Result<Control> {
    let invalid = |e: FrameError| io::Error::new(io::ErrorKind::InvalidData, e);
    let mut head = [0u8; 8];
    reader.read_exact(&mut head)?;
    let len = control_length(head).map_err(invalid)?;
    let mut body = [0u8; MAX_CONTROL_LEN];
    reader.read_exact(&mut body[..len])?;
    decode_body(&body[..len]).map_err(invalid)
}

/// The reader's half of the bidirectional handshake on `stream`, for
/// tests and tools that read dnstap: READY in (offering
/// [`CONTENT_TYPE`]), ACCEPT out, START in.
pub fn accept(stream: &mut (impl Read + Write)) -> io::Result<()> {
    let unexpected = |what: &str, c: &Control| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{c:?} where {what} was due"),
        )
    };
    let ready = read(stream)?;
    if ready.kind != ControlType::Ready || !ready.offers(CONTENT_TYPE) {
        return Err(unexpected("READY", &ready));
    }
    let mut out = Vec::new();
    control(ControlType::Accept, Some(CONTENT_TYPE), &mut out);
    stream.write_all(&out)?;
    let start = read(stream)?;
    if start.kind != ControlType::Start {
        return Err(unexpected("START", &start));
    }
    Ok(())
}

/// The type and fields after the length.
fn decode_body(body: &[u8]) -> Result<Control, FrameError> {
    let word = |at: usize| -> Option<u32> {
        let b = body.get(at..at + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let raw_kind = word(0).ok_or(FrameError::BadLength(body.len() as u32))?;
    let kind = ControlType::from_u32(raw_kind).ok_or(FrameError::UnknownType(raw_kind))?;
    let mut content_types = Vec::new();
    let mut at = 4;
    while at < body.len() {
        let field = word(at).ok_or(FrameError::BadField)?;
        let len = word(at + 4).ok_or(FrameError::BadField)? as usize;
        let value = (body.get(at + 8..))
            .and_then(|rest| rest.get(..len))
            .ok_or(FrameError::BadField)?;
        // Other field types are skipped, as future versions may add some.
        if field == FIELD_CONTENT_TYPE {
            if len > MAX_CONTENT_TYPE_LEN {
                return Err(FrameError::BadField);
            }
            content_types.push(value.to_vec());
        }
        at += 8 + len;
    }
    Ok(Control {
        kind,
        content_types,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(kind: ControlType, content_type: Option<&[u8]>) -> Vec<u8> {
        let mut out = Vec::new();
        control(kind, content_type, &mut out);
        out
    }

    #[test]
    fn control_frames_round_trip() {
        for kind in [
            ControlType::Accept,
            ControlType::Start,
            ControlType::Stop,
            ControlType::Ready,
            ControlType::Finish,
        ] {
            for content in [None, Some(CONTENT_TYPE)] {
                let bytes = encoded(kind, content);
                let (frame, used) = decode(&bytes).unwrap();
                assert_eq!(used, bytes.len());
                assert_eq!(frame.kind, kind);
                assert_eq!(frame.offers(CONTENT_TYPE), content.is_some());
                assert_eq!(read(&mut &bytes[..]).unwrap(), frame);
            }
        }
    }

    #[test]
    fn the_wire_form_is_fstrm_s() {
        // An ACCEPT as `fstrm_capture` sends it.
        let mut want = vec![0, 0, 0, 0, 0, 0, 0, 34, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 22];
        want.extend_from_slice(CONTENT_TYPE);
        assert_eq!(encoded(ControlType::Accept, Some(CONTENT_TYPE)), want);
    }

    #[test]
    fn several_content_types_and_unknown_fields() {
        let mut bytes = vec![0, 0, 0, 0, 0, 0, 0, 0];
        bytes.extend_from_slice(&1u32.to_be_bytes());
        for (field, value) in [(1u32, &b"a/b"[..]), (7, b"zz"), (1, CONTENT_TYPE)] {
            bytes.extend_from_slice(&field.to_be_bytes());
            bytes.extend_from_slice(&(value.len() as u32).to_be_bytes());
            bytes.extend_from_slice(value);
        }
        let len = (bytes.len() - 8) as u32;
        bytes[4..8].copy_from_slice(&len.to_be_bytes());
        let (frame, _) = decode(&bytes).unwrap();
        assert_eq!(
            frame.content_types,
            vec![b"a/b".to_vec(), CONTENT_TYPE.to_vec()]
        );
        assert!(frame.offers(CONTENT_TYPE));
    }

    #[test]
    fn every_truncation_is_incomplete_or_an_error_never_a_panic() {
        let bytes = encoded(ControlType::Accept, Some(CONTENT_TYPE));
        for cut in 0..bytes.len() {
            match decode(&bytes[..cut]) {
                Err(FrameError::Incomplete(need)) => assert!(need > cut),
                other => panic!("cut at {cut}: {other:?}"),
            }
            assert!(read(&mut &bytes[..cut]).is_err());
        }
    }

    /// A stream that reads from `input` and keeps what is written.
    struct Duplex(&'static [u8], Vec<u8>);

    impl Read for Duplex {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.0.read(buf)
        }
    }

    impl Write for Duplex {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.1.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn leak(frames: &[(ControlType, Option<&[u8]>)]) -> &'static [u8] {
        let mut bytes = Vec::new();
        for (kind, content) in frames {
            control(*kind, *content, &mut bytes);
        }
        bytes.leak()
    }

    #[test]
    fn the_readers_half_of_the_handshake() {
        let good = leak(&[
            (ControlType::Ready, Some(CONTENT_TYPE)),
            (ControlType::Start, Some(CONTENT_TYPE)),
        ]);
        let mut stream = Duplex(good, Vec::new());
        accept(&mut stream).unwrap();
        assert_eq!(stream.1, encoded(ControlType::Accept, Some(CONTENT_TYPE)));

        for wrong in [
            leak(&[(ControlType::Start, Some(CONTENT_TYPE))]),
            leak(&[(ControlType::Ready, Some(b"protobuf:other"))]),
            leak(&[
                (ControlType::Ready, Some(CONTENT_TYPE)),
                (ControlType::Stop, None),
            ]),
            leak(&[(ControlType::Ready, Some(CONTENT_TYPE))]),
        ] {
            assert!(accept(&mut Duplex(wrong, Vec::new())).is_err());
        }
    }

    #[test]
    fn a_data_frame_is_not_a_control_frame() {
        let mut bytes = Vec::new();
        data(b"payload", &mut bytes);
        bytes.extend_from_slice(&[0; 8]);
        assert_eq!(decode(&bytes), Err(FrameError::NotControl));
    }

    #[test]
    fn lengths_at_and_past_the_limits() {
        let frame_of_len = |len: u32| {
            let mut b = vec![0, 0, 0, 0];
            b.extend_from_slice(&len.to_be_bytes());
            b.extend_from_slice(&5u32.to_be_bytes());
            // Padding as an unknown field filling the rest.
            if len > 4 {
                b.extend_from_slice(&9u32.to_be_bytes());
                b.extend_from_slice(&(len - 12).to_be_bytes());
                b.resize(8 + len as usize, 0);
            }
            b
        };
        let max = MAX_CONTROL_LEN as u32;
        assert!(decode(&frame_of_len(max)).is_ok());
        assert_eq!(
            decode(&frame_of_len(max + 1)),
            Err(FrameError::BadLength(max + 1))
        );
        assert!(read(&mut &frame_of_len(max + 1)[..]).is_err());
        assert!(decode(&frame_of_len(4)).is_ok());
        assert_eq!(
            decode(&[0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0]),
            Err(FrameError::BadLength(3))
        );
        assert_eq!(decode(&[0; 8]), Err(FrameError::BadLength(0)));

        let content_type = |len: usize| {
            let name = vec![b'x'; len];
            encoded(ControlType::Accept, Some(&name))
        };
        assert!(decode(&content_type(MAX_CONTENT_TYPE_LEN)).is_ok());
        assert_eq!(
            decode(&content_type(MAX_CONTENT_TYPE_LEN + 1)),
            Err(FrameError::BadField)
        );
    }

    #[test]
    fn malformed_fields_and_types_are_errors() {
        let mut bytes = encoded(ControlType::Accept, Some(CONTENT_TYPE));
        // A field length past the frame's end.
        bytes[16..20].copy_from_slice(&23u32.to_be_bytes());
        assert_eq!(decode(&bytes), Err(FrameError::BadField));
        // A field header cut short: 4 bytes of a field type only.
        let mut short = encoded(ControlType::Finish, None);
        short.extend_from_slice(&1u32.to_be_bytes());
        short[4..8].copy_from_slice(&8u32.to_be_bytes());
        assert_eq!(decode(&short), Err(FrameError::BadField));
        // An unknown control type.
        let mut unknown = encoded(ControlType::Finish, None);
        unknown[8..12].copy_from_slice(&6u32.to_be_bytes());
        assert_eq!(decode(&unknown), Err(FrameError::UnknownType(6)));
        // A huge field length does not overflow.
        let mut huge = encoded(ControlType::Accept, Some(CONTENT_TYPE));
        huge[16..20].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(decode(&huge), Err(FrameError::BadField));
    }
}
