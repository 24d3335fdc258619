//! Property tests: every decoder survives arbitrary bytes without
//! panicking, and the writers' output reads back.

use mysql_protocol::{
    decode_command, decode_execute_params, decode_handshake_response, put_lenenc_bytes,
    put_lenenc_int, take_packet, PacketWriter, ParamType, Reader,
};
use proptest::prelude::*;

proptest! {
    #[test]
    fn take_packet_never_panics(buffer in proptest::collection::vec(any::<u8>(), 0..64), max in 0usize..64) {
        if let Ok(Some(packet)) = take_packet(&buffer, max) {
            prop_assert!(packet.consumed <= buffer.len());
            prop_assert!(packet.payload.len() <= max);
        }
    }

    #[test]
    fn decode_handshake_response_never_panics(payload in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_handshake_response(&payload);
    }

    #[test]
    fn decode_handshake_response_with_protocol_41_never_panics(
        capabilities in any::<u32>(),
        tail in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        // Random bytes rarely pass the capability check; this reaches the
        // field decoders under every flag combination.
        let mut payload = (capabilities | 0x200).to_le_bytes().to_vec();
        payload.extend_from_slice(&tail);
        let _ = decode_handshake_response(&payload);
    }

    #[test]
    fn decode_command_never_panics(payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = decode_command(&payload);
    }

    #[test]
    fn decode_execute_params_never_panics(
        rest in proptest::collection::vec(any::<u8>(), 0..200),
        param_count in 0usize..40,
        remembered in proptest::collection::vec((any::<u8>(), any::<bool>()), 0..40),
        long_data in proptest::collection::vec(proptest::option::of(proptest::collection::vec(any::<u8>(), 0..4)), 0..40),
    ) {
        let mut types: Vec<ParamType> = remembered
            .into_iter()
            .map(|(column_type, unsigned)| ParamType { column_type, unsigned })
            .collect();
        if let Ok(values) = decode_execute_params(&rest, param_count, &mut types, &long_data) {
            prop_assert_eq!(values.len(), param_count);
        }
    }

    #[test]
    fn small_packets_round_trip(
        payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..5),
        first_sequence in any::<u8>(),
    ) {
        let mut out = Vec::new();
        let mut writer = PacketWriter::new(first_sequence);
        for payload in &payloads {
            writer.packet(&mut out, payload);
        }
        let mut offset = 0;
        for (index, payload) in payloads.iter().enumerate() {
            let packet = take_packet(&out[offset..], 1 << 20).unwrap().unwrap();
            prop_assert_eq!(&packet.payload[..], &payload[..]);
            prop_assert_eq!(packet.sequence, first_sequence.wrapping_add(index as u8));
            offset += packet.consumed;
        }
        prop_assert_eq!(offset, out.len());
    }

    #[test]
    fn lenenc_round_trips(value in any::<u64>(), bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut out = Vec::new();
        put_lenenc_int(&mut out, value);
        put_lenenc_bytes(&mut out, &bytes);
        let mut reader = Reader::new(&out);
        prop_assert_eq!(reader.lenenc_int().unwrap(), Some(value));
        prop_assert_eq!(reader.lenenc_bytes().unwrap(), &bytes[..]);
        prop_assert!(reader.is_empty());
    }
}
