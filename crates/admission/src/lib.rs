//! Connection admission (docs/design/0007-groundwork.md, "Authenticated
//! admission"): the cluster secret, and the proofs made with it.
//!
//! - An **API token** is what mgmd issues with an API node id: the
//!   allocation's number and an HMAC-SHA256 under the cluster secret of the
//!   id and that number. The API node sends it in its first API_REGREQ; a
//!   data node checks it with the secret alone, without asking mgmd.
//! - A **link proof** is what a data node shows another when they connect:
//!   an HMAC-SHA256 under the secret of both node ids, both incarnations
//!   and a random challenge from each side (the LINK_HELLO handshake,
//!   docs/wire-format.md §7), so a proof cannot be replayed on another
//!   connection, to another node, or by the other side.
//! - An **arbitration proof** is what a data node shows the arbitrator
//!   (mgmd, docs/mgm-protocol.md `arbitrate`) when it asks for its side
//!   to continue after a split: an HMAC-SHA256 under the secret of the
//!   node id, the agreed membership's id, its members and the side, so
//!   only a holder of the secret can ask, and only for what it names.
//!
//! The secret reaches mgmd and the data nodes from a file the config names
//! (`[cluster] secret_file`), never over the network: mgmd serves the
//! config text, which holds only the file's name. API nodes never hold it.
//!
//! This crate depends on `signal` (for the token's wire type and node
//! sets) and on the `hmac` and `sha2` crates only; it does no I/O but
//! reading and creating the secret file and reading the operating system's
//! random source.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use signal::signals::ApiToken;
use signal::{NodeId, NodeSet};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Fewest bytes a cluster secret may have (after trimming whitespace):
/// 32 characters of hex are 128 bits.
pub const MIN_SECRET_BYTES: usize = 32;

/// Most bytes a secret file may hold: a secret is a line, not a document,
/// so a wrong path (a log, a binary) is refused instead of read whole.
pub const MAX_SECRET_BYTES: usize = 4096;

/// Bytes of a link challenge.
pub const CHALLENGE_BYTES: usize = 16;

/// Domain labels: a MAC made for one purpose is never valid for another.
const API_TOKEN_LABEL: &[u8] = b"tessera api token v1";
const LINK_PROOF_LABEL: &[u8] = b"tessera link proof v1";
const ARBITRATION_PROOF_LABEL: &[u8] = b"tessera arbitration proof v1";

type HmacSha256 = Hmac<Sha256>;

/// The cluster secret: the key of every admission MAC. `Debug` does not
/// print it.
#[derive(Clone)]
pub struct ClusterSecret {
    key: Vec<u8>,
}

impl fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

/// Why a cluster secret could not be had.
#[derive(Debug)]
pub enum SecretError {
    /// The file could not be read.
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Fewer than [`MIN_SECRET_BYTES`] bytes once whitespace is trimmed.
    TooShort { path: Option<PathBuf>, bytes: usize },
    /// More than [`MAX_SECRET_BYTES`] bytes.
    TooLong { path: PathBuf },
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::Unreadable { path, source } => write!(
                f,
                "cannot read the cluster secret file {}: {source}",
                path.display()
            ),
            SecretError::TooShort { path, bytes } => {
                match path {
                    Some(path) => write!(f, "the cluster secret file {}", path.display())?,
                    None => f.write_str("the cluster secret")?,
                }
                write!(
                    f,
                    " holds {bytes} bytes; at least {MIN_SECRET_BYTES} are needed \
                     (make one with `openssl rand -hex 32 > FILE`)"
                )
            }
            SecretError::TooLong { path } => write!(
                f,
                "the cluster secret file {} is longer than {MAX_SECRET_BYTES} bytes: \
                 is it the right file? (a secret is one line, e.g. `openssl rand -hex 32`)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for SecretError {}

impl ClusterSecret {
    /// A secret of `bytes` (surrounding ASCII whitespace trimmed, so a file
    /// ending in a newline and one without are the same secret).
    pub fn from_bytes(bytes: &[u8]) -> Result<ClusterSecret, SecretError> {
        let key = bytes.trim_ascii();
        if key.len() < MIN_SECRET_BYTES {
            return Err(SecretError::TooShort {
                path: None,
                bytes: key.len(),
            });
        }
        Ok(ClusterSecret { key: key.to_vec() })
    }

    /// Reads the secret from the file at `path`.
    pub fn load(path: &Path) -> Result<ClusterSecret, SecretError> {
        let unreadable = |source| SecretError::Unreadable {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(unreadable)?;
        let mut bytes = Vec::new();
        file.take(MAX_SECRET_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(unreadable)?;
        if bytes.len() > MAX_SECRET_BYTES {
            return Err(SecretError::TooLong {
                path: path.to_path_buf(),
            });
        }
        ClusterSecret::from_bytes(&bytes).map_err(|error| match error {
            SecretError::TooShort { bytes, .. } => SecretError::TooShort {
                path: Some(path.to_path_buf()),
                bytes,
            },
            other => other,
        })
    }

    /// A new secret as text: 64 hex digits (256 bits) from the operating
    /// system's random source, for `tessera demo` and `tessera secret`.
    pub fn generate_text() -> std::io::Result<String> {
        let bytes: [u8; 32] = random_bytes()?;
        Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
    }

    /// Writes a new secret ([`ClusterSecret::generate_text`] and a newline)
    /// to a new file at `path`, readable and writable by its owner only.
    /// An existing file is never overwritten: the nodes of a running
    /// cluster hold the secret it has.
    pub fn create_file(path: &Path) -> std::io::Result<()> {
        let text = ClusterSecret::generate_text()?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(path)?;
        std::io::Write::write_all(&mut file, format!("{text}\n").as_bytes())?;
        file.sync_all()
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
        HmacSha256::new_from_slice(&self.key).expect("HMAC accepts keys of any length")
    }

    /// The token of allocation `allocation` of API node id `node`.
    pub fn api_token(&self, node: NodeId, allocation: u64) -> ApiToken {
        let mut token = ApiToken {
            allocation,
            mac: [0; 32],
        };
        token
            .mac
            .copy_from_slice(&self.api_token_mac(node, allocation).finalize().into_bytes());
        token
    }

    /// Whether `token` is one this secret issued for `node` (compared in
    /// constant time).
    pub fn verify_api_token(&self, node: NodeId, token: &ApiToken) -> bool {
        self.api_token_mac(node, token.allocation)
            .verify_slice(&token.mac)
            .is_ok()
    }

    fn api_token_mac(&self, node: NodeId, allocation: u64) -> HmacSha256 {
        let mut mac = self.mac();
        mac.update(API_TOKEN_LABEL);
        mac.update(&node.0.to_le_bytes());
        mac.update(&allocation.to_le_bytes());
        mac
    }

    /// The proof `statement.prover` shows `statement.verifier` on a link.
    pub fn link_proof(&self, statement: &LinkStatement) -> [u8; 32] {
        let mut proof = [0u8; 32];
        proof.copy_from_slice(&self.link_mac(statement).finalize().into_bytes());
        proof
    }

    /// Whether `proof` is the one for `statement` (constant time).
    pub fn verify_link_proof(&self, statement: &LinkStatement, proof: &[u8; 32]) -> bool {
        self.link_mac(statement).verify_slice(proof).is_ok()
    }

    fn link_mac(&self, statement: &LinkStatement) -> HmacSha256 {
        let mut mac = self.mac();
        mac.update(LINK_PROOF_LABEL);
        mac.update(&[statement.role as u8]);
        mac.update(&statement.prover.0.to_le_bytes());
        mac.update(&statement.verifier.0.to_le_bytes());
        mac.update(&statement.prover_incarnation.to_le_bytes());
        mac.update(&statement.verifier_incarnation.to_le_bytes());
        mac.update(&statement.prover_challenge);
        mac.update(&statement.verifier_challenge);
        mac
    }

    /// The proof `statement.node` shows the arbitrator with its request.
    pub fn arbitration_proof(&self, statement: &ArbitrationStatement) -> [u8; 32] {
        let mut proof = [0u8; 32];
        proof.copy_from_slice(&self.arbitration_mac(statement).finalize().into_bytes());
        proof
    }

    /// Whether `proof` is the one for `statement` (constant time).
    pub fn verify_arbitration_proof(
        &self,
        statement: &ArbitrationStatement,
        proof: &[u8; 32],
    ) -> bool {
        self.arbitration_mac(statement).verify_slice(proof).is_ok()
    }

    fn arbitration_mac(&self, statement: &ArbitrationStatement) -> HmacSha256 {
        // Every field has a fixed width, so no two statements share bytes.
        let mut mac = self.mac();
        mac.update(ARBITRATION_PROOF_LABEL);
        mac.update(&statement.node.0.to_le_bytes());
        mac.update(&statement.membership_id.to_le_bytes());
        mac.update(&statement.before.bits().to_le_bytes());
        mac.update(&statement.side.bits().to_le_bytes());
        mac
    }
}

/// What an arbitration request proves: that data node `node`, holding the
/// cluster secret, asks for `side` to continue after a split of the agreed
/// membership `membership_id` whose members were `before`
/// (docs/design/failures.md §4).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ArbitrationStatement {
    pub node: NodeId,
    pub membership_id: u32,
    pub before: NodeSet,
    pub side: NodeSet,
}

/// Which side of a link makes a proof: part of what is proved, so the
/// acceptor's proof can never be reflected back as the dialer's.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum LinkRole {
    /// The node that accepted the connection (LINK_HELLO_CONF).
    Acceptor = 1,
    /// The node that dialed (LINK_PROOF_REP).
    Dialer = 2,
}

/// What a link proof proves: that `prover`, of `prover_incarnation`, holds
/// the secret, to `verifier` of `verifier_incarnation`, on the connection
/// where these two challenges were exchanged (the verifier's challenge is
/// fresh, so the proof is good for this connection only).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LinkStatement {
    pub role: LinkRole,
    pub prover: NodeId,
    pub verifier: NodeId,
    pub prover_incarnation: u32,
    pub verifier_incarnation: u32,
    pub prover_challenge: [u8; CHALLENGE_BYTES],
    pub verifier_challenge: [u8; CHALLENGE_BYTES],
}

/// `N` bytes from the operating system's random source (for challenges and
/// new secrets; never for anything a block decides: blocks draw from
/// `Context::random`).
pub fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(text: &str) -> ClusterSecret {
        ClusterSecret::from_bytes(text.as_bytes()).expect("long enough")
    }

    const TEXT: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn short_secrets_are_refused_and_whitespace_is_trimmed() {
        let error = ClusterSecret::from_bytes(b"  too short\n").expect_err("short");
        assert!(error.to_string().contains("holds 9 bytes"), "{error}");
        let a = secret(TEXT);
        let b = secret(&format!("\n {TEXT}\n"));
        assert_eq!(a.api_token(NodeId(130), 1), b.api_token(NodeId(130), 1));
        assert_eq!(format!("{a:?}"), "ClusterSecret(..)");
    }

    #[test]
    fn an_api_token_is_valid_for_its_id_and_secret_only() {
        let secret_a = secret(TEXT);
        let secret_b = secret(&TEXT.replace('0', "1"));
        let token = secret_a.api_token(NodeId(130), 77);
        assert_eq!(token.allocation, 77);
        assert!(secret_a.verify_api_token(NodeId(130), &token));
        assert!(!secret_a.verify_api_token(NodeId(131), &token));
        assert!(!secret_b.verify_api_token(NodeId(130), &token));
        let mut other_allocation = token;
        other_allocation.allocation = 78;
        assert!(!secret_a.verify_api_token(NodeId(130), &other_allocation));
        let mut flipped = token;
        flipped.mac[31] ^= 1;
        assert!(!secret_a.verify_api_token(NodeId(130), &flipped));
        assert!(!secret_a.verify_api_token(NodeId(130), &ApiToken::NONE));
    }

    #[test]
    fn a_link_proof_binds_role_nodes_incarnations_and_challenges() {
        let secret = secret(TEXT);
        let statement = LinkStatement {
            role: LinkRole::Acceptor,
            prover: NodeId(3),
            verifier: NodeId(2),
            prover_incarnation: 5,
            verifier_incarnation: 4,
            prover_challenge: [1; CHALLENGE_BYTES],
            verifier_challenge: [2; CHALLENGE_BYTES],
        };
        let proof = secret.link_proof(&statement);
        assert!(secret.verify_link_proof(&statement, &proof));
        let changes: [fn(&mut LinkStatement); 7] = [
            |s| s.role = LinkRole::Dialer,
            |s| s.prover = NodeId(4),
            |s| s.verifier = NodeId(4),
            |s| s.prover_incarnation += 1,
            |s| s.verifier_incarnation += 1,
            |s| s.prover_challenge[0] ^= 1,
            |s| s.verifier_challenge[15] ^= 1,
        ];
        for change in changes {
            let mut changed = statement;
            change(&mut changed);
            assert!(!secret.verify_link_proof(&changed, &proof), "{changed:?}");
        }
        let other = ClusterSecret::from_bytes(&[b'x'; 40]).expect("long enough");
        assert!(!other.verify_link_proof(&statement, &proof));
    }

    #[test]
    fn an_arbitration_proof_binds_node_membership_and_both_sets() {
        let secret = secret(TEXT);
        let statement = ArbitrationStatement {
            node: NodeId(2),
            membership_id: 5,
            before: NodeSet::of([NodeId(2), NodeId(3)]),
            side: NodeSet::of([NodeId(2)]),
        };
        let proof = secret.arbitration_proof(&statement);
        assert!(secret.verify_arbitration_proof(&statement, &proof));
        let changes: [fn(&mut ArbitrationStatement); 6] = [
            |s| s.node = NodeId(3),
            |s| s.membership_id += 1,
            |s| s.before.insert(NodeId(4)),
            |s| s.before.remove(NodeId(3)),
            |s| s.side = NodeSet::of([NodeId(3)]),
            |s| s.side.insert(NodeId(3)),
        ];
        for change in changes {
            let mut changed = statement;
            change(&mut changed);
            assert!(
                !secret.verify_arbitration_proof(&changed, &proof),
                "{changed:?}"
            );
        }
        let mut flipped = proof;
        flipped[0] ^= 1;
        assert!(!secret.verify_arbitration_proof(&statement, &flipped));
        let other = ClusterSecret::from_bytes(&[b'x'; 40]).expect("long enough");
        assert!(!other.verify_arbitration_proof(&statement, &proof));
    }

    #[test]
    fn secret_files_are_read_checked_and_generated() {
        let dir = std::env::temp_dir().join(format!("tessera-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let good = dir.join("good");
        let text = ClusterSecret::generate_text().expect("random source");
        assert_eq!(text.len(), 64);
        std::fs::write(&good, format!("{text}\n")).expect("write");
        let loaded = ClusterSecret::load(&good).expect("loads");
        assert!(loaded.verify_api_token(NodeId(200), &secret(&text).api_token(NodeId(200), 1)));

        let created = dir.join("created");
        ClusterSecret::create_file(&created).expect("creates");
        ClusterSecret::load(&created).expect("a created secret loads");
        assert!(
            ClusterSecret::create_file(&created).is_err(),
            "an existing secret is never overwritten"
        );

        let short = dir.join("short");
        std::fs::write(&short, "hunter2\n").expect("write");
        let error = ClusterSecret::load(&short).expect_err("short");
        assert!(
            error.to_string().contains(&short.display().to_string()),
            "{error}"
        );

        let long = dir.join("long");
        std::fs::write(&long, vec![b'a'; MAX_SECRET_BYTES + 1]).expect("write");
        assert!(matches!(
            ClusterSecret::load(&long),
            Err(SecretError::TooLong { .. })
        ));
        let missing = ClusterSecret::load(&dir.join("missing")).expect_err("missing");
        assert!(missing.to_string().contains("cannot read"), "{missing}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
