//! File framing: the 16-byte file header and the `[len][crc][payload]` frames around each
//! Cap'n Proto record. Framing with a CRC per frame lets a reader find exactly where damage
//! starts and keep every complete frame before it.

use std::io::{self, Read, Write};

use crate::error::{ErrorKind, Result, TraceError};
use crate::limits::MAX_FRAME_BYTES;

/// Magic bytes at the start of every trace file.
pub const MAGIC: [u8; 8] = *b"CSCOPETR";

/// The trace format version this build writes.
///
/// Version 2 added the requested alignment of heap allocations, version 3 the callers of
/// the function that allocated ([`crate::Event::AllocCaller`]), version 4 the frames of a
/// thread's stack ([`crate::Event::StackFrame`]); all are new op codes (see
/// [`crate::columns`]). Version 5 chooses the address predictor's slot by the code position's
/// low bits instead of a hash of the whole position (which made the size of a recording
/// depend on where the program was loaded); everything else is as in version 1.
pub const FORMAT_VERSION: u32 = 5;

/// The oldest format version this build reads: versions 1 to 3 are version 4 files without
/// the op codes added later, and version 4 is version 5 with hashed predictor slots.
pub const OLDEST_READABLE_VERSION: u32 = 1;

/// Whether this build reads files of format `version`.
pub fn reads_version(version: u32) -> bool {
    (OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version)
}

/// Size of the file header: magic, version, flags.
pub const FILE_HEADER_BYTES: u64 = 16;

/// Size of a frame header: payload length and CRC-32.
pub const FRAME_HEADER_BYTES: u64 = 8;

/// Writes the file header.
pub fn write_file_header(out: &mut impl Write) -> io::Result<()> {
    out.write_all(&MAGIC)?;
    out.write_all(&FORMAT_VERSION.to_le_bytes())?;
    out.write_all(&0u32.to_le_bytes())
}

/// Writes one frame and returns the payload's CRC-32.
pub fn write_frame(out: &mut impl Write, payload: &[u8]) -> io::Result<u32> {
    let crc = crc32fast::hash(payload);
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|&l| l <= MAX_FRAME_BYTES)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(&crc.to_le_bytes())?;
    out.write_all(payload)?;
    Ok(crc)
}

/// One frame as read from a file.
#[derive(Debug)]
pub struct Frame {
    /// Offset of the frame header in the file.
    pub offset: u64,
    /// The payload's CRC-32 (already checked).
    pub crc: u32,
    /// The payload.
    pub payload: Vec<u8>,
}

/// Reads frames one after another from any byte stream (file, pipe, upload), tracking the file
/// offset for error messages.
pub struct FrameReader<R> {
    inner: R,
    offset: u64,
    version: u32,
}

/// Reads as much of `buf` as the stream has; returns the number of bytes read (short only at
/// end of stream).
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl<R: Read> FrameReader<R> {
    /// Reads and checks the file header; the reader is then positioned at the first frame.
    pub fn new(mut inner: R) -> Result<Self> {
        let mut head = [0u8; FILE_HEADER_BYTES as usize];
        let got = read_full(&mut inner, &mut head).map_err(|e| TraceError::io(&e).at_offset(0))?;
        let truncated = || {
            TraceError::new(
                ErrorKind::Truncated,
                format!("file ends after {got} bytes, inside the 16-byte file header"),
            )
            .at_offset(got as u64)
        };
        // A file that stops inside the magic is cut off; any other first bytes are another
        // kind of file.
        if got < MAGIC.len() && MAGIC.starts_with(&head[..got]) {
            return Err(truncated());
        }
        if head[..MAGIC.len()] != MAGIC {
            return Err(TraceError::new(
                ErrorKind::BadMagic,
                "expected \"CSCOPETR\" at the start of the file",
            )
            .at_offset(0));
        }
        if got < head.len() {
            return Err(truncated());
        }
        let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if !reads_version(version) {
            return Err(TraceError::new(
                ErrorKind::UnsupportedVersion,
                format!(
                    "file has format version {version}, this build reads versions \
                     {OLDEST_READABLE_VERSION} to {FORMAT_VERSION}"
                ),
            )
            .at_offset(8));
        }
        // No version defines a flag: a set bit is a damaged header or a feature of a newer
        // writer that this build would misread.
        let flags = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
        if flags != 0 {
            return Err(TraceError::new(
                ErrorKind::UnsupportedVersion,
                format!(
                    "file header flags are {flags:#010x}; format version {version} defines none \
                     (a damaged header, or a newer writer's feature)"
                ),
            )
            .at_offset(12));
        }
        Ok(FrameReader {
            inner,
            offset: FILE_HEADER_BYTES,
            version,
        })
    }

    /// The file's format version (one [`reads_version`] accepts).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Offset of the next frame.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads the next frame; `Ok(None)` at a clean end of file (between frames).
    pub fn next_frame(&mut self) -> Result<Option<Frame>> {
        let start = self.offset;
        let mut head = [0u8; FRAME_HEADER_BYTES as usize];
        let got = read_full(&mut self.inner, &mut head)
            .map_err(|e| TraceError::io(&e).at_offset(start))?;
        if got == 0 {
            return Ok(None);
        }
        if got < head.len() {
            return Err(TraceError::new(
                ErrorKind::Truncated,
                format!("file ends {got} bytes into an 8-byte frame header"),
            )
            .at_offset(start));
        }
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        if len > MAX_FRAME_BYTES {
            return Err(TraceError::new(
                ErrorKind::LimitExceeded,
                format!("frame claims {len} bytes, the limit is {MAX_FRAME_BYTES}"),
            )
            .at_offset(start));
        }
        if len == 0 {
            return Err(TraceError::new(ErrorKind::Malformed, "empty frame").at_offset(start));
        }
        let mut payload = Vec::new();
        // Grow with the data actually present, so a lying length on a short file costs
        // nothing.
        let got = (&mut self.inner)
            .take(len as u64)
            .read_to_end(&mut payload)
            .map_err(|e| TraceError::io(&e).at_offset(start))?;
        if got < len as usize {
            return Err(TraceError::new(
                ErrorKind::Truncated,
                format!("frame of {len} bytes is cut off after {got} bytes"),
            )
            .at_offset(start));
        }
        let actual = crc32fast::hash(&payload);
        if actual != crc {
            return Err(TraceError::new(
                ErrorKind::ChecksumMismatch,
                format!("frame CRC is {actual:#010x}, its frame header says {crc:#010x}"),
            )
            .at_offset(start));
        }
        self.offset = start + FRAME_HEADER_BYTES + len as u64;
        Ok(Some(Frame {
            offset: start,
            crc,
            payload,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(frames: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        write_file_header(&mut v).unwrap();
        for f in frames {
            write_frame(&mut v, f).unwrap();
        }
        v
    }

    #[test]
    fn frames_roundtrip_with_offsets() {
        let bytes = file_with(&[b"hello", b"world!"]);
        let mut r = FrameReader::new(&bytes[..]).unwrap();
        let a = r.next_frame().unwrap().unwrap();
        assert_eq!((a.offset, &a.payload[..]), (16, &b"hello"[..]));
        let b = r.next_frame().unwrap().unwrap();
        assert_eq!(b.offset, 16 + 8 + 5);
        assert!(r.next_frame().unwrap().is_none());
    }

    #[test]
    fn every_truncation_is_detected() {
        let bytes = file_with(&[b"hello", b"world!"]);
        let boundaries = [16usize, 29, bytes.len()];
        for cut in 0..bytes.len() {
            let res = FrameReader::new(&bytes[..cut]).and_then(|mut r| {
                while r.next_frame()?.is_some() {}
                Ok(())
            });
            if boundaries.contains(&cut) {
                assert!(res.is_ok(), "cut at {cut} is a frame boundary");
            } else {
                let err = res.unwrap_err();
                assert!(
                    matches!(err.kind, ErrorKind::Truncated | ErrorKind::BadMagic),
                    "cut {cut}: {err}"
                );
                if cut >= 8 {
                    assert_eq!(err.kind, ErrorKind::Truncated, "cut {cut}");
                }
            }
        }
    }

    #[test]
    fn wrong_magic_and_version() {
        let mut bytes = file_with(&[b"x"]);
        bytes[0] = b'X';
        assert_eq!(
            FrameReader::new(&bytes[..]).err().unwrap().kind,
            ErrorKind::BadMagic
        );
        let mut bytes = file_with(&[b"x"]);
        bytes[8] = 9;
        let err = FrameReader::new(&bytes[..]).err().unwrap();
        assert_eq!(
            (err.kind, err.offset),
            (ErrorKind::UnsupportedVersion, Some(8))
        );
    }

    #[test]
    fn absurd_length_is_rejected_before_allocation() {
        let mut bytes = file_with(&[]);
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        let mut r = FrameReader::new(&bytes[..]).unwrap();
        let err = r.next_frame().unwrap_err();
        assert_eq!((err.kind, err.offset), (ErrorKind::LimitExceeded, Some(16)));
    }
}
