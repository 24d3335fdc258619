//! The wire codec: frames of signals on TCP (docs/design/data-and-routing.md §8), byte by byte in
//! docs/wire-format.md.
//!
//! ```text
//! frame header (32 bytes, little-endian)
//!  0 u32 magic "TSRA"        4 u16 version (2)       6 u16 header bytes (32)
//!  8 u32 frame bytes        12 u32 CRC32C of bytes 16..frame bytes
//! 16 u16 sender node        18 u16 signal count     20 u32 sender incarnation
//! 24 u64 sequence number (per connection and direction, from 0)
//! signal record (12-byte head, then its body)
//!  0 u16 signal number       2 u8 receiver block    3 u8 sender block
//!  4 u16 receiver instance   6 u16 sender instance  8 u32 body bytes
//! body: the signal's fixed fields, then each section as u32 length + bytes
//! ```
//! Connections between data nodes use the same frames as API connections.
//! Every signal that crosses nodes has a wire form; the node-local ones
//! (start phases, ApiFailRep, NodeConnectedRep, ContinueB, DiAddTab*,
//! FsReq/FsConf) are refused by the encoder with
//! [`WireError::NotWireSignal`].
//!
//! Decoding checks every length, count and enum value and returns an error,
//! never panics: the bytes come from the network.
//!
//! The files, by concern:
//!
//! - `wire`: [`Reader`] and [`Writer`], the bounds-checked little-endian
//!   fields everything else is made of, and [`WireError`].
//! - `assembler`: [`FrameAssembler`], frames reassembled from a byte
//!   stream and verified (the data node's and the client's receive
//!   threads both use it).
//! - `frame`: the 32-byte frame header: [`parse_frame_header`],
//!   [`verify_frame`] (CRC32C), [`begin_frame`] and [`finish_frame`].
//! - `encode`: [`encode_signal`], one signal record per call.
//! - `decode`: [`SignalDecoder`], one signal record at a time, and the
//!   in-place decoding of an API node's two read replies.
//! - `field`: [`Field`], the bytes and checks of each kind of field; the
//!   signal table (`signals/table/`) makes every signal's codec of its
//!   fields' impls, in declaration order.
//! - `checks`: the checks of a signal that look at several fields.
//! - `maps`: the section encodings carried inside signals: the partition map
//!   ([`encode_partition_map`], [`decode_partition_map`]) and the table
//!   names of a ListTablesConf ([`encode_table_names`],
//!   [`decode_table_names`]).

mod assembler;
pub(crate) mod checks;
mod decode;
mod encode;
mod field;
mod frame;
mod maps;
#[cfg(test)]
mod tests;
mod wire;

pub use crate::signals::is_api_request;
pub use assembler::{FrameAssembler, StreamError};
pub use decode::{ApiReply, ForApi, SignalDecoder};
pub use encode::encode_signal;
pub use field::{Field, Sections};
pub use frame::{
    begin_frame, finish_frame, parse_frame_header, verify_frame, FrameHeader, FRAME_HEADER_BYTES,
    FRAME_MAGIC, FRAME_VERSION, MAX_FRAME_BYTES,
};
pub use maps::{
    decode_partition_map, decode_table_names, decode_table_versions, encode_partition_map,
    encode_table_names, encode_table_versions, MAX_TABLE_VERSIONS,
};
pub use wire::{Reader, WireError, Writer};

/// Bytes of a signal record's head.
pub const SIGNAL_HEAD_BYTES: usize = 12;
