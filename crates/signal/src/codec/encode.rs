//! Encoding: [`encode_signal`] appends one signal record (12-byte head, then
//! the signal's fields and sections, as the signal table declares them)
//! inside a frame, and refuses the node-local signals, which have no wire
//! form.

use super::{WireError, Writer};
use crate::signals::Envelope;

/// Appends one signal record to `out` (inside a frame). A node-local
/// signal is refused with [`WireError::NotWireSignal`] and nothing is
/// appended.
pub fn encode_signal(out: &mut Vec<u8>, envelope: &Envelope) -> Result<(), WireError> {
    let head = out.len();
    let mut w = Writer::new(out);
    w.u16(envelope.signal.number());
    w.u8(envelope.to.kind as u8);
    w.u8(envelope.from.kind as u8);
    w.u16(envelope.to.instance);
    w.u16(envelope.from.instance);
    w.u32(0); // body length, patched below
    let body = w.position();
    if let Err(error) = envelope.signal.encode_body(&mut w) {
        out.truncate(head);
        return Err(error);
    }
    let body_bytes = (out.len() - body) as u32;
    out[head + 8..head + 12].copy_from_slice(&body_bytes.to_le_bytes());
    Ok(())
}
