//! A hash map from `u64` keys to `u32` values whose capacity is fixed at
//! creation: inserting never allocates. Pools in the data node (transaction
//! records, operation records) are sized from config at start, and the maps
//! that find them must not grow on the hot path either.
//!
//! Open addressing with linear probing, Robin Hood insertion (an entry
//! further from its home slot takes the place of one nearer to its own) and
//! backward-shift deletion, so there are no tombstones, lookups stay short
//! after many removals, and a removal stops at the first entry that sits at
//! its home, which matters here: keys that differ only in their low bits
//! sit side by side in runs (see `home`).

use crate::mix::fmix64;

const EMPTY: u64 = u64::MAX;
/// Keys placed together: 64 of them fill eight cache lines of keys.
const GROUP_BITS: u32 = 6;
const GROUP_MASK: u64 = (1 << GROUP_BITS) - 1;

/// Fixed-capacity `u64 -> u32` map. The key `u64::MAX` is reserved.
///
/// ```
/// let mut map = stdx::FixedMap::with_capacity(4);
/// assert!(map.insert(10, 1).is_ok());
/// assert_eq!(map.get(10), Some(1));
/// assert_eq!(map.remove(10), Some(1));
/// assert_eq!(map.get(10), None);
/// ```
pub struct FixedMap {
    keys: Box<[u64]>,
    values: Box<[u32]>,
    mask: usize,
    len: usize,
    capacity: usize,
}

/// Returned by [`FixedMap::insert`] when the map holds `capacity` entries.
#[derive(Debug, PartialEq, Eq)]
pub struct MapFull;

impl FixedMap {
    /// A map that holds up to `capacity` entries (slots are twice that,
    /// rounded up to a power of two, to keep probes short).
    pub fn with_capacity(capacity: usize) -> FixedMap {
        let slots = (capacity.max(1) * 2).next_power_of_two();
        FixedMap {
            keys: vec![EMPTY; slots].into_boxed_slice(),
            values: vec![0; slots].into_boxed_slice(),
            mask: slots - 1,
            len: 0,
            capacity: capacity.max(1),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where `key`'s probe starts. Keys that differ only in their low
    /// `GROUP_BITS` bits (a transaction id counter's, a tc's operation
    /// index) land side by side, so a window of recent ids shares cache
    /// lines instead of missing once each; each group of them is placed
    /// at random, so groups from different sources do not form long runs.
    #[inline]
    fn home(&self, key: u64) -> usize {
        let group = fmix64(key >> GROUP_BITS) << GROUP_BITS;
        (group | (key & GROUP_MASK)) as usize & self.mask
    }

    /// The value for `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<u32> {
        assert!(key != EMPTY, "FixedMap: key u64::MAX is reserved");
        let mut slot = self.home(key);
        loop {
            let found = self.keys[slot];
            if found == key {
                return Some(self.values[slot]);
            }
            if found == EMPTY {
                return None;
            }
            slot = (slot + 1) & self.mask;
        }
    }

    /// How far the entry at `slot` (holding `key`) is from its home.
    #[inline]
    fn distance(&self, key: u64, slot: usize) -> usize {
        slot.wrapping_sub(self.home(key)) & self.mask
    }

    /// Inserts or replaces; fails only when a new key finds the map full.
    pub fn insert(&mut self, key: u64, value: u32) -> Result<Option<u32>, MapFull> {
        assert!(key != EMPTY, "FixedMap: key u64::MAX is reserved");
        let mut slot = self.home(key);
        loop {
            let found = self.keys[slot];
            if found == key {
                let old = self.values[slot];
                self.values[slot] = value;
                return Ok(Some(old));
            }
            if found == EMPTY {
                break;
            }
            slot = (slot + 1) & self.mask;
        }
        if self.len == self.capacity {
            return Err(MapFull);
        }
        // Robin Hood: walk from home; whoever is nearer its home than the
        // entry being placed yields its slot and moves on instead.
        let (mut key, mut value) = (key, value);
        let mut slot = self.home(key);
        let mut distance = 0;
        loop {
            let found = self.keys[slot];
            if found == EMPTY {
                self.keys[slot] = key;
                self.values[slot] = value;
                self.len += 1;
                return Ok(None);
            }
            let found_distance = self.distance(found, slot);
            if found_distance < distance {
                std::mem::swap(&mut self.keys[slot], &mut key);
                std::mem::swap(&mut self.values[slot], &mut value);
                distance = found_distance;
            }
            slot = (slot + 1) & self.mask;
            distance += 1;
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: u64) -> Option<u32> {
        assert!(key != EMPTY, "FixedMap: key u64::MAX is reserved");
        let mut slot = self.home(key);
        loop {
            let found = self.keys[slot];
            if found == EMPTY {
                return None;
            }
            if found == key {
                break;
            }
            slot = (slot + 1) & self.mask;
        }
        let value = self.values[slot];
        // Backward shift: each following entry not at its home moves back
        // one slot. The Robin Hood order means the first entry at its home
        // (or an empty slot) ends the entries that could use the hole.
        let mut hole = slot;
        loop {
            let next = (hole + 1) & self.mask;
            let key_next = self.keys[next];
            if key_next == EMPTY || self.distance(key_next, next) == 0 {
                break;
            }
            self.keys[hole] = key_next;
            self.values[hole] = self.values[next];
            hole = next;
        }
        self.keys[hole] = EMPTY;
        self.len -= 1;
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::XorShift;
    use std::collections::HashMap;

    #[test]
    fn matches_a_model_under_random_operations() {
        let mut map = FixedMap::with_capacity(300);
        let mut model = HashMap::new();
        let mut rng = XorShift::new(42);
        for _ in 0..100_000 {
            let key = rng.below(500);
            match rng.below(3) {
                0 => {
                    let value = rng.next_u64() as u32;
                    let result = map.insert(key, value);
                    if model.len() == 300 && !model.contains_key(&key) {
                        assert_eq!(result, Err(MapFull));
                    } else {
                        assert_eq!(result, Ok(model.insert(key, value)));
                    }
                }
                1 => assert_eq!(map.remove(key), model.remove(&key)),
                _ => assert_eq!(map.get(key), model.get(&key).copied()),
            }
            assert_eq!(map.len(), model.len());
        }
    }

    /// The pattern of the data node's maps: a sliding window of ids from a
    /// few counters (transaction ids of several API nodes), removed out of
    /// order, in a small map where groups of neighbours collide and runs
    /// wrap around the end of the table.
    #[test]
    fn matches_a_model_with_windows_of_sequential_keys() {
        let mut map = FixedMap::with_capacity(200);
        let mut model = HashMap::new();
        let mut rng = XorShift::new(7);
        let mut next = [0u64; 3];
        for _ in 0..200_000 {
            let source = rng.below(3) as usize;
            if rng.below(2) == 0 && model.len() < 200 {
                let key = (source as u64) << 48 | next[source];
                next[source] += 1;
                let value = rng.next_u64() as u32;
                assert_eq!(map.insert(key, value), Ok(None));
                model.insert(key, value);
            } else {
                // Remove one of the recent keys of the source, or miss.
                let back = rng.below(300);
                let key = (source as u64) << 48 | next[source].saturating_sub(back + 1);
                assert_eq!(map.remove(key), model.remove(&key), "key {key:#x}");
            }
            if rng.below(8) == 0 {
                for (&key, &value) in &model {
                    assert_eq!(map.get(key), Some(value));
                }
            }
            assert_eq!(map.len(), model.len());
        }
    }
}
