//! Round trips and hand-built packets as real clients send them: framing
//! around the frame size limit, length-encoded boundaries, the greeting,
//! the handshake response, and prepared-statement parameters.

use std::borrow::Cow;

use mysql_protocol::*;

/// A payload whose bytes depend on their position, so a misplaced frame
/// shows up as a mismatch.
fn patterned(length: usize) -> Vec<u8> {
    (0..length).map(|index| (index % 251) as u8).collect()
}

#[test]
fn packets_round_trip_around_the_frame_size() {
    let sizes = [
        0,
        1,
        0xFF_FFFE,
        0xFF_FFFF,
        0x100_0000,
        2 * 0xFF_FFFF + 5,
        2 * 0xFF_FFFF,
    ];
    for size in sizes {
        let payload = patterned(size);
        let mut out = vec![0x55]; // Bytes already queued stay in front.
        let mut writer = PacketWriter::new(250);
        let start = writer.begin(&mut out);
        out.extend_from_slice(&payload);
        writer.finish(&mut out, start);
        let frames = size / MAX_FRAME_PAYLOAD + 1;
        assert_eq!(out.len(), 1 + size + 4 * frames, "size {size}");
        assert_eq!(
            writer.sequence(),
            250u8.wrapping_add(frames as u8),
            "size {size}"
        );

        let buffer = &out[1..];
        let packet = take_packet(buffer, usize::MAX).unwrap().unwrap();
        assert_eq!(packet.consumed, buffer.len(), "size {size}");
        assert_eq!(
            packet.sequence,
            250u8.wrapping_add(frames as u8 - 1),
            "size {size}"
        );
        assert!(packet.payload[..] == payload[..], "size {size}");
        assert_eq!(
            matches!(packet.payload, Cow::Borrowed(_)),
            frames == 1,
            "size {size}"
        );

        // Any prefix is incomplete.
        for cut in [buffer.len() - 1, buffer.len().min(MAX_FRAME_PAYLOAD + 4), 3] {
            if cut < buffer.len() {
                assert_eq!(
                    take_packet(&buffer[..cut], usize::MAX),
                    Ok(None),
                    "size {size} cut {cut}"
                );
            }
        }
        // The limit is checked against the announced lengths.
        if size > 0 {
            assert!(matches!(
                take_packet(buffer, size - 1),
                Err(WireError::TooLarge { .. })
            ));
        }
        if size > 0 && size <= MAX_FRAME_PAYLOAD {
            // The first header alone already announces too much.
            assert!(matches!(
                take_packet(&buffer[..4], size - 1),
                Err(WireError::TooLarge { .. })
            ));
        }
        assert!(take_packet(buffer, size).unwrap().is_some());
    }
}

#[test]
fn multi_frame_packet_checks_sequence_ids() {
    let mut out = Vec::new();
    PacketWriter::new(3).packet(&mut out, &patterned(MAX_FRAME_PAYLOAD + 2));
    // The second frame's header follows the first frame.
    let second_header = 4 + MAX_FRAME_PAYLOAD;
    assert_eq!(out[second_header..second_header + 4], [2, 0, 0, 4]);
    out[second_header + 3] = 9;
    assert!(matches!(
        take_packet(&out, usize::MAX),
        Err(WireError::Malformed(_))
    ));
    // Too large is found at the second header, before its bytes arrive.
    out[second_header + 3] = 4;
    assert_eq!(
        take_packet(&out[..second_header + 4], MAX_FRAME_PAYLOAD + 1),
        Err(WireError::TooLarge {
            size: MAX_FRAME_PAYLOAD + 2,
            limit: MAX_FRAME_PAYLOAD + 1
        })
    );
}

#[test]
fn lenenc_round_trips_at_the_boundaries() {
    let boundaries = [
        0u64,
        250,
        251,
        252,
        0xFFFF,
        0x10000,
        0xFF_FFFF,
        0x100_0000,
        u64::MAX,
    ];
    for value in boundaries {
        let mut out = Vec::new();
        put_lenenc_int(&mut out, value);
        let expected_length = match value {
            0..=250 => 1,
            251..=0xFFFF => 3,
            0x10000..=0xFF_FFFF => 4,
            _ => 9,
        };
        assert_eq!(out.len(), expected_length, "value {value}");
        let mut reader = Reader::new(&out);
        assert_eq!(reader.lenenc_int(), Ok(Some(value)));
        assert!(reader.is_empty());
    }
    for length in [250usize, 251, 0xFFFF, 0x10000, 0xFF_FFFF, 0x100_0000] {
        let bytes = patterned(length);
        let mut out = Vec::new();
        put_lenenc_bytes(&mut out, &bytes);
        let mut reader = Reader::new(&out);
        assert!(
            reader.lenenc_bytes().unwrap() == &bytes[..],
            "length {length}"
        );
        assert!(reader.is_empty());
    }
}

/// The greeting's fields, read back by a decoder written from the protocol
/// documentation rather than from the encoder.
struct DecodedGreeting {
    protocol: u8,
    version: Vec<u8>,
    connection_id: u32,
    scramble: Vec<u8>,
    capabilities: u32,
    charset: u8,
    status: u16,
    auth_data_length: u8,
    plugin: Vec<u8>,
}

fn decode_greeting(payload: &[u8]) -> DecodedGreeting {
    let protocol = payload[0];
    let version_end = 1 + payload[1..].iter().position(|&byte| byte == 0).unwrap();
    let version = payload[1..version_end].to_vec();
    let mut at = version_end + 1;
    let connection_id = u32::from_le_bytes(payload[at..at + 4].try_into().unwrap());
    at += 4;
    let mut scramble = payload[at..at + 8].to_vec();
    at += 8;
    assert_eq!(payload[at], 0, "filler");
    at += 1;
    let low = u16::from_le_bytes([payload[at], payload[at + 1]]);
    at += 2;
    let charset = payload[at];
    at += 1;
    let status = u16::from_le_bytes([payload[at], payload[at + 1]]);
    at += 2;
    let high = u16::from_le_bytes([payload[at], payload[at + 1]]);
    at += 2;
    let auth_data_length = payload[at];
    at += 1;
    assert_eq!(payload[at..at + 10], [0; 10], "reserved");
    at += 10;
    // The second part is max(13, auth_data_length - 8) bytes, NUL included.
    let second_length = 13.max(usize::from(auth_data_length) - 8);
    scramble.extend_from_slice(&payload[at..at + second_length - 1]);
    assert_eq!(payload[at + second_length - 1], 0);
    at += second_length;
    assert_eq!(*payload.last().unwrap(), 0);
    let plugin = payload[at..payload.len() - 1].to_vec();
    DecodedGreeting {
        protocol,
        version,
        connection_id,
        scramble,
        capabilities: u32::from(low) | u32::from(high) << 16,
        charset,
        status,
        auth_data_length,
        plugin,
    }
}

#[test]
fn handshake_encodes_every_field() {
    let scramble: [u8; 20] = std::array::from_fn(|index| b'A' + index as u8);
    let capabilities = CLIENT_PROTOCOL_41
        | CLIENT_SECURE_CONNECTION
        | CLIENT_PLUGIN_AUTH
        | CLIENT_DEPRECATE_EOF
        | CLIENT_CONNECT_WITH_DB;
    let handshake = Handshake {
        server_version: "8.0.36-tessera",
        connection_id: 0x01020304,
        scramble: &scramble,
        capabilities,
        charset: UTF8MB4_0900_AI_CI,
        status: SERVER_STATUS_AUTOCOMMIT,
        auth_plugin: "mysql_native_password",
    };
    let mut out = Vec::new();
    handshake.encode(&mut out);
    let greeting = decode_greeting(&out);
    assert_eq!(greeting.protocol, 10);
    assert_eq!(greeting.version, b"8.0.36-tessera");
    assert_eq!(greeting.connection_id, 0x01020304);
    assert_eq!(greeting.scramble, scramble);
    assert_eq!(greeting.capabilities, capabilities);
    assert_eq!(greeting.charset, 255);
    assert_eq!(greeting.status, 2);
    assert_eq!(greeting.auth_data_length, 21);
    assert_eq!(greeting.plugin, b"mysql_native_password");
}

/// CLIENT_* flags as the MySQL 8 command-line client sets them.
const REAL_CLIENT_CAPABILITIES: u32 = CLIENT_LONG_PASSWORD
    | CLIENT_FOUND_ROWS
    | CLIENT_LONG_FLAG
    | CLIENT_CONNECT_WITH_DB
    | CLIENT_PROTOCOL_41
    | CLIENT_INTERACTIVE
    | CLIENT_TRANSACTIONS
    | CLIENT_SECURE_CONNECTION
    | CLIENT_MULTI_STATEMENTS
    | CLIENT_MULTI_RESULTS
    | CLIENT_PS_MULTI_RESULTS
    | CLIENT_PLUGIN_AUTH
    | CLIENT_CONNECT_ATTRS
    | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
    | CLIENT_DEPRECATE_EOF;

/// The fixed 32-byte start of a HandshakeResponse41.
fn response_start(capabilities: u32) -> Vec<u8> {
    let mut payload = capabilities.to_le_bytes().to_vec();
    payload.extend_from_slice(&0x0100_0000u32.to_le_bytes());
    payload.push(UTF8MB4_0900_AI_CI);
    payload.extend_from_slice(&[0; 23]);
    payload
}

#[test]
fn real_client_handshake_response_decodes() {
    let scramble = [0x11u8; 20];
    let auth = native_password_response(b"secret", &scramble);
    let mut payload = response_start(REAL_CLIENT_CAPABILITIES);
    payload.extend_from_slice(b"root\0");
    payload.push(20); // Length-encoded auth response.
    payload.extend_from_slice(&auth);
    payload.extend_from_slice(b"test\0");
    payload.extend_from_slice(b"mysql_native_password\0");
    let mut attributes = Vec::new();
    for (key, value) in [
        ("_os", "Linux"),
        ("_client_name", "libmysql"),
        ("_pid", "1234"),
    ] {
        put_lenenc_bytes(&mut attributes, key.as_bytes());
        put_lenenc_bytes(&mut attributes, value.as_bytes());
    }
    put_lenenc_bytes(&mut payload, &attributes);

    let HandshakeResponseOrSsl::Response(response) = decode_handshake_response(&payload).unwrap()
    else {
        panic!("not a response");
    };
    assert_eq!(response.capabilities, REAL_CLIENT_CAPABILITIES);
    assert_eq!(response.max_packet, 0x0100_0000);
    assert_eq!(response.charset, 255);
    assert_eq!(response.user, "root");
    assert_eq!(response.auth_response, auth);
    assert!(verify_native_password(
        &native_password_stage2(b"secret"),
        &scramble,
        &response.auth_response
    ));
    assert_eq!(response.database.as_deref(), Some("test"));
    assert_eq!(
        response.auth_plugin.as_deref(),
        Some("mysql_native_password")
    );
    assert_eq!(
        response.attributes,
        [
            ("_os", "Linux"),
            ("_client_name", "libmysql"),
            ("_pid", "1234")
        ]
        .map(|(key, value)| (key.to_string(), value.to_string()))
    );
}

#[test]
fn older_layouts_and_early_endings_decode() {
    // 1-byte auth length (no lenenc), no database, plugin name without its
    // NUL at the very end, no attributes.
    let capabilities = CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH;
    let mut payload = response_start(capabilities);
    payload.extend_from_slice(b"bob\0");
    payload.push(3);
    payload.extend_from_slice(&[1, 2, 3]);
    payload.extend_from_slice(b"caching_sha2_password");
    let HandshakeResponseOrSsl::Response(response) = decode_handshake_response(&payload).unwrap()
    else {
        panic!("not a response");
    };
    assert_eq!(response.user, "bob");
    assert_eq!(response.auth_response, [1, 2, 3]);
    assert_eq!(response.database, None);
    assert_eq!(
        response.auth_plugin.as_deref(),
        Some("caching_sha2_password")
    );

    // Every optional flag set, but the packet ends after an empty auth
    // response.
    let mut payload = response_start(REAL_CLIENT_CAPABILITIES);
    payload.extend_from_slice(b"root\0");
    payload.push(0);
    let HandshakeResponseOrSsl::Response(response) = decode_handshake_response(&payload).unwrap()
    else {
        panic!("not a response");
    };
    assert!(response.auth_response.is_empty());
    assert_eq!(response.database, None);
    assert_eq!(response.auth_plugin, None);
    assert!(response.attributes.is_empty());

    // NUL-terminated auth response of a client without SECURE_CONNECTION.
    let mut payload = response_start(CLIENT_PROTOCOL_41);
    payload.extend_from_slice(b"old\0abc\0");
    let HandshakeResponseOrSsl::Response(response) = decode_handshake_response(&payload).unwrap()
    else {
        panic!("not a response");
    };
    assert_eq!(response.auth_response, b"abc");
}

#[test]
fn ssl_request_and_bad_responses() {
    let capabilities = REAL_CLIENT_CAPABILITIES | CLIENT_SSL;
    assert_eq!(
        decode_handshake_response(&response_start(capabilities)),
        Ok(HandshakeResponseOrSsl::SslRequest { capabilities })
    );
    assert_eq!(
        decode_handshake_response(&response_start(REAL_CLIENT_CAPABILITIES)),
        Err(WireError::Truncated("user name"))
    );
    assert!(matches!(
        decode_handshake_response(&response_start(REAL_CLIENT_CAPABILITIES)[..20]),
        Err(WireError::Truncated(_))
    ));
    let mut payload = response_start(REAL_CLIENT_CAPABILITIES);
    payload.extend_from_slice(b"\xFF\xFEuser\0");
    assert!(matches!(
        decode_handshake_response(&payload),
        Err(WireError::Malformed(_))
    ));
    let mut payload = response_start(REAL_CLIENT_CAPABILITIES);
    payload.extend_from_slice(b"root\0\x14short");
    assert!(matches!(
        decode_handshake_response(&payload),
        Err(WireError::Truncated(_))
    ));
}

#[test]
fn commands_decode() {
    assert!(matches!(decode_command(&[]), Err(WireError::Malformed(_))));
    assert_eq!(decode_command(&[0x01]), Ok(Command::Quit));
    assert_eq!(decode_command(b"\x02db"), Ok(Command::InitDb(b"db")));
    assert_eq!(
        decode_command(b"\x03SELECT 1"),
        Ok(Command::Query(b"SELECT 1"))
    );
    assert_eq!(decode_command(b"\x04t\0"), Ok(Command::FieldList(b"t\0")));
    assert_eq!(decode_command(&[0x09]), Ok(Command::Statistics));
    assert_eq!(
        decode_command(&[0x0C, 5, 0, 0, 0]),
        Ok(Command::ProcessKill(5))
    );
    assert_eq!(decode_command(&[0x0D]), Ok(Command::Debug));
    assert_eq!(decode_command(&[0x0E]), Ok(Command::Ping));
    assert_eq!(decode_command(&[0x11, 1, 2]), Ok(Command::ChangeUser));
    assert_eq!(
        decode_command(b"\x16SELECT ?"),
        Ok(Command::StmtPrepare(b"SELECT ?"))
    );
    assert_eq!(
        decode_command(&[0x17, 7, 0, 0, 0, 0, 1, 0, 0, 0, 0xAA]),
        Ok(Command::StmtExecute(StmtExecute {
            statement_id: 7,
            flags: 0,
            iteration_count: 1,
            rest: &[0xAA],
        }))
    );
    assert_eq!(
        decode_command(&[0x18, 7, 0, 0, 0, 2, 0, b'x']),
        Ok(Command::StmtSendLongData {
            statement_id: 7,
            param: 2,
            data: b"x"
        })
    );
    assert_eq!(
        decode_command(&[0x19, 7, 0, 0, 0]),
        Ok(Command::StmtClose(7))
    );
    assert_eq!(
        decode_command(&[0x1A, 7, 0, 0, 0]),
        Ok(Command::StmtReset(7))
    );
    assert_eq!(decode_command(&[0x1B, 1, 0]), Ok(Command::SetOption(1)));
    assert_eq!(
        decode_command(&[0x1C, 7, 0, 0, 0, 10, 0, 0, 0]),
        Ok(Command::StmtFetch {
            statement_id: 7,
            rows: 10
        })
    );
    assert_eq!(decode_command(&[0x1F]), Ok(Command::ResetConnection));
    assert_eq!(decode_command(&[0x99]), Ok(Command::Other(0x99)));
    assert!(matches!(
        decode_command(&[0x19, 7, 0]),
        Err(WireError::Truncated(_))
    ));
    assert!(matches!(
        decode_command(&[0x17, 7, 0, 0, 0, 0, 1]),
        Err(WireError::Truncated(_))
    ));
}

#[test]
fn execute_params_with_new_types_then_remembered_types() {
    // Parameters: BIGINT UNSIGNED, VARCHAR, DATETIME, TIME, DOUBLE, TINY
    // (NULL), FLOAT.
    let type_pairs: [(u8, u8); 7] = [
        (ColumnType::LongLong as u8, 0x80),
        (ColumnType::VarString as u8, 0),
        (ColumnType::DateTime as u8, 0),
        (ColumnType::Time as u8, 0),
        (ColumnType::Double as u8, 0),
        (ColumnType::Tiny as u8, 0),
        (ColumnType::Float as u8, 0),
    ];
    let mut values = Vec::new();
    values.extend_from_slice(&u64::MAX.to_le_bytes());
    put_lenenc_bytes(&mut values, b"hello");
    values.extend_from_slice(&[11, 0xE8, 0x07, 2, 29, 13, 14, 15, 7, 0, 0, 0]);
    values.extend_from_slice(&[8, 1, 2, 0, 0, 0, 3, 4, 5]);
    values.extend_from_slice(&2.5f64.to_le_bytes());
    values.extend_from_slice(&0.5f32.to_le_bytes());

    let mut first = vec![0b0010_0000, 1]; // Parameter 5 is NULL; types follow.
    for (column_type, flags) in type_pairs {
        first.extend_from_slice(&[column_type, flags]);
    }
    first.extend_from_slice(&values);
    let expected = [
        ParamValue::UInt(u64::MAX),
        ParamValue::Bytes(b"hello"),
        ParamValue::DateTime {
            year: 2024,
            month: 2,
            day: 29,
            hour: 13,
            minute: 14,
            second: 15,
            microsecond: 7,
        },
        ParamValue::Time {
            negative: true,
            days: 2,
            hour: 3,
            minute: 4,
            second: 5,
            microsecond: 0,
        },
        ParamValue::Double(2.5),
        ParamValue::Null,
        ParamValue::Double(0.5),
    ];
    let mut types = Vec::new();
    assert_eq!(
        decode_execute_params(&first, 7, &mut types, &[]).unwrap(),
        expected
    );
    assert_eq!(types.len(), 7);
    assert_eq!(
        types[0],
        ParamType {
            column_type: 8,
            unsigned: true
        }
    );

    // The next execution sends no types: the remembered ones apply.
    let mut second = vec![0b0010_0000, 0];
    second.extend_from_slice(&values);
    assert_eq!(
        decode_execute_params(&second, 7, &mut types, &[]).unwrap(),
        expected
    );

    // Without remembered types that is an error.
    assert_eq!(
        decode_execute_params(&second, 7, &mut Vec::new(), &[]),
        Err(WireError::Malformed(
            "parameter types never sent".to_string()
        ))
    );
}

#[test]
fn execute_params_signed_integers_dates_and_long_data() {
    let mut rest = vec![0b0000_0000, 1];
    for column_type in [
        ColumnType::Tiny,
        ColumnType::Short,
        ColumnType::Long,
        ColumnType::Blob,
    ] {
        rest.extend_from_slice(&[column_type as u8, 0]);
    }
    rest.extend_from_slice(&[0xFF, 0xFE, 0xFF, 0xFD, 0xFF, 0xFF, 0xFF]);
    // Parameter 3 was sent as long data: no value in the packet.
    let long_data = [None, None, None, Some(b"long".to_vec())];
    let mut types = Vec::new();
    assert_eq!(
        decode_execute_params(&rest, 4, &mut types, &long_data).unwrap(),
        [
            ParamValue::Int(-1),
            ParamValue::Int(-2),
            ParamValue::Int(-3),
            ParamValue::Bytes(b"long")
        ]
    );

    // Zero parameters: an empty block.
    assert_eq!(
        decode_execute_params(&[], 0, &mut Vec::new(), &[]),
        Ok(Vec::new())
    );

    // Short dates and a zero time.
    let mut rest = vec![
        0,
        1,
        ColumnType::Date as u8,
        0,
        ColumnType::Timestamp as u8,
        0,
    ];
    rest.extend_from_slice(&[ColumnType::Time as u8, 0]);
    rest.extend_from_slice(&[4, 0xE8, 0x07, 1, 2, 0, 0]);
    let decoded = decode_execute_params(&rest, 3, &mut Vec::new(), &[]).unwrap();
    assert_eq!(
        decoded[0],
        ParamValue::DateTime {
            year: 2024,
            month: 1,
            day: 2,
            hour: 0,
            minute: 0,
            second: 0,
            microsecond: 0
        }
    );
    assert_eq!(
        decoded[1],
        ParamValue::DateTime {
            year: 0,
            month: 0,
            day: 0,
            hour: 0,
            minute: 0,
            second: 0,
            microsecond: 0
        }
    );
    assert_eq!(
        decoded[2],
        ParamValue::Time {
            negative: false,
            days: 0,
            hour: 0,
            minute: 0,
            second: 0,
            microsecond: 0
        }
    );

    // A bad date length and an unknown type are malformed; a short packet
    // is truncated.
    let rest = [0, 1, ColumnType::Date as u8, 0, 5, 0, 0, 0, 0, 0];
    assert!(matches!(
        decode_execute_params(&rest, 1, &mut Vec::new(), &[]),
        Err(WireError::Malformed(_))
    ));
    let rest = [0, 1, 100, 0, 0];
    assert!(matches!(
        decode_execute_params(&rest, 1, &mut Vec::new(), &[]),
        Err(WireError::Malformed(_))
    ));
    let rest = [0, 1, ColumnType::LongLong as u8, 0, 1, 2];
    assert!(matches!(
        decode_execute_params(&rest, 1, &mut Vec::new(), &[]),
        Err(WireError::Truncated(_))
    ));
}

#[test]
fn column_type_bytes_round_trip() {
    let mut known = 0;
    for byte in 0..=255u8 {
        if let Some(column_type) = ColumnType::from_u8(byte) {
            assert_eq!(column_type as u8, byte);
            known += 1;
        }
    }
    assert_eq!(known, 27);
    assert_eq!(ColumnType::from_u8(14), None);
}
