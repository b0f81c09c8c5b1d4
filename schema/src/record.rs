//! Rust-side views of the trace records (header, module updates, trailer, chunk metadata) and
//! their conversion to and from the Cap'n Proto messages inside frames.

use capnp::message::{Builder, HeapAllocator, Reader};
use capnp::serialize::{self, OwnedSegments};
use serde::Serialize;

use crate::error::{ErrorKind, Result, TraceError};
use crate::event::ThreadId;
use crate::frame::{reads_version, FORMAT_VERSION};
use crate::limits::{
    capnp_options, MAX_CHUNK_EVENTS, MAX_LZ4_RATIO, MAX_RAW_CHUNK_BYTES, MAX_THREADS,
};
use crate::trace_capnp::{record, ChunkEncoding, TimeUnit as WireTimeUnit};

/// The unit of every thread's logical clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeUnit {
    /// One unit per memory access, plus whatever `Advance` events add.
    Events,
    /// Executed instructions, carried by `Advance` events only.
    Instructions,
}

impl TimeUnit {
    /// The unit's name in reports: `events` or `instructions`.
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Events => "events",
            TimeUnit::Instructions => "instructions",
        }
    }

    /// Clock units a memory access itself takes in this unit.
    pub fn access_cost(self) -> u64 {
        match self {
            TimeUnit::Events => 1,
            TimeUnit::Instructions => 0,
        }
    }
}

/// The recording host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostInfo {
    /// Host name.
    pub hostname: String,
    /// CPU model string.
    pub cpu_model: String,
    /// Logical cores.
    pub logical_cores: u32,
    /// Operating system description.
    pub os: String,
}

impl HostInfo {
    /// Describes the machine this process runs on.
    pub fn this_host() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpu_model = read("/proc/cpuinfo")
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        HostInfo {
            hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
            cpu_model,
            logical_cores: std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1),
            os: format!(
                "{} {}",
                std::env::consts::OS,
                read("/proc/sys/kernel/osrelease").trim()
            ),
        }
    }
}

/// A loaded module (executable or shared library) of the recorded program.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ModuleInfo {
    /// File path.
    pub path: String,
    /// GNU build-id bytes (empty when unknown).
    pub build_id: Vec<u8>,
    /// Run-time minus link-time addresses.
    pub load_bias: u64,
    /// Start of the mapped executable range.
    pub start: u64,
    /// End (exclusive) of the mapped executable range.
    pub end: u64,
}

/// The first record of a trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceHeader {
    /// What wrote the trace.
    pub recorder: String,
    /// The recorded program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The recording host.
    pub host: HostInfo,
    /// Unit of the threads' clocks.
    pub time_unit: TimeUnit,
    /// Modules loaded at start.
    pub modules: Vec<ModuleInfo>,
    /// Seconds since the Unix epoch when recording started (0 = unknown).
    pub created_unix_seconds: u64,
}

impl TraceHeader {
    /// A header for a trace written by `recorder` about `program`, on this host.
    pub fn new(recorder: impl Into<String>, program: impl Into<String>, unit: TimeUnit) -> Self {
        TraceHeader {
            recorder: recorder.into(),
            program: program.into(),
            args: Vec::new(),
            host: HostInfo::this_host(),
            time_unit: unit,
            modules: Vec::new(),
            created_unix_seconds: 0,
        }
    }
}

/// Totals of one thread, as stored in the trailer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ThreadTotals {
    /// The thread.
    pub thread: ThreadId,
    /// Number of events.
    pub events: u64,
    /// Number of chunks.
    pub chunks: u32,
    /// The thread's own clock after its last event.
    pub end_time: u64,
}

/// The last record of a complete trace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Trailer {
    /// Per-thread totals, ordered by thread id.
    pub threads: Vec<ThreadTotals>,
    /// Number of chunk frames.
    pub chunk_count: u64,
    /// CRC-32 over the chunk frames' CRCs in file order.
    pub chunk_checksum: u32,
}

/// Metadata of a chunk: everything but its event data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ChunkMeta {
    /// The thread whose events these are.
    pub thread: ThreadId,
    /// Per-thread chunk number.
    pub sequence: u32,
    /// Index of the first event in the thread's stream.
    pub first_event: u64,
    /// The thread's own clock at chunk start.
    pub start_time: u64,
    /// Number of events.
    pub event_count: u32,
    /// Whether accesses carry code positions.
    pub has_code_positions: bool,
}

/// A decoded record.
#[derive(Debug)]
pub enum Record {
    /// The header, and the format version its record states (the file header states it too;
    /// the two must agree).
    Header(TraceHeader, u32),
    /// A chunk: metadata, column lengths and the compressed column data.
    Chunk(ChunkRecord),
    /// Modules loaded later.
    Modules(Vec<ModuleInfo>),
    /// The trailer.
    Trailer(Trailer),
}

/// A chunk record whose events are not decoded yet.
#[derive(Debug)]
pub struct ChunkRecord {
    /// Metadata.
    pub meta: ChunkMeta,
    /// Uncompressed column lengths.
    pub column_lengths: [u32; crate::columns::COLUMN_COUNT],
    /// LZ4-compressed concatenated columns.
    pub data: Vec<u8>,
}

fn malformed(e: impl std::fmt::Display) -> TraceError {
    TraceError::new(ErrorKind::Malformed, format!("bad record: {e}"))
}

fn text(t: capnp::Result<capnp::text::Reader<'_>>) -> Result<String> {
    let t = t.map_err(malformed)?;
    Ok(t.to_str().map_err(malformed)?.to_string())
}

fn read_module(m: crate::trace_capnp::module::Reader<'_>) -> Result<ModuleInfo> {
    Ok(ModuleInfo {
        path: text(m.get_path())?,
        build_id: m.get_build_id().map_err(malformed)?.to_vec(),
        load_bias: m.get_load_bias(),
        start: m.get_start(),
        end: m.get_end(),
    })
}

fn write_module(mut b: crate::trace_capnp::module::Builder<'_>, m: &ModuleInfo) {
    b.set_path(m.path.as_str());
    b.set_build_id(&m.build_id);
    b.set_load_bias(m.load_bias);
    b.set_start(m.start);
    b.set_end(m.end);
}

fn to_bytes(message: &Builder<HeapAllocator>) -> Vec<u8> {
    serialize::write_message_to_words(message)
}

/// Encodes a header record.
pub fn encode_header(h: &TraceHeader) -> Vec<u8> {
    let mut message = Builder::new_default();
    let mut b = message.init_root::<record::Builder>().init_header();
    b.set_format_version(FORMAT_VERSION);
    b.set_recorder(h.recorder.as_str());
    b.set_program(h.program.as_str());
    let mut args = b.reborrow().init_args(h.args.len() as u32);
    for (i, a) in h.args.iter().enumerate() {
        args.set(i as u32, a.as_str());
    }
    let mut host = b.reborrow().init_host();
    host.set_hostname(h.host.hostname.as_str());
    host.set_cpu_model(h.host.cpu_model.as_str());
    host.set_logical_cores(h.host.logical_cores);
    host.set_os(h.host.os.as_str());
    b.set_time_unit(match h.time_unit {
        TimeUnit::Events => WireTimeUnit::Events,
        TimeUnit::Instructions => WireTimeUnit::Instructions,
    });
    let mut mods = b.reborrow().init_modules(h.modules.len() as u32);
    for (i, m) in h.modules.iter().enumerate() {
        write_module(mods.reborrow().get(i as u32), m);
    }
    b.set_created_unix_seconds(h.created_unix_seconds);
    to_bytes(&message)
}

/// Encodes a module-update record.
pub fn encode_modules(modules: &[ModuleInfo]) -> Vec<u8> {
    let mut message = Builder::new_default();
    let b = message.init_root::<record::Builder>().init_modules();
    let mut list = b.init_loaded(modules.len() as u32);
    for (i, m) in modules.iter().enumerate() {
        write_module(list.reborrow().get(i as u32), m);
    }
    to_bytes(&message)
}

/// Encodes a trailer record.
pub fn encode_trailer(t: &Trailer) -> Vec<u8> {
    let mut message = Builder::new_default();
    let mut b = message.init_root::<record::Builder>().init_trailer();
    b.set_chunk_count(t.chunk_count);
    b.set_chunk_checksum(t.chunk_checksum);
    let mut list = b.init_threads(t.threads.len() as u32);
    for (i, th) in t.threads.iter().enumerate() {
        let mut e = list.reborrow().get(i as u32);
        e.set_thread(th.thread);
        e.set_events(th.events);
        e.set_chunks(th.chunks);
        e.set_end_time(th.end_time);
    }
    to_bytes(&message)
}

/// Encodes a chunk record from its metadata, column lengths and compressed data.
pub fn encode_chunk(meta: &ChunkMeta, column_lengths: &[u32], data: &[u8]) -> Vec<u8> {
    let mut message = Builder::new_default();
    let mut b = message.init_root::<record::Builder>().init_chunk();
    b.set_thread(meta.thread);
    b.set_sequence(meta.sequence);
    b.set_first_event(meta.first_event);
    b.set_start_time(meta.start_time);
    b.set_event_count(meta.event_count);
    b.set_encoding(ChunkEncoding::ColumnsLz4);
    b.set_has_code_positions(meta.has_code_positions);
    let mut lens = b
        .reborrow()
        .init_column_lengths(column_lengths.len() as u32);
    for (i, l) in column_lengths.iter().enumerate() {
        lens.set(i as u32, *l);
    }
    b.set_data(data);
    to_bytes(&message)
}

/// Decodes one frame payload into a record, checking every count against the limits.
pub fn decode_record(payload: &[u8]) -> Result<Record> {
    let mut slice = payload;
    let message: Reader<OwnedSegments> =
        serialize::read_message(&mut slice, capnp_options(payload.len())).map_err(malformed)?;
    if !slice.is_empty() {
        return Err(TraceError::new(
            ErrorKind::Malformed,
            format!("{} bytes after the record's message", slice.len()),
        ));
    }
    let root: record::Reader = message.get_root().map_err(malformed)?;
    match root.which().map_err(malformed)? {
        record::Header(h) => {
            let h = h.map_err(malformed)?;
            let version = h.get_format_version();
            if !reads_version(version) {
                return Err(TraceError::new(
                    ErrorKind::UnsupportedVersion,
                    format!("header record has format version {version}"),
                ));
            }
            let host = h.get_host().map_err(malformed)?;
            let args = h
                .get_args()
                .map_err(malformed)?
                .iter()
                .map(text)
                .collect::<Result<Vec<_>>>()?;
            let modules = h
                .get_modules()
                .map_err(malformed)?
                .iter()
                .map(read_module)
                .collect::<Result<Vec<_>>>()?;
            Ok(Record::Header(
                TraceHeader {
                    recorder: text(h.get_recorder())?,
                    program: text(h.get_program())?,
                    args,
                    host: HostInfo {
                        hostname: text(host.get_hostname())?,
                        cpu_model: text(host.get_cpu_model())?,
                        logical_cores: host.get_logical_cores(),
                        os: text(host.get_os())?,
                    },
                    time_unit: match h.get_time_unit().map_err(malformed)? {
                        WireTimeUnit::Events => TimeUnit::Events,
                        WireTimeUnit::Instructions => TimeUnit::Instructions,
                    },
                    modules,
                    created_unix_seconds: h.get_created_unix_seconds(),
                },
                version,
            ))
        }
        record::Chunk(c) => {
            let c = c.map_err(malformed)?;
            let meta = ChunkMeta {
                thread: c.get_thread(),
                sequence: c.get_sequence(),
                first_event: c.get_first_event(),
                start_time: c.get_start_time(),
                event_count: c.get_event_count(),
                has_code_positions: c.get_has_code_positions(),
            };
            let fail = |kind, msg: String| Err(TraceError::new(kind, msg).in_thread(meta.thread));
            if c.get_encoding().map_err(malformed)? != ChunkEncoding::ColumnsLz4 {
                return fail(ErrorKind::Malformed, "unknown chunk encoding".into());
            }
            if meta.event_count > MAX_CHUNK_EVENTS {
                return fail(
                    ErrorKind::LimitExceeded,
                    format!(
                        "chunk claims {} events, the limit is {MAX_CHUNK_EVENTS}",
                        meta.event_count
                    ),
                );
            }
            let lens = c.get_column_lengths().map_err(malformed)?;
            if lens.len() as usize != crate::columns::COLUMN_COUNT {
                return fail(
                    ErrorKind::Malformed,
                    format!("chunk has {} column lengths, expected 4", lens.len()),
                );
            }
            let column_lengths = [lens.get(0), lens.get(1), lens.get(2), lens.get(3)];
            let data = c.get_data().map_err(malformed)?;
            let raw: u64 = column_lengths.iter().map(|&l| l as u64).sum();
            if raw > MAX_RAW_CHUNK_BYTES || raw > (data.len() as u64 + 16) * MAX_LZ4_RATIO {
                return fail(
                    ErrorKind::LimitExceeded,
                    format!(
                        "chunk claims {raw} uncompressed bytes from {} compressed bytes",
                        data.len()
                    ),
                );
            }
            if column_lengths[0] != meta.event_count {
                return fail(
                    ErrorKind::Malformed,
                    format!(
                        "chunk claims {} events but its ops column has {} bytes",
                        meta.event_count, column_lengths[0]
                    ),
                );
            }
            Ok(Record::Chunk(ChunkRecord {
                meta,
                column_lengths,
                data: data.to_vec(),
            }))
        }
        record::Modules(m) => {
            let m = m.map_err(malformed)?;
            let loaded = m
                .get_loaded()
                .map_err(malformed)?
                .iter()
                .map(read_module)
                .collect::<Result<Vec<_>>>()?;
            Ok(Record::Modules(loaded))
        }
        record::Trailer(t) => {
            let t = t.map_err(malformed)?;
            let list = t.get_threads().map_err(malformed)?;
            if list.len() as usize > MAX_THREADS {
                return Err(TraceError::new(
                    ErrorKind::LimitExceeded,
                    format!("trailer lists {} threads", list.len()),
                ));
            }
            Ok(Record::Trailer(Trailer {
                threads: list
                    .iter()
                    .map(|e| ThreadTotals {
                        thread: e.get_thread(),
                        events: e.get_events(),
                        chunks: e.get_chunks(),
                        end_time: e.get_end_time(),
                    })
                    .collect(),
                chunk_count: t.get_chunk_count(),
                chunk_checksum: t.get_chunk_checksum(),
            }))
        }
    }
}
