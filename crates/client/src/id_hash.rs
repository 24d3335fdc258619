//! A cheap hasher for the client's maps keyed by ids it hands out itself
//! (transaction ids, request ids): one multiply and a fold instead of
//! SipHash. Those keys are unique and never chosen by a peer, so the
//! flooding resistance SipHash buys is not needed, and on the key-lookup
//! path these maps are hit several times per operation.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` keyed by a client-chosen id.
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Hashes integer ids: the 128-bit product with an odd constant, folded
/// to 64 bits, so both the low bits (the bucket) and the high bits (the
/// control byte) of the hash depend on every bit of the id.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher {
    state: u64,
}

/// An odd 64-bit constant with well-spread bits (from fmix64).
const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

impl IdHasher {
    fn mix(&mut self, value: u64) {
        let product = u128::from(self.state ^ value) * u128::from(MULTIPLIER);
        self.state = (product as u64) ^ ((product >> 64) as u64);
    }
}

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.state
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by integer keys; any other key still hashes every byte.
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.mix(value);
    }

    fn write_u32(&mut self, value: u32) {
        self.mix(u64::from(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::TransactionId;
    use std::hash::BuildHasher;

    #[test]
    fn consecutive_ids_spread_over_buckets_and_control_bytes() {
        let build = BuildHasherDefault::<IdHasher>::default();
        let mut low = std::collections::HashSet::new();
        let mut high = std::collections::HashSet::new();
        for counter in 1..=1024u64 {
            let hash = build.hash_one(TransactionId((200u64 << 48) | counter));
            low.insert(hash & 1023);
            high.insert(hash >> 57);
        }
        assert!(low.len() > 600, "bucket bits collide: {}", low.len());
        assert_eq!(high.len(), 128, "every control byte value is used");
    }

    #[test]
    fn a_map_keyed_by_ids_works_as_any_map() {
        let mut map: IdMap<TransactionId, u32> = IdMap::default();
        for id in 0..10_000u64 {
            map.insert(TransactionId(id << 3), id as u32);
        }
        assert_eq!(map.len(), 10_000);
        assert_eq!(map.get(&TransactionId(77 << 3)), Some(&77));
        assert_eq!(map.remove(&TransactionId(5 << 3)), Some(5));
        assert!(!map.contains_key(&TransactionId(5 << 3)));
        let mut bytes = IdHasher::default();
        bytes.write(b"twelve bytes");
        let mut other = IdHasher::default();
        other.write(b"twelve bytez");
        assert_ne!(bytes.finish(), other.finish());
    }
}
