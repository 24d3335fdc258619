//! CRC-32C (Castagnoli) for the short inputs of hot paths: a row's checksum
//! on every read, a key's hash on every routed operation.
//!
//! The `crc32c` crate is built for long buffers: each call checks the CPU,
//! then splits the input for three interleaved streams, and for a 4-byte
//! key column or a 120-byte row that set-up costs more than the CRC
//! itself. Short inputs here run one SSE 4.2 `crc32` instruction per 8
//! bytes; long ones, and CPUs without SSE 4.2, go to the crate. Both give
//! the same values (the tests hold them to it), so stored checksums and
//! hashes do not depend on which path computed them.

/// Inputs up to this length take the short path.
const SHORT_BYTES: usize = 512;

/// CRC-32C of `bytes` (same value as `crc32c::crc32c`).
#[inline]
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c_append(0, bytes)
}

/// CRC-32C of `bytes` continuing from `crc`, the CRC of what came before
/// (same value as `crc32c::crc32c_append`).
#[inline]
pub fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if bytes.len() <= SHORT_BYTES && std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2, checked just above (std caches
            // the answer, so the check is one load).
            return unsafe { short_sse42(crc, bytes) };
        }
    }
    crc32c::crc32c_append(crc, bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn short_sse42(crc: u32, bytes: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut state = u64::from(!crc);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(word);
        state = _mm_crc32_u64(state, u64::from_le_bytes(eight));
    }
    let mut state = state as u32;
    for &byte in words.remainder() {
        state = _mm_crc32_u8(state, byte);
    }
    !state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::XorShift;

    #[test]
    fn matches_the_crate_for_every_length_and_start() {
        let mut random = XorShift::new(3);
        let data: Vec<u8> = (0..2 * SHORT_BYTES + 64)
            .map(|_| random.next_u64() as u8)
            .collect();
        for length in 0..data.len() {
            for start in [0, 1, 5, 8] {
                if start + length > data.len() {
                    continue;
                }
                let bytes = &data[start..start + length];
                assert_eq!(crc32c(bytes), crc32c::crc32c(bytes), "length {length}");
                let seed = random.next_u64() as u32;
                assert_eq!(
                    crc32c_append(seed, bytes),
                    crc32c::crc32c_append(seed, bytes),
                    "append, length {length}"
                );
            }
        }
    }

    #[test]
    fn known_value() {
        // The CRC-32C check value (RFC 3720, appendix B.4 test vectors).
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
    }

    #[test]
    fn appending_pieces_equals_the_whole() {
        let bytes = b"a row of some bytes, split anywhere";
        for split in 0..bytes.len() {
            let (head, tail) = bytes.split_at(split);
            assert_eq!(crc32c_append(crc32c(head), tail), crc32c(bytes));
        }
    }
}
