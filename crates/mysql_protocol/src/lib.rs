//! mysql_protocol: the server side of the MySQL client/server wire protocol
//! as pure code over bytes. It frames packets, encodes the server's
//! handshake and responses, decodes the client's handshake response and
//! commands, and computes the password scrambles of
//! `mysql_native_password` and `caching_sha2_password`.
//!
//! Architecture invariant: no sockets, no threads, no clocks. Every decoder
//! takes a byte slice and returns a `Result`; bad input never panics. The
//! server crate owns I/O and state (sequence ids across packets, prepared
//! statements, long data) and hands this crate bytes.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod auth;
pub mod command;
pub mod constants;
pub mod error;
pub mod handshake;
pub mod lenenc;
pub mod packet;
pub mod response;

pub use auth::{
    caching_sha2_response, caching_sha2_stage2, native_password_response, native_password_stage2,
    verify_caching_sha2_fast, verify_native_password,
};
pub use command::{
    decode_command, decode_execute_params, Command, ParamType, ParamValue, StmtExecute,
};
pub use constants::*;
pub use error::WireError;
pub use handshake::{
    decode_handshake_response, encode_auth_more_data, encode_auth_switch, Handshake,
    HandshakeResponse, HandshakeResponseOrSsl,
};
pub use lenenc::{put_lenenc_bytes, put_lenenc_int, Reader};
pub use packet::{take_packet, Packet, PacketWriter, MAX_FRAME_PAYLOAD};
pub use response::{
    begin_binary_row, encode_column_count, encode_eof, encode_eof_ok, encode_err, encode_ok,
    encode_text_row, put_binary_bytes, put_binary_date_time, put_binary_double, put_binary_float,
    put_binary_int, put_binary_time, set_binary_null, BinaryRow, ColumnDefinition, OkPacket,
    PrepareOk,
};
