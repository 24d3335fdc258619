//! The partition hash shared by the data nodes and the client: a key's
//! distribution hash picks one of [`BUCKETS`] buckets, and a table's map takes
//! buckets to partitions (docs/design/data-and-routing.md §6). Buckets
//! decouple the hash from the partition count, so adding partitions later
//! moves whole buckets.

use crate::attr::KeyHash;

/// Number of hash buckets (NDB's hash map size).
pub const BUCKETS: u32 = 3840;

/// The bucket of a key.
#[inline]
pub fn bucket(hash: KeyHash) -> u32 {
    hash.distribution_hash() % BUCKETS
}

/// The default map from bucket to partition: round robin.
#[inline]
pub fn default_partition_of_bucket(bucket: u32, partitions: u32) -> u32 {
    assert!(partitions > 0, "a table has at least one partition");
    bucket % partitions
}
