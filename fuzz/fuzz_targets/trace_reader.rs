//! Fuzzes everything that parses untrusted trace bytes.
//!
//! The input is read two ways: as a whole trace file (file header, frames with CRCs, records,
//! chunk decoding), and as one bare record payload, so that mutations reach the Cap'n Proto
//! and column decoders without first having to forge a matching CRC.
#![no_main]

use cachescope_schema::chunk::ChunkDecoder;
use cachescope_schema::record::{decode_record, Record};
use cachescope_schema::scan::scan;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = scan(data, true, |_, _| {});
    if let Ok(Record::Chunk(chunk)) = decode_record(data) {
        let mut out = Vec::new();
        // Every readable version: older ones refuse the op codes added later.
        for version in [1, 2, 3] {
            out.clear();
            let _ = ChunkDecoder::for_version(version).decode(&chunk, &mut out);
        }
    }
});
