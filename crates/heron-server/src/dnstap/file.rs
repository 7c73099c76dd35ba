//! A dnstap file opened to be written on: a new one gets START; one that
//! is already there (a restart, a reopen after a rotation that moved
//! nothing) is continued, as a log file is, never emptied. A Frame
//! Streams file ends with STOP, after which readers read nothing: its
//! STOP is cut off and the data frames follow on, so the file stays one
//! stream that `dnstap-read` reads whole. A file cut short by a crash is
//! continued after its last whole frame, and so is one whose end is
//! zeros (a crash after the file system extended it). A file that is not a Frame
//! Streams file of dnstap is left as it is and the open fails: the path
//! likely names the wrong file.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::frame::{self, CONTENT_TYPE, ControlType};

/// Opens the dnstap file at `path` to write data frames on (see the
/// module's comment).
pub fn open(path: &Path) -> io::Result<BufWriter<File>> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        let mut start = Vec::new();
        frame::control(ControlType::Start, Some(CONTENT_TYPE), &mut start);
        file.write_all(&start)?;
    } else {
        let end = continue_at(&mut file, len)?;
        if end < len {
            file.set_len(end)?;
        }
        file.seek(SeekFrom::Start(end))?;
    }
    let mut file = BufWriter::new(file);
    file.flush()?;
    Ok(file)
}

/// Whether the file at `path`, if there is one, is a dnstap file that
/// [`open`] would continue (for `heron check-config`); read only.
pub fn check_continuable(path: &Path) -> io::Result<()> {
    let mut file = match File::open(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        opened => opened?,
    };
    let len = file.metadata()?.len();
    if len > 0 {
        continue_at(&mut file, len)?;
    }
    Ok(())
}

/// Where the next data frame of the stream in `file` (`len` bytes long)
/// goes: at its STOP, else after its last whole frame. An error if it
/// does not begin with a START naming dnstap, or holds anything after
/// its STOP (bytes no reader would read, which we will not cut off).
fn continue_at(file: &mut File, len: u64) -> io::Result<u64> {
    let foreign = |why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("already there and not a dnstap file to continue ({why}); left as it is"),
        )
    };
    file.seek(SeekFrom::Start(0))?;
    let mut reader = BufReader::with_capacity(1 << 16, &mut *file);
    match frame::read(&mut reader) {
        Ok(c) if c.kind == ControlType::Start && c.offers(CONTENT_TYPE) => {}
        Ok(c) => return Err(foreign(&format!("it begins with {:?}", c.kind))),
        Err(e) => return Err(foreign(&format!("no START frame: {e}"))),
    }
    let mut at = reader.stream_position()?;
    loop {
        let mut word = [0u8; 4];
        match read_whole(&mut reader, &mut word)? {
            0 => return Ok(at),
            4 => {}
            _ => return Ok(at), // a length cut short
        }
        let frame_len = match u32::from_be_bytes(word) {
            0 => {
                let mut len_word = [0u8; 4];
                if read_whole(&mut reader, &mut len_word)? < 4 {
                    return Ok(at);
                }
                let control_len = u64::from(u32::from_be_bytes(len_word));
                if at + 8 + control_len > len {
                    return Ok(at);
                }
                let mut kind = [0u8; 4];
                if control_len < 4 || read_whole(&mut reader, &mut kind)? < 4 {
                    // Zeros to the end: a file system that extended the
                    // file before a crash let the data reach it.
                    return match zeros_from(&mut reader, at)? {
                        true => Ok(at),
                        false => Err(foreign("a control frame too short")),
                    };
                }
                if u32::from_be_bytes(kind) == ControlType::Stop as u32 {
                    let after = at + 8 + control_len;
                    if after != len && !zeros_from(&mut reader, after)? {
                        return Err(foreign("bytes after its STOP"));
                    }
                    return Ok(at);
                }
                reader.seek_relative(control_len as i64 - 4)?;
                8 + control_len
            }
            data_len => {
                let data_len = u64::from(data_len);
                if at + 4 + data_len > len {
                    return Ok(at); // a frame cut short by a crash
                }
                reader.seek_relative(data_len as i64)?;
                4 + data_len
            }
        };
        at += frame_len;
    }
}

/// Whether everything from `offset` to the end is zeros.
fn zeros_from(reader: &mut (impl Read + Seek), offset: u64) -> io::Result<bool> {
    reader.seek(SeekFrom::Start(offset))?;
    let mut chunk = [0u8; 4096];
    loop {
        match reader.read(&mut chunk)? {
            0 => return Ok(true),
            n if chunk[..n].iter().any(|&b| b != 0) => return Ok(false),
            _ => {}
        }
    }
}

/// Reads into `buf` until it is full or the file ends; the bytes read.
fn read_whole(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut read = 0;
    while read < buf.len() {
        match reader.read(&mut buf[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(read)
}
