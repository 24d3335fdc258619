//! tpcc's random numbers: a small deterministic generator (splitmix64,
//! seeded per thread and per loaded warehouse so a seed repeats a run),
//! TPC-C's NURand and its C constants (clause 2.1.6), the a-string and
//! n-string text of clause 4.3.2.2, and the customer last names built from
//! syllables (clause 4.3.2.3).

/// splitmix64: tiny, fast and good enough for a workload generator (the
/// crate has no `rand`, and a benchmark wants repeatable streams anyway).
#[derive(Clone, Debug)]
pub(super) struct Random {
    state: u64,
}

/// The characters of an a-string: letters and digits, so generated text
/// never needs escaping inside a SQL literal.
const ALPHANUMERIC: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// The word clause 4.3.3.1 puts into 10% of i_data and s_data.
const ORIGINAL: &str = "ORIGINAL";

impl Random {
    /// A generator whose stream is fixed by `seed`.
    pub(super) fn new(seed: u64) -> Random {
        Random { state: seed }
    }

    /// The next 64 random bits.
    pub(super) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    /// Uniform in `low..=high` (clause 2.1.5's random(x, y)). The modulo's
    /// bias is below 2^-32 for these small ranges: irrelevant here.
    pub(super) fn between(&mut self, low: u32, high: u32) -> u32 {
        debug_assert!(low <= high, "empty range {low}..={high}");
        let span = u64::from(high) - u64::from(low) + 1;
        // The remainder is below `span`, which fits in u32 plus one, so the
        // sum stays within `low..=high`.
        low + (self.next_u64() % span) as u32
    }

    /// True `percent` times in 100.
    pub(super) fn percent(&mut self, percent: u32) -> bool {
        self.between(1, 100) <= percent
    }

    /// NURand(A, x, y) of clause 2.1.6, A being `mask` and C `constant`:
    /// skewed towards some values of `low..=high`, so hot rows exist.
    pub(super) fn nurand(&mut self, mask: u32, low: u32, high: u32, constant: u32) -> u32 {
        let span = u64::from(high) - u64::from(low) + 1;
        let mixed =
            u64::from(self.between(0, mask) | self.between(low, high)) + u64::from(constant);
        // The remainder is below `span`, so the sum stays within `low..=high`.
        low + (mixed % span) as u32
    }

    /// An a-string (clause 4.3.2.2): random letters and digits, of a
    /// random length in `min_length..=max_length`.
    pub(super) fn alphanumeric(&mut self, min_length: u32, max_length: u32) -> String {
        let length = self.between(min_length, max_length);
        (0..length)
            .map(|_| {
                let index = self.between(0, ALPHANUMERIC.len() as u32 - 1) as usize;
                char::from(ALPHANUMERIC[index])
            })
            .collect()
    }

    /// An n-string (clause 4.3.2.2): random digits, of a random length in
    /// `min_length..=max_length`.
    pub(super) fn numeric(&mut self, min_length: u32, max_length: u32) -> String {
        let length = self.between(min_length, max_length);
        (0..length)
            .map(|_| char::from(b'0' + self.between(0, 9) as u8))
            .collect()
    }

    /// i_data or s_data (clause 4.3.3.1): an a-string of 26..50
    /// characters, 10% of them holding "ORIGINAL" at a random place.
    pub(super) fn item_data(&mut self) -> String {
        let mut data = self.alphanumeric(26, 50);
        if self.percent(10) {
            let start = self.between(0, data.len() as u32 - ORIGINAL.len() as u32) as usize;
            // The text is ASCII, so any byte offset is a character boundary.
            data.replace_range(start..start + ORIGINAL.len(), ORIGINAL);
        }
        data
    }

    /// A zip code (clause 4.3.2.7): four random digits then "11111".
    pub(super) fn zip(&mut self) -> String {
        let mut zip = self.numeric(4, 4);
        zip.push_str("11111");
        zip
    }

    /// Puts `items` in a random order (Fisher-Yates).
    pub(super) fn shuffle<T>(&mut self, items: &mut [T]) {
        for last in (1..items.len()).rev() {
            let other = self.between(0, last as u32) as usize;
            items.swap(last, other);
        }
    }
}

/// Seed streams (see `derive_seed`): each kind of sequence draws from its
/// own, so adding draws to one changes no other.
pub(super) const ITEM_STREAM: u64 = 1;
/// A loaded warehouse's rows, by warehouse id.
pub(super) const WAREHOUSE_STREAM: u64 = 2;
/// A loaded district's o_ol_cnt values, by district.
pub(super) const ORDER_LINE_COUNT_STREAM: u64 = 3;
/// A terminal's inputs, by terminal index.
pub(super) const TERMINAL_STREAM: u64 = 4;
/// The run's NURand constants.
pub(super) const CONSTANTS_STREAM: u64 = 5;

/// The seed of stream `index` of kind `stream` under the run's `seed`.
/// splitmix64's states advance by a constant, so seeds one step apart
/// would give the same sequence shifted by one; mixed seeds start the
/// streams at unrelated places instead.
pub(super) fn derive_seed(seed: u64, stream: u64, index: u64) -> u64 {
    Random::new(seed ^ stream.rotate_left(48) ^ index).next_u64()
}

/// The C constants of NURand (clause 2.1.6.1), fixed for a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct NurandConstants {
    /// C for NURand(255, 0, 999) while loading customers' last names.
    pub(super) last_name_load: u32,
    /// C for NURand(255, 0, 999) while running: it differs from the load's
    /// by 65..=119, never 96 or 112 (clause 2.1.6.1), so the names looked
    /// up are skewed differently from the names loaded.
    pub(super) last_name_run: u32,
    /// C for NURand(1023, 1, 3000), customer ids.
    pub(super) customer_id: u32,
    /// C for NURand(8191, 1, 100000), item ids.
    pub(super) item_id: u32,
}

impl NurandConstants {
    /// Draws the constants from `random`.
    pub(super) fn pick(random: &mut Random) -> NurandConstants {
        let last_name_load = random.between(0, 255);
        let delta = loop {
            let delta = random.between(65, 119);
            if delta != 96 && delta != 112 {
                break delta;
            }
        };
        // A load constant above 255 - delta is at least 137 > delta, so the
        // subtraction cannot underflow.
        let last_name_run = if last_name_load + delta <= 255 {
            last_name_load + delta
        } else {
            last_name_load - delta
        };
        NurandConstants {
            last_name_load,
            last_name_run,
            customer_id: random.between(0, 1023),
            item_id: random.between(0, 8191),
        }
    }
}

/// The ten syllables of clause 4.3.2.3.
const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The customer last name of `number` (0..=999): the syllables of its
/// three digits (clause 4.3.2.3), 371 being "PRICALLYOUGHT".
pub(super) fn last_name(number: u32) -> String {
    let syllable = |digit: u32| SYLLABLES[(digit % 10) as usize];
    let mut name = String::with_capacity(15);
    name.push_str(syllable(number / 100));
    name.push_str(syllable(number / 10));
    name.push_str(syllable(number));
    name
}
