//! Reading RDATA fields from wire form, checking their structure.

use crate::name::Name;
use crate::text::TextError;

/// A cursor over wire bytes that ends where the RDATA ends.
pub struct Wire<'a> {
    buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Wire<'a> {
    /// A cursor at `pos` in `buf`; `buf` must end where the RDATA ends
    /// (bytes before `pos` are earlier parts of the message).
    pub fn new(buf: &'a [u8], pos: usize) -> Wire<'a> {
        Wire { buf, pos }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_done(&self) -> bool {
        self.pos == self.buf.len()
    }

    /// The bytes from `start` to the current position.
    pub fn since(&self, start: usize) -> &'a [u8] {
        &self.buf[start..self.pos]
    }

    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], TextError> {
        if n > self.remaining() {
            return Err(TextError::new(format!("RDATA ends inside the {what}")));
        }
        self.pos += n;
        Ok(&self.buf[self.pos - n..self.pos])
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, TextError> {
        Ok(self.take(1, what)?[0])
    }

    pub fn u16(&mut self, what: &str) -> Result<u16, TextError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self, what: &str) -> Result<u32, TextError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Everything up to the end of the RDATA.
    pub fn rest(&mut self) -> &'a [u8] {
        let start = self.pos;
        self.pos = self.buf.len();
        &self.buf[start..]
    }

    /// A one-octet length and that many bytes.
    pub fn counted(&mut self, what: &str) -> Result<&'a [u8], TextError> {
        let len = self.u8(what)? as usize;
        self.take(len, what)
    }

    /// An uncompressed name.
    pub fn name(&mut self, what: &str) -> Result<&'a [u8], TextError> {
        let start = self.pos;
        let (_, end) = Name::read_uncompressed(self.buf, start)
            .map_err(|e| TextError::new(format!("bad {what}: {e}")))?;
        self.pos = end;
        Ok(&self.buf[start..end])
    }

    /// A possibly compressed name, returned decompressed.
    pub fn compressed_name(&mut self, what: &str) -> Result<Name, TextError> {
        let (name, end) = Name::read(self.buf, self.pos)
            .map_err(|e| TextError::new(format!("bad {what}: {e}")))?;
        self.pos = end;
        Ok(name)
    }

    /// Fails if bytes are left over.
    pub fn finish(&self) -> Result<(), TextError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(TextError::new(format!(
                "trailing data after the RDATA fields ({n} octets)"
            ))),
        }
    }
}
