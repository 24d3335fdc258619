//! TLS on the SQL port (docs/design/0031-users-and-grants.md, "TLS"):
//! the server's certificate and key from PEM files, and the two moves
//! between a connection's socket bytes and its protocol's plaintext. A
//! client asks for TLS with an SSLRequest packet after the greeting; from
//! there every byte both ways is TLS records (MySQL's scheme: no separate
//! port).
//!
//! The `rustls` crate does the TLS; it never touches the socket here:
//! records are fed to it from what the loop read, and taken from it into
//! the output the loop writes, so a connection's reads and writes stay
//! the loop's non-blocking ones.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the certificate chain and its private key are (PEM).
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The certificate chain, the server's first.
    pub certificate: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The TLS configuration of `files`, or what is wrong with them.
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, String> {
    let unreadable = |path: &Path, error: &dyn std::fmt::Display| {
        format!("TLS: reading {}: {error}", path.display())
    };
    let certificates: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(&files.certificate)
            .map_err(|error| unreadable(&files.certificate, &error))?
            .collect::<Result<_, _>>()
            .map_err(|error| unreadable(&files.certificate, &error))?;
    if certificates.is_empty() {
        return Err(format!(
            "TLS: {} holds no certificate",
            files.certificate.display()
        ));
    }
    let key =
        PrivateKeyDer::from_pem_file(&files.key).map_err(|error| unreadable(&files.key, &error))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS: {error}"))?
        .with_no_client_auth()
        .with_single_cert(certificates, key)
        .map_err(|error| {
            format!(
                "TLS: the key {} does not serve the certificate {}: {error}",
                files.key.display(),
                files.certificate.display()
            )
        })?;
    Ok(Arc::new(config))
}

/// A connection's TLS session, once the client asked for it.
pub(crate) struct Tls {
    session: ServerConnection,
}

impl Tls {
    /// A session under `config`.
    pub(crate) fn new(config: &Arc<ServerConfig>) -> io::Result<Tls> {
        let mut session = ServerConnection::new(Arc::clone(config)).map_err(io::Error::other)?;
        // Records to send are taken out after every command; a large
        // result must fit meanwhile (rustls's default stops at 64 KiB).
        session.set_buffer_limit(None);
        Ok(Tls { session })
    }

    /// Takes the records in `records` (emptied) and appends the plaintext
    /// they carry to `plaintext`. An error (records that do not decode, a
    /// failed handshake) ends the connection; its alert is left to send.
    pub(crate) fn decrypt(
        &mut self,
        records: &mut Vec<u8>,
        plaintext: &mut Vec<u8>,
    ) -> io::Result<()> {
        let mut rest = &records[..];
        while !rest.is_empty() {
            let taken = self.session.read_tls(&mut rest)?;
            self.session
                .process_new_packets()
                .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
            // Taken out now: rustls takes no more records while 16 KiB of
            // plaintext waits.
            self.take_plaintext(plaintext)?;
            if taken == 0 {
                // The peer closed its side (close_notify): what follows is
                // not read, and the connection ends.
                records.clear();
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        records.clear();
        Ok(())
    }

    /// Appends the plaintext waiting in the session to `plaintext`.
    fn take_plaintext(&mut self, plaintext: &mut Vec<u8>) -> io::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match self.session.reader().read(&mut chunk) {
                Ok(0) => return Ok(()),
                Ok(read) => plaintext.extend_from_slice(&chunk[..read]),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(error) => return Err(error),
            }
        }
    }

    /// Replaces `output`'s plaintext with the records that carry it, and
    /// any the session has to send of its own (its handshake).
    pub(crate) fn encrypt(&mut self, output: &mut Vec<u8>) -> io::Result<()> {
        if !output.is_empty() {
            self.session.writer().write_all(output)?;
            output.clear();
        }
        while self.session.wants_write() {
            self.session.write_tls(output)?;
        }
        Ok(())
    }
}
