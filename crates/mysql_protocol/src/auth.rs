//! auth: the password scrambles of the two auth plugins Tessera speaks,
//! `mysql_native_password` (SHA-1) and the fast path of
//! `caching_sha2_password` (SHA-256), for both sides: what a client sends
//! (used by tests and tools) and how a server verifies it from a stored
//! hash without knowing the password; and the salted SHA-256 crypt a
//! server stores for caching_sha2_password and checks a password sent
//! over TLS against (its full authentication).
//!
//! Empty passwords: clients send an empty auth response for both plugins
//! instead of a scramble. The server checks "stored password is empty and
//! response is empty" itself; the `verify_*` functions are not meant for
//! that case (they return false for an empty response, as its length is
//! wrong).

use sha1::{Digest, Sha1};
use sha2::Sha256;

/// SHA-1 of the concatenation of `parts`.
fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut hasher = Sha1::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// SHA-256 of the concatenation of `parts`.
fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// `left` XOR `right`, element by element.
fn xor<const N: usize>(left: &[u8; N], right: &[u8; N]) -> [u8; N] {
    let mut result = [0u8; N];
    for (index, byte) in result.iter_mut().enumerate() {
        *byte = left[index] ^ right[index];
    }
    result
}

/// Compares without an early exit, so the time taken does not tell an
/// attacker how many leading bytes matched.
fn equal_in_constant_time(left: &[u8], right: &[u8]) -> bool {
    if left.len() != right.len() {
        return false;
    }
    let difference = left
        .iter()
        .zip(right)
        .fold(0u8, |difference, (a, b)| difference | (a ^ b));
    difference == 0
}

/// The mysql_native_password auth response a client sends:
/// SHA1(password) XOR SHA1(scramble ++ SHA1(SHA1(password))).
pub fn native_password_response(password: &[u8], scramble: &[u8; 20]) -> [u8; 20] {
    let stage1 = sha1(&[password]);
    let stage2 = sha1(&[&stage1]);
    xor(&stage1, &sha1(&[scramble, &stage2]))
}

/// SHA1(SHA1(password)): what a server stores for mysql_native_password
/// (MySQL shows it as `*` and 40 upper-case hex digits).
pub fn native_password_stage2(password: &[u8]) -> [u8; 20] {
    sha1(&[&sha1(&[password])])
}

/// Whether `response` is the mysql_native_password response to `scramble`
/// of the password whose stage-2 hash is `stage2`. A response of the wrong
/// length (including the empty response of an empty password) is false.
pub fn verify_native_password(stage2: &[u8; 20], scramble: &[u8; 20], response: &[u8]) -> bool {
    let Ok(response) = <&[u8; 20]>::try_from(response) else {
        return false;
    };
    // Unscrambling gives the candidate SHA1(password); its SHA-1 must be
    // the stored stage 2.
    let candidate_stage1 = xor(response, &sha1(&[scramble, stage2]));
    equal_in_constant_time(&sha1(&[&candidate_stage1]), stage2)
}

/// The caching_sha2_password fast-path response a client sends:
/// SHA256(password) XOR SHA256(SHA256(SHA256(password)) ++ scramble).
pub fn caching_sha2_response(password: &[u8], scramble: &[u8; 20]) -> [u8; 32] {
    let stage1 = sha256(&[password]);
    let stage2 = sha256(&[&stage1]);
    xor(&stage1, &sha256(&[&stage2, scramble]))
}

/// SHA256(SHA256(password)): what a caching_sha2_password server keeps in
/// its cache to verify the fast path.
pub fn caching_sha2_stage2(password: &[u8]) -> [u8; 32] {
    sha256(&[&sha256(&[password])])
}

/// Whether `response` is the caching_sha2_password fast-path response to
/// `scramble` of the password whose SHA256(SHA256(password)) is
/// `sha256_sha256_password`. A response of the wrong length is false.
pub fn verify_caching_sha2_fast(
    sha256_sha256_password: &[u8; 32],
    scramble: &[u8; 20],
    response: &[u8],
) -> bool {
    let Ok(response) = <&[u8; 32]>::try_from(response) else {
        return false;
    };
    let candidate_stage1 = xor(response, &sha256(&[sha256_sha256_password, scramble]));
    equal_in_constant_time(&sha256(&[&candidate_stage1]), sha256_sha256_password)
}

/// Rounds of SHA-256 crypt in a stored caching_sha2_password hash
/// (MySQL's default, written `005` in thousands).
pub const CACHING_SHA2_ROUNDS: u32 = 5000;

/// Bytes of salt in a stored caching_sha2_password hash.
pub const CACHING_SHA2_SALT_BYTES: usize = 20;

/// The alphabet of SHA-crypt's base 64.
const CRYPT_ALPHABET: &[u8; 64] =
    b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// `bytes` repeated to `length` bytes.
fn repeated(bytes: &[u8; 32], length: usize) -> Vec<u8> {
    bytes.iter().copied().cycle().take(length).collect()
}

/// SHA-256 crypt (Ulrich Drepper's "Unix crypt using SHA-256", the `$5$`
/// scheme) of `password` with `salt` and `rounds`: the 43 characters of
/// its hash.
pub fn sha256_crypt(password: &[u8], salt: &[u8], rounds: u32) -> String {
    let alternate = sha256(&[password, salt, password]);
    let mut context = Sha256::new();
    context.update(password);
    context.update(salt);
    let mut left = password.len();
    while left > 32 {
        context.update(alternate);
        left -= 32;
    }
    context.update(&alternate[..left]);
    let mut bits = password.len();
    while bits > 0 {
        if bits & 1 == 1 {
            context.update(alternate);
        } else {
            context.update(password);
        }
        bits >>= 1;
    }
    let mut current: [u8; 32] = context.finalize().into();
    let mut context = Sha256::new();
    for _ in 0..password.len() {
        context.update(password);
    }
    let password_sequence = repeated(&context.finalize().into(), password.len());
    let mut context = Sha256::new();
    for _ in 0..16 + current[0] as usize {
        context.update(salt);
    }
    let salt_sequence = repeated(&context.finalize().into(), salt.len());
    for round in 0..rounds {
        let mut context = Sha256::new();
        if round % 2 == 1 {
            context.update(&password_sequence);
        } else {
            context.update(current);
        }
        if round % 3 != 0 {
            context.update(&salt_sequence);
        }
        if round % 7 != 0 {
            context.update(&password_sequence);
        }
        if round % 2 == 1 {
            context.update(current);
        } else {
            context.update(&password_sequence);
        }
        current = context.finalize().into();
    }
    let mut out = String::with_capacity(43);
    let mut put = |b2: u8, b1: u8, b0: u8, characters: usize| {
        let mut word = ((b2 as u32) << 16) | ((b1 as u32) << 8) | b0 as u32;
        for _ in 0..characters {
            out.push(CRYPT_ALPHABET[(word & 0x3f) as usize] as char);
            word >>= 6;
        }
    };
    let c = current;
    for (a, b, d) in [
        (0, 10, 20),
        (21, 1, 11),
        (12, 22, 2),
        (3, 13, 23),
        (24, 4, 14),
        (15, 25, 5),
        (6, 16, 26),
        (27, 7, 17),
        (18, 28, 8),
        (9, 19, 29),
    ] {
        put(c[a], c[b], c[d], 4);
    }
    put(0, c[31], c[30], 3);
    out
}

/// What MySQL stores for a caching_sha2_password account:
/// `$A$005$`, the salt (20 characters) and the SHA-256 crypt hash (43).
/// `salt` must be 20 characters of the crypt alphabet (`crypt_salt`).
pub fn caching_sha2_stored(password: &[u8], salt: &[u8]) -> String {
    let hash = sha256_crypt(password, salt, CACHING_SHA2_ROUNDS);
    format!(
        "$A${:03}${}{hash}",
        CACHING_SHA2_ROUNDS / 1000,
        String::from_utf8_lossy(salt)
    )
}

/// A salt for [`caching_sha2_stored`] from 20 random bytes.
pub fn crypt_salt(random: &[u8; CACHING_SHA2_SALT_BYTES]) -> [u8; CACHING_SHA2_SALT_BYTES] {
    random.map(|byte| CRYPT_ALPHABET[(byte & 0x3f) as usize])
}

/// Whether `password` is the one `stored` (from [`caching_sha2_stored`])
/// was made from: the full authentication of caching_sha2_password,
/// where the client sends its password (over TLS).
pub fn verify_caching_sha2_stored(stored: &str, password: &[u8]) -> bool {
    let Some(rest) = stored.strip_prefix("$A$") else {
        return false;
    };
    let Some((rounds, salted)) = rest.split_once('$') else {
        return false;
    };
    let Ok(thousands) = rounds.parse::<u32>() else {
        return false;
    };
    if salted.len() != CACHING_SHA2_SALT_BYTES + 43 || !(1..=1000).contains(&thousands) {
        return false;
    }
    let (salt, hash) = salted.split_at(CACHING_SHA2_SALT_BYTES);
    let computed = sha256_crypt(password, salt.as_bytes(), thousands * 1000);
    equal_in_constant_time(computed.as_bytes(), hash.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hex digits to bytes, for the vectors below.
    fn from_hex(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|index| u8::from_str_radix(&hex[index..index + 2], 16).unwrap())
            .collect()
    }

    /// The scramble 1, 2, ..., 20 used by the vectors computed with
    /// python3's hashlib.
    fn counting_scramble() -> [u8; 20] {
        std::array::from_fn(|index| index as u8 + 1)
    }

    #[test]
    fn native_stage2_matches_mysql_password_function() {
        // Published: MySQL's PASSWORD('secret') is
        // *14E65567ABDB5135D0CFD9A70B3032C179A49EE7 and PASSWORD('password')
        // is *2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19.
        assert_eq!(
            native_password_stage2(b"secret").to_vec(),
            from_hex("14E65567ABDB5135D0CFD9A70B3032C179A49EE7")
        );
        assert_eq!(
            native_password_stage2(b"password").to_vec(),
            from_hex("2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19")
        );
    }

    #[test]
    fn native_response_matches_formula_and_hashlib() {
        let scramble = counting_scramble();
        let response = native_password_response(b"secret", &scramble);
        // From python3: sha1(pw) XOR sha1(scramble + sha1(sha1(pw))).
        assert_eq!(
            response.to_vec(),
            from_hex("b32bb3a583e1340c0a1108d58b1be49781ad8c2f")
        );
        let stage1 = sha1(&[b"secret"]);
        let formula = xor(&stage1, &sha1(&[&scramble, &sha1(&[&stage1])]));
        assert_eq!(response, formula);
    }

    #[test]
    fn native_verify() {
        let scramble = counting_scramble();
        let stage2 = native_password_stage2(b"secret");
        let response = native_password_response(b"secret", &scramble);
        assert!(verify_native_password(&stage2, &scramble, &response));
        let wrong = native_password_response(b"Secret", &scramble);
        assert!(!verify_native_password(&stage2, &scramble, &wrong));
        assert!(!verify_native_password(&stage2, &scramble, &response[..19]));
        assert!(!verify_native_password(&stage2, &scramble, &[]));
        let other_scramble = [9u8; 20];
        assert!(!verify_native_password(&stage2, &other_scramble, &response));
    }

    #[test]
    fn caching_sha2_response_matches_formula_and_hashlib() {
        let scramble = counting_scramble();
        let response = caching_sha2_response(b"secret", &scramble);
        assert_eq!(
            response.to_vec(),
            from_hex("746ebe205d56a0707acb3e796e834e0dd7b1d61743b26bd5202c7a623230c7c9")
        );
        let stage1 = sha256(&[b"secret"]);
        let formula = xor(&stage1, &sha256(&[&sha256(&[&stage1]), &scramble]));
        assert_eq!(response, formula);
        assert_eq!(
            caching_sha2_stage2(b"secret").to_vec(),
            from_hex("3881219d087dd9c634373fd33dfa33a2cb6bfc6c520b64b8bb60ef2ceb534ae7")
        );
    }

    #[test]
    fn sha256_crypt_matches_the_published_vectors() {
        // From the SHA-crypt specification's tests (glibc crypt(3) agrees).
        assert_eq!(
            sha256_crypt(b"Hello world!", b"saltstring", 5000),
            "5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5"
        );
        assert_eq!(
            sha256_crypt(b"Hello world!", b"saltstringsaltst", 10000),
            "3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA"
        );
        let salt = crypt_salt(&[7u8; 20]);
        let stored = caching_sha2_stored(b"secret", &salt);
        assert!(stored.starts_with("$A$005$"));
        assert!(verify_caching_sha2_stored(&stored, b"secret"));
        assert!(!verify_caching_sha2_stored(&stored, b"Secret"));
        assert!(!verify_caching_sha2_stored("$A$005$short", b"secret"));
        assert!(!verify_caching_sha2_stored("", b"secret"));
    }

    #[test]
    fn caching_sha2_verify() {
        let scramble = counting_scramble();
        let stored = caching_sha2_stage2(b"secret");
        let response = caching_sha2_response(b"secret", &scramble);
        assert!(verify_caching_sha2_fast(&stored, &scramble, &response));
        let wrong = caching_sha2_response(b"secreT", &scramble);
        assert!(!verify_caching_sha2_fast(&stored, &scramble, &wrong));
        assert!(!verify_caching_sha2_fast(
            &stored,
            &scramble,
            &response[..31]
        ));
        assert!(!verify_caching_sha2_fast(&stored, &scramble, &[]));
    }
}
