//! The answer every tc, ldm and dict gives a new master dict's take-over
//! query (DICT_TAKEOVER_REQ, docs/design/0016-schema-takeover.md): the
//! tables the block holds, as (id, version, index revision) entries in a
//! section. Here so
//! that the blocks share it without depending on each other.

use crate::Context;
use signal::codec::encode_table_versions;
use signal::signals::{DictTakeoverConf, DictTakeoverReq};
use signal::{BlockRef, Envelope};

/// How long a block waits for a section when the pool is out of them
/// before it answers the query again.
pub const SECTION_RETRY_DELAY_MS: u64 = 10;

/// Answers `request` from `from` with `tables`. Out of sections, the
/// block gets the request again after [`SECTION_RETRY_DELAY_MS`].
pub fn answer(
    ctx: &mut dyn Context,
    me: BlockRef,
    from: BlockRef,
    request: DictTakeoverReq,
    schema_version: u32,
    tables: impl ExactSizeIterator<Item = (u32, u32, u32)>,
) {
    let mut bytes = Vec::new();
    encode_table_versions(&mut bytes, tables)
        .expect("a block holds at most MAX_TABLE_VERSIONS tables (dict refuses creates past it)");
    let Some(section) = ctx.pool().copy_from(&bytes) else {
        let again = Envelope {
            from,
            to: me,
            signal: request.into(),
        };
        return ctx.send_delayed(again, SECTION_RETRY_DELAY_MS);
    };
    let conf = DictTakeoverConf {
        membership_id: request.membership_id,
        schema_version,
        tables: section,
    };
    crate::send(ctx, me, from, conf);
}
