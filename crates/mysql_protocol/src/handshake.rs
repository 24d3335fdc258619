//! handshake: the connection phase. Encodes the server's greeting
//! (Protocol::HandshakeV10), decodes the client's answer
//! (Protocol::HandshakeResponse41, or an SSL request), and encodes the
//! server's auth-switch and auth-more-data packets.

use crate::constants::{
    CLIENT_CONNECT_ATTRS, CLIENT_CONNECT_WITH_DB, CLIENT_PLUGIN_AUTH,
    CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA, CLIENT_PROTOCOL_41, CLIENT_SECURE_CONNECTION,
    CLIENT_SSL,
};
use crate::error::WireError;
use crate::lenenc::Reader;

/// The version byte of Protocol::HandshakeV10.
const PROTOCOL_VERSION: u8 = 10;

/// Length of an SSL request payload: capabilities, max packet, charset and
/// 23 filler bytes, without the user that a full response carries.
const SSL_REQUEST_LENGTH: usize = 32;

/// The server's greeting, the first packet of a connection.
#[derive(Debug, Clone)]
pub struct Handshake<'a> {
    /// Server version string, e.g. `8.0.36-tessera`; must not contain NUL.
    /// Clients parse the leading number to choose features.
    pub server_version: &'a str,
    /// The connection's id (what `CONNECTION_ID()` returns).
    pub connection_id: u32,
    /// The 20-byte nonce the client's auth response scrambles with. Real
    /// servers use printable non-NUL bytes because some clients treat it as
    /// a C string.
    pub scramble: &'a [u8; 20],
    /// The capabilities the server offers.
    pub capabilities: u32,
    /// The server's default collation id.
    pub charset: u8,
    /// Server status flags.
    pub status: u16,
    /// The default auth plugin, e.g. `mysql_native_password`.
    pub auth_plugin: &'a str,
}

impl Handshake<'_> {
    /// Appends the payload of Protocol::HandshakeV10 to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(PROTOCOL_VERSION);
        out.extend_from_slice(self.server_version.as_bytes());
        out.push(0);
        out.extend_from_slice(&self.connection_id.to_le_bytes());
        out.extend_from_slice(&self.scramble[..8]);
        out.push(0);
        out.extend_from_slice(&(self.capabilities as u16).to_le_bytes());
        out.push(self.charset);
        out.extend_from_slice(&self.status.to_le_bytes());
        out.extend_from_slice(&((self.capabilities >> 16) as u16).to_le_bytes());
        // The whole scramble plus its NUL terminator.
        out.push(21);
        out.extend_from_slice(&[0; 10]);
        out.extend_from_slice(&self.scramble[8..]);
        out.push(0);
        out.extend_from_slice(self.auth_plugin.as_bytes());
        out.push(0);
    }
}

/// The client's answer to the greeting (Protocol::HandshakeResponse41).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeResponse {
    /// The capabilities the client uses (a subset of the server's, if the
    /// client behaves; the server should intersect them).
    pub capabilities: u32,
    /// The largest packet the client will send.
    pub max_packet: u32,
    /// The client's collation id.
    pub charset: u8,
    /// The user name.
    pub user: String,
    /// The auth plugin's response to the scramble: empty for an empty
    /// password.
    pub auth_response: Vec<u8>,
    /// The database to start in; `None` when not sent or sent empty (the
    /// MySQL server treats an empty name as none too).
    pub database: Option<String>,
    /// The plugin that computed `auth_response`; `None` when not sent.
    pub auth_plugin: Option<String>,
    /// Connection attributes (`_client_name`, `_os`, ...), in wire order.
    pub attributes: Vec<(String, String)>,
}

/// What the client sent after the greeting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeResponseOrSsl {
    /// A full handshake response.
    Response(HandshakeResponse),
    /// A request to switch to TLS; the full response follows over TLS.
    SslRequest {
        /// The capabilities the client will use.
        capabilities: u32,
    },
}

/// Decodes the client's answer to the greeting: an SSL request (32 bytes
/// with CLIENT_SSL) or Protocol::HandshakeResponse41. Pre-4.1 clients are
/// `Unsupported`. Optional fields at the end (database, plugin name,
/// attributes) may be missing even when their capability is set, because
/// some clients end the packet early; a last string without its NUL is
/// accepted for the same reason.
pub fn decode_handshake_response(payload: &[u8]) -> Result<HandshakeResponseOrSsl, WireError> {
    let mut reader = Reader::new(payload);
    // The low half first: a pre-4.1 response has only 2 capability bytes,
    // and its CLIENT_PROTOCOL_41 bit (in the low half) must be checked
    // before the rest is read as a 4.1 layout.
    let low_capabilities = u32::from(reader.u16()?);
    if low_capabilities & CLIENT_PROTOCOL_41 == 0 {
        return Err(WireError::Unsupported("pre-4.1 client".to_string()));
    }
    let capabilities = low_capabilities | u32::from(reader.u16()?) << 16;
    let max_packet = reader.u32()?;
    let charset = reader.u8()?;
    reader
        .skip(23)
        .map_err(|_| WireError::Truncated("handshake response filler"))?;
    if payload.len() == SSL_REQUEST_LENGTH && capabilities & CLIENT_SSL != 0 {
        return Ok(HandshakeResponseOrSsl::SslRequest { capabilities });
    }

    if reader.is_empty() {
        return Err(WireError::Truncated("user name"));
    }
    let user = utf8(reader.null_terminated_or_rest(), "user name")?;
    let auth_response = if reader.is_empty() {
        // Some clients end right after the user when the password is empty.
        &[][..]
    } else if capabilities & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
        reader.lenenc_bytes()?
    } else if capabilities & CLIENT_SECURE_CONNECTION != 0 {
        let length = reader.u8()?;
        reader
            .bytes(usize::from(length))
            .map_err(|_| WireError::Truncated("auth response"))?
    } else {
        reader.null_terminated_or_rest()
    };

    let mut database = None;
    if capabilities & CLIENT_CONNECT_WITH_DB != 0 && !reader.is_empty() {
        let name = reader.null_terminated_or_rest();
        if !name.is_empty() {
            database = Some(utf8(name, "database name")?);
        }
    }

    let mut auth_plugin = None;
    if capabilities & CLIENT_PLUGIN_AUTH != 0 && !reader.is_empty() {
        let name = reader.null_terminated_or_rest();
        if !name.is_empty() {
            auth_plugin = Some(utf8(name, "auth plugin name")?);
        }
    }

    let mut attributes = Vec::new();
    if capabilities & CLIENT_CONNECT_ATTRS != 0 && !reader.is_empty() {
        let mut attribute_reader = Reader::new(reader.lenenc_bytes()?);
        while !attribute_reader.is_empty() {
            let key = utf8(attribute_reader.lenenc_bytes()?, "attribute key")?;
            let value = utf8(attribute_reader.lenenc_bytes()?, "attribute value")?;
            attributes.push((key, value));
        }
    }

    Ok(HandshakeResponseOrSsl::Response(HandshakeResponse {
        capabilities,
        max_packet,
        charset,
        user,
        auth_response: auth_response.to_vec(),
        database,
        auth_plugin,
        attributes,
    }))
}

/// `bytes` as an owned string, or `Malformed` naming the field.
fn utf8(bytes: &[u8], what: &str) -> Result<String, WireError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.to_string()),
        Err(_) => Err(WireError::Malformed(format!("{what} is not UTF-8"))),
    }
}

/// Appends an AuthSwitchRequest payload: the client must answer the
/// `scramble` with `plugin` instead.
pub fn encode_auth_switch(out: &mut Vec<u8>, plugin: &str, scramble: &[u8; 20]) {
    out.push(0xFE);
    out.extend_from_slice(plugin.as_bytes());
    out.push(0);
    out.extend_from_slice(scramble);
    out.push(0);
}

/// Appends an AuthMoreData payload. For caching_sha2_password, `[0x03]`
/// is fast-auth success (an OK packet follows) and `[0x04]` asks for full
/// authentication (the cleartext password over TLS, or RSA).
pub fn encode_auth_more_data(out: &mut Vec<u8>, data: &[u8]) {
    out.push(0x01);
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_switch_bytes() {
        let mut out = Vec::new();
        let scramble = [7u8; 20];
        encode_auth_switch(&mut out, "ab", &scramble);
        let mut expected = vec![0xFE, b'a', b'b', 0];
        expected.extend_from_slice(&scramble);
        expected.push(0);
        assert_eq!(out, expected);
    }

    #[test]
    fn auth_more_data_bytes() {
        let mut out = Vec::new();
        encode_auth_more_data(&mut out, &[0x03]);
        assert_eq!(out, [0x01, 0x03]);
    }

    #[test]
    fn pre_41_client_is_unsupported() {
        assert_eq!(
            decode_handshake_response(&[0x05, 0x00, 0, 0, 0, b'u', 0]),
            Err(WireError::Unsupported("pre-4.1 client".to_string()))
        );
    }
}
