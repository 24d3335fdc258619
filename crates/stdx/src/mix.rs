//! Integer mixing functions (MurmurHash3 finalisers). Used to spread a key
//! hash so that its high and low halves are independent: the high half picks
//! the partition, the low half the hash-index bucket.

/// MurmurHash3's 64-bit finaliser: every input bit affects every output bit.
///
/// ```
/// assert_ne!(stdx::mix::fmix64(1), stdx::mix::fmix64(2));
/// ```
#[inline]
pub fn fmix64(mut value: u64) -> u64 {
    value ^= value >> 33;
    value = value.wrapping_mul(0xff51_afd7_ed55_8ccd);
    value ^= value >> 33;
    value = value.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    value ^= value >> 33;
    value
}

/// A small, fast, seedable pseudo-random generator (xorshift64*), for tests,
/// the simulator and load generators. Not for anything secret.
///
/// ```
/// let mut a = stdx::mix::XorShift::new(7);
/// let mut b = stdx::mix::XorShift::new(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// ```
#[derive(Clone, Debug)]
pub struct XorShift {
    state: u64,
}

impl XorShift {
    /// A generator from `seed` (any value, 0 included).
    pub fn new(seed: u64) -> XorShift {
        XorShift {
            state: fmix64(seed ^ 0x9E37_79B9_7F4A_7C15) | 1,
        }
    }

    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..bound` (`bound` > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "XorShift::below needs a positive bound");
        ((self.next_u64() as u128 * bound as u128) >> 64) as u64
    }
}
