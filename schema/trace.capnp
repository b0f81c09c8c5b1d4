@0xffad9aedec3c5d69;
# cachescope trace file format, version 2 (readers also read version 1, which lacks the op
# codes of aligned heap allocations; see schema/src/columns.rs).
#
# A trace file is a 16-byte file header ("CSCOPETR", u32 format version, u32 flags), followed
# by frames. Each frame is [u32 payload length][u32 CRC-32 of payload][payload], where the
# payload is one Cap'n Proto message (standard unpacked serialization) whose root is `Record`.
# The first record is a Header, the last a Trailer; Chunk and ModuleUpdate records come in
# between, in the order threads flushed them.
#
# Events are NOT Cap'n Proto structs: a Chunk carries a thread's events as four byte columns
# (ops, addresses, code positions, arguments), concatenated and LZ4-compressed into `data`.
# See schema/src/columns.rs for the column encoding; it is part of this format version.

struct Record {
  union {
    header @0 :Header;
    chunk @1 :Chunk;
    modules @2 :ModuleUpdate;
    trailer @3 :Trailer;
  }
}

enum TimeUnit {
  # Every memory access advances its thread's clock by one; Advance events add their units.
  events @0;
  # Only Advance events move a thread's clock; their units are executed instructions.
  instructions @1;
}

struct Header {
  formatVersion @0 :UInt32;
  # What wrote the trace, e.g. "cachescope 0.1.0 trace gen stencil" or "... record".
  recorder @1 :Text;
  program @2 :Text;
  args @3 :List(Text);
  host @4 :Host;
  timeUnit @5 :TimeUnit;
  modules @6 :List(Module);
  # Seconds since the Unix epoch when recording started (0 when unknown or synthetic).
  createdUnixSeconds @7 :UInt64;
}

struct Host {
  hostname @0 :Text;
  cpuModel @1 :Text;
  logicalCores @2 :UInt32;
  os @3 :Text;
}

struct Module {
  path @0 :Text;
  buildId @1 :Data;
  # Difference between run-time and link-time addresses of the module.
  loadBias @2 :UInt64;
  # Mapped address range [start, end) of the module's executable segments.
  start @3 :UInt64;
  end @4 :UInt64;
}

# Modules loaded (e.g. by dlopen) after the header was written.
struct ModuleUpdate {
  loaded @0 :List(Module);
}

enum ChunkEncoding {
  # ops/addrs/pcs/args columns (schema/src/columns.rs), concatenated, LZ4 block compressed.
  columnsLz4 @0;
}

struct Chunk {
  thread @0 :UInt32;
  # Per-thread chunk number, 0, 1, 2, ... without gaps.
  sequence @1 :UInt32;
  # Index of this chunk's first event in the thread's event stream.
  firstEvent @2 :UInt64;
  # The thread's own clock (sum of its time advances, before sync alignment) at chunk start.
  startTime @3 :UInt64;
  eventCount @4 :UInt32;
  encoding @5 :ChunkEncoding;
  # Uncompressed byte length of the ops, addrs, pcs and args columns, in that order.
  columnLengths @6 :List(UInt32);
  data @7 :Data;
  # Whether the pcs column is present (accesses carry code positions).
  hasCodePositions @8 :Bool;
}

struct ThreadTotals {
  thread @0 :UInt32;
  events @1 :UInt64;
  chunks @2 :UInt32;
  # The thread's own clock after its last event.
  endTime @3 :UInt64;
}

struct Trailer {
  threads @0 :List(ThreadTotals);
  chunkCount @1 :UInt64;
  # CRC-32 over the little-endian CRC-32s of all chunk frames, in file order.
  chunkChecksum @2 :UInt32;
}
