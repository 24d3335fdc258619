//! Scan programs: comparisons in the indexes' order, SQL's three-valued
//! logic, LIKE against a naive matcher, and programs that do not fit the
//! table, are cut or garbled, or are too long, refused without a panic.

use super::*;
use stdx::mix::XorShift as Rng;

fn column(name: &str, column_type: ColumnType) -> ColumnDef {
    ColumnDef {
        name: name.into(),
        column_type,
        nullable: true,
    }
}

/// a INT, b BIGINT UNSIGNED, c VARCHAR(20), d CHAR(5), e VARBINARY(8), f DOUBLE.
fn columns() -> Vec<ColumnDef> {
    vec![
        column("a", ColumnType::Int { unsigned: false }),
        column("b", ColumnType::BigInt { unsigned: true }),
        column("c", ColumnType::VarChar(20)),
        column("d", ColumnType::Char(5)),
        column("e", ColumnType::VarBinary(8)),
        column("f", ColumnType::Double),
    ]
}

fn decode(program: ProgramWriter) -> Result<Program, ErrorCode> {
    Program::decode(&program.finish().unwrap(), &columns())
}

/// Whether a row of `values` (by column; `None`: NULL) meets `program`.
fn meets(program: &Program, values: &[Option<Vec<u8>>]) -> bool {
    program
        .filter()
        .matches(|column| values[column].as_deref(), &mut 0)
}

fn int(value: i32) -> Option<Vec<u8>> {
    Some(value.to_le_bytes().to_vec())
}

fn text(value: &str) -> Option<Vec<u8>> {
    Some(value.as_bytes().to_vec())
}

fn row(a: Option<Vec<u8>>, c: Option<Vec<u8>>) -> Vec<Option<Vec<u8>>> {
    vec![
        a,
        Some(7u64.to_le_bytes().to_vec()),
        c,
        text("ab"),
        Some(vec![0, 1]),
        Some(1.5f64.to_le_bytes().to_vec()),
    ]
}

#[test]
fn no_filter_takes_every_row_and_the_projection_is_kept() {
    let program = decode(ProgramWriter::new(&[2, 0])).unwrap();
    assert!(program.filter().is_empty());
    assert_eq!(program.projection(), &[2, 0, 0, 0]);
    assert!(meets(&program, &row(None, None)));
}

#[test]
fn comparisons_order_values_as_the_indexes_do() {
    let cases: [(CompareOp, i32, [bool; 3]); 6] = [
        // Rows with a = 4, 5, 6 against the constant 5.
        (CompareOp::Equal, 5, [false, true, false]),
        (CompareOp::NotEqual, 5, [true, false, true]),
        (CompareOp::Less, 5, [true, false, false]),
        (CompareOp::LessOrEqual, 5, [true, true, false]),
        (CompareOp::Greater, 5, [false, false, true]),
        (CompareOp::GreaterOrEqual, 5, [false, true, true]),
    ];
    for (op, constant, expected) in cases {
        let mut writer = ProgramWriter::new(&[]);
        writer.compare(op, 0, Some(&constant.to_le_bytes()));
        let program = decode(writer).unwrap();
        for (a, want) in [4, 5, 6].into_iter().zip(expected) {
            assert_eq!(meets(&program, &row(int(a), None)), want, "{a} {op:?} 5");
        }
        // NULL compares to nothing, whatever the operator.
        assert!(!meets(&program, &row(None, None)), "NULL {op:?} 5");
    }
    // Text: PAD SPACE, so trailing spaces do not matter.
    let mut writer = ProgramWriter::new(&[]);
    writer.compare(CompareOp::Equal, 2, Some(b"abc  "));
    let program = decode(writer).unwrap();
    assert!(meets(&program, &row(None, text("abc"))));
    assert!(!meets(&program, &row(None, text("abcd"))));
    // A comparison with a NULL constant is never true, even <>.
    let mut writer = ProgramWriter::new(&[]);
    writer.compare(CompareOp::NotEqual, 0, None);
    assert!(!meets(&decode(writer).unwrap(), &row(int(1), None)));
}

#[test]
fn columns_compare_with_columns_across_integer_widths() {
    let mut writer = ProgramWriter::new(&[]);
    // a (INT) < b (BIGINT UNSIGNED, 7 in `row`).
    writer.compare_columns(CompareOp::Less, 0, 1);
    let program = decode(writer).unwrap();
    assert!(meets(&program, &row(int(-1), None)));
    assert!(!meets(&program, &row(int(7), None)));
    assert!(!meets(&program, &row(None, None)));
    // CHAR with VARCHAR: PAD SPACE on both.
    let mut writer = ProgramWriter::new(&[]);
    writer.compare_columns(CompareOp::Equal, 2, 3);
    let program = decode(writer).unwrap();
    assert!(meets(&program, &row(None, text("ab   "))));
    assert!(!meets(&program, &row(None, text("abc"))));
}

/// SQL's truth tables, against every combination of true, false and
/// unknown parts.
#[test]
fn logic_is_three_valued() {
    // a = 1 is true for a = 1, false for a = 2, unknown for NULL.
    let part = |truth: Option<bool>| match truth {
        Some(true) => int(1),
        Some(false) => int(2),
        None => None,
    };
    let truths = [Some(true), Some(false), None];
    for x in truths {
        for y in truths {
            // x = 1 AND y = 1 on a row of two columns, x and y.
            let values = [part(x), part(y)];
            let and_or = |or: bool, negate: bool| {
                let mut writer = ProgramWriter::new(&[]);
                if negate {
                    writer.not();
                }
                if or {
                    writer.or(2);
                } else {
                    writer.and(2);
                }
                writer.compare(CompareOp::Equal, 0, Some(&1i32.to_le_bytes()));
                writer.compare(CompareOp::Equal, 1, Some(&1i32.to_le_bytes()));
                let program = Program::decode(
                    &writer.finish().unwrap(),
                    &[
                        column("x", ColumnType::Int { unsigned: false }),
                        column("y", ColumnType::Int { unsigned: false }),
                    ],
                )
                .unwrap();
                program
                    .filter()
                    .evaluate(0, &|column| values[column].as_deref(), &mut 0)
            };
            let and = match (x, y) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
            let or = match (x, y) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            };
            assert_eq!(and_or(false, false), and, "{x:?} AND {y:?}");
            assert_eq!(and_or(true, false), or, "{x:?} OR {y:?}");
            assert_eq!(
                and_or(false, true),
                and.map(|t| !t),
                "NOT ({x:?} AND {y:?})"
            );
            assert_eq!(and_or(true, true), or.map(|t| !t), "NOT ({x:?} OR {y:?})");
        }
    }
    // Empty AND is true, empty OR false.
    for (or, want) in [(false, true), (true, false)] {
        let mut writer = ProgramWriter::new(&[]);
        if or {
            writer.or(0)
        } else {
            writer.and(0)
        }
        assert_eq!(meets(&decode(writer).unwrap(), &row(None, None)), want);
    }
}

#[test]
fn is_null_and_is_not_null() {
    let mut writer = ProgramWriter::new(&[]);
    writer.is_null(0);
    let program = decode(writer).unwrap();
    assert!(meets(&program, &row(None, None)));
    assert!(!meets(&program, &row(int(0), None)));
    let mut writer = ProgramWriter::new(&[]);
    writer.not();
    writer.is_null(0);
    let program = decode(writer).unwrap();
    assert!(!meets(&program, &row(None, None)));
    assert!(meets(&program, &row(int(0), None)));
}

/// The obvious recursive LIKE, to check the fast one against.
fn like_reference(value: &[u8], pattern: &[u8]) -> bool {
    match pattern.split_first() {
        None => value.is_empty(),
        Some((b'%', rest)) => (0..=value.len()).any(|skip| like_reference(&value[skip..], rest)),
        Some((b'_', rest)) => !value.is_empty() && like_reference(&value[1..], rest),
        Some((b'\\', rest)) if !rest.is_empty() => {
            value.first() == Some(&rest[0]) && like_reference(&value[1..], &rest[1..])
        }
        Some((&byte, rest)) => value.first() == Some(&byte) && like_reference(&value[1..], rest),
    }
}

#[test]
fn like_matches_as_the_reference_on_random_patterns() {
    let mut rng = Rng::new(2026);
    let alphabet = b"ab%_\\";
    for _ in 0..20_000 {
        let mut pick = |most: u64, from: &[u8]| -> Vec<u8> {
            let length = rng.below(most + 1) as usize;
            (0..length)
                .map(|_| from[rng.below(from.len() as u64) as usize])
                .collect()
        };
        let value = pick(6, b"ab%_");
        let pattern = pick(6, alphabet);
        assert_eq!(
            like(&value, &pattern, false, &mut 0),
            like_reference(&value, &pattern),
            "{:?} LIKE {:?}",
            String::from_utf8_lossy(&value),
            String::from_utf8_lossy(&pattern)
        );
    }
}

#[test]
fn like_takes_a_character_for_underscore_in_text() {
    let value = "añb".as_bytes();
    assert!(like(value, b"a_b", true, &mut 0));
    assert!(!like(value, b"a_b", false, &mut 0), "ñ is two bytes");
    assert!(like(value, b"a__b", false, &mut 0));
    assert!(like(b"abc", b"ab%", true, &mut 0));
    assert!(
        !like(b"abc ", b"abc", true, &mut 0),
        "trailing spaces count in LIKE"
    );
    assert!(like(b"50%", b"50\\%", true, &mut 0));
    assert!(!like(b"500", b"50\\%", true, &mut 0));
    // Through a program: NULL LIKE anything is unknown.
    let mut writer = ProgramWriter::new(&[]);
    writer.like(2, b"x%");
    let program = decode(writer).unwrap();
    assert!(meets(&program, &row(None, text("xyz"))));
    assert!(!meets(&program, &row(None, text("yz"))));
    assert!(!meets(&program, &row(None, None)));
}

#[test]
fn programs_that_do_not_fit_the_table_are_refused() {
    let refused = |build: &dyn Fn(&mut ProgramWriter), error: ErrorCode| {
        let mut writer = ProgramWriter::new(&[]);
        build(&mut writer);
        assert_eq!(decode(writer).err(), Some(error));
    };
    refused(&|w| w.is_null(6), ErrorCode::UnknownColumn);
    refused(
        &|w| w.compare(CompareOp::Equal, 9, Some(&[0; 4])),
        ErrorCode::UnknownColumn,
    );
    // An INT constant of 8 bytes, a NaN.
    refused(
        &|w| w.compare(CompareOp::Equal, 0, Some(&[0; 8])),
        ErrorCode::BadValue,
    );
    refused(
        &|w| w.compare(CompareOp::Less, 5, Some(&f64::NAN.to_le_bytes())),
        ErrorCode::BadValue,
    );
    // A number against text, LIKE on a number, DOUBLE against an INT.
    refused(
        &|w| w.compare_columns(CompareOp::Equal, 0, 2),
        ErrorCode::BadFilter,
    );
    refused(
        &|w| w.compare_columns(CompareOp::Equal, 0, 5),
        ErrorCode::BadFilter,
    );
    refused(
        &|w| w.compare_columns(CompareOp::Equal, 2, 4),
        ErrorCode::BadFilter,
    );
    refused(&|w| w.like(0, b"1%"), ErrorCode::BadFilter);
    // AND of two parts with one given.
    refused(
        &|w| {
            w.and(2);
            w.is_null(0);
        },
        ErrorCode::BadFilter,
    );
    // Two filters where one node is allowed.
    refused(
        &|w| {
            w.is_null(0);
            w.is_null(1);
        },
        ErrorCode::BadFilter,
    );
    // Too deep.
    refused(
        &|w| {
            for _ in 0..MAX_DEPTH {
                w.not();
            }
            w.is_null(0);
        },
        ErrorCode::BadFilter,
    );
    // A projection of a column the table does not have.
    assert_eq!(
        decode(ProgramWriter::new(&[0, 6])).err(),
        Some(ErrorCode::UnknownColumn)
    );
    // A pattern over the longest.
    refused(
        &|w| w.like(2, &[b'%'; MAX_PATTERN_BYTES + 1]),
        ErrorCode::BadFilter,
    );
}

/// A value too long for its length field is refused when the program is
/// finished, never written so that its bytes read as other nodes.
#[test]
fn values_too_long_to_encode_are_refused_by_the_writer() {
    let mut writer = ProgramWriter::new(&[]);
    writer.and(2);
    let mut long = vec![b'x'];
    long.resize(65_534, b' ');
    long.extend_from_slice(&[3, 7, 2, 0, 10, 0]);
    writer.compare(CompareOp::Equal, 2, Some(&long));
    writer.is_null(0);
    assert_eq!(writer.finish().err(), Some(ErrorCode::ValueTooLong));
    // Long enough for its field but not for a program.
    let mut writer = ProgramWriter::new(&[]);
    writer.compare(CompareOp::Equal, 2, Some(&vec![b'x'; MAX_PROGRAM_BYTES]));
    assert_eq!(writer.finish().err(), Some(ErrorCode::BadFilter));
    let too_long = vec![0u8; MAX_PROGRAM_BYTES + 1];
    assert_eq!(
        Program::decode(&too_long, &columns()).err(),
        Some(ErrorCode::BadFilter)
    );
}

/// LIKE on CHAR ignores the value's trailing spaces (MySQL reads CHAR
/// values without them); on VARCHAR they count.
#[test]
fn like_on_char_ignores_trailing_spaces() {
    let columns = [
        column("c", ColumnType::Char(5)),
        column("v", ColumnType::VarChar(5)),
    ];
    for (column, want) in [(0u16, true), (1, false)] {
        let mut writer = ProgramWriter::new(&[]);
        writer.like(column, b"ab");
        let program = Program::decode(&writer.finish().unwrap(), &columns).unwrap();
        let values = [Some(b"ab ".to_vec()), Some(b"ab ".to_vec())];
        assert_eq!(meets(&program, &values), want, "column {column}");
    }
}

/// Work is counted: a LIKE that backtracks over a long value costs more
/// than a comparison.
#[test]
fn evaluation_counts_its_work() {
    let mut writer = ProgramWriter::new(&[]);
    writer.compare(CompareOp::Equal, 0, Some(&1i32.to_le_bytes()));
    let cheap = decode(writer).unwrap();
    let mut writer = ProgramWriter::new(&[]);
    writer.like(2, b"%a%a%a%b");
    let dear = decode(writer).unwrap();
    let row = row(int(1), text("aaaaaaaaaaaaaaaaaaaa"));
    let (mut cheap_work, mut dear_work) = (0, 0);
    cheap
        .filter()
        .matches(|c| row[c].as_deref(), &mut cheap_work);
    dear.filter().matches(|c| row[c].as_deref(), &mut dear_work);
    assert_eq!(cheap_work, 1);
    assert!(dear_work > 20, "{dear_work}");
}

#[test]
fn a_cut_or_garbled_program_is_refused_never_a_panic() {
    let mut writer = ProgramWriter::new(&[1]);
    writer.and(3);
    writer.compare(CompareOp::Greater, 0, Some(&5i32.to_le_bytes()));
    writer.like(2, b"a%");
    writer.not();
    writer.compare_columns(CompareOp::LessOrEqual, 0, 1);
    let bytes = writer.finish().unwrap();
    assert!(Program::decode(&bytes, &columns()).is_ok());
    for cut in 0..bytes.len() {
        // The projection alone (cut 4) is a program without a filter.
        if cut == 4 {
            continue;
        }
        assert!(
            Program::decode(&bytes[..cut], &columns()).is_err(),
            "cut at {cut}"
        );
    }
    let mut rng = Rng::new(7);
    for _ in 0..20_000 {
        let mut garbled = bytes.clone();
        let at = rng.below(garbled.len() as u64) as usize;
        garbled[at] = rng.below(256) as u8;
        if let Ok(program) = Program::decode(&garbled, &columns()) {
            // Whatever decodes evaluates without a panic.
            meets(&program, &row(int(3), text("abc")));
        }
    }
}
