//! SQL column types and how each is kept in the cluster
//! (docs/design/0028-sql-types.md).
//!
//! The cluster stores a few kinds of column (32- and 64-bit integers,
//! doubles, CHAR, VARCHAR, VARBINARY) and orders each in its indexes.
//! Every SQL type is stored as one of them in a form that orders as the
//! SQL values do, so the data nodes' indexes, range scans and pushed
//! filters need to know nothing of SQL:
//!
//! | SQL | stored as |
//! |---|---|
//! | TINYINT, SMALLINT, MEDIUMINT, INT, YEAR | INT (range checked here) |
//! | BIGINT | BIGINT |
//! | FLOAT, DOUBLE | DOUBLE (FLOAT rounded to single precision) |
//! | DECIMAL(p,s), p <= 18 | BIGINT: the value times 10^s |
//! | DECIMAL(p,s), p > 18 | VARBINARY(16): 128 bits big-endian, sign bit flipped |
//! | DATE | INT: year * 512 + month * 32 + day |
//! | DATETIME(fsp) | BIGINT: MySQL's DATETIME2 bit fields |
//! | TIMESTAMP(fsp) | BIGINT: microseconds since 1970 UTC |
//! | TIME(fsp) | BIGINT: signed microseconds |
//! | CHAR, VARCHAR, TEXT | CHAR, VARCHAR |
//! | BINARY, VARBINARY, BLOB | VARBINARY |
//! | ENUM | INT UNSIGNED: the member's number (ENUM orders by it) |
//! | JSON | VARCHAR: the document's normalized text |
//!
//! Turning a SQL value into its stored form and back is `store` and
//! `load`; choosing the type from a declaration is `of_data_type`.

use crate::decimal::Decimal;
use crate::error::{SqlError, SqlResult};
use crate::temporal::{Date, DateTime, Time, MICROS_PER_SECOND};
use crate::value::Value;
use client::ColumnType;
use sqlparser::ast;
use std::sync::Arc;

/// The widest DECIMAL stored as a BIGINT.
const DECIMAL_IN_BIGINT: u8 = 18;

/// A SQL column type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqlType {
    /// TINYINT (1 byte), SMALLINT (2), MEDIUMINT (3), INT (4), BIGINT (8).
    Integer {
        /// Its width in bytes.
        bytes: u8,
        /// UNSIGNED.
        unsigned: bool,
    },
    /// FLOAT: single precision.
    Float,
    /// DOUBLE.
    Double,
    /// DECIMAL(precision, scale).
    Decimal {
        /// Digits in all.
        precision: u8,
        /// Digits after the point.
        scale: u8,
    },
    /// DATE.
    Date,
    /// DATETIME(fsp).
    DateTime {
        /// Fractional digits of a second.
        fsp: u8,
    },
    /// TIMESTAMP(fsp): a moment, shown in the session's time zone.
    Timestamp {
        /// Fractional digits of a second.
        fsp: u8,
    },
    /// TIME(fsp).
    Time {
        /// Fractional digits of a second.
        fsp: u8,
    },
    /// YEAR: 1901 to 2155, or 0.
    Year,
    /// CHAR(n): up to n bytes, without trailing spaces (fixed room in
    /// the row: n counts bytes, not characters; design 0028).
    Char(u16),
    /// VARCHAR(n): up to n characters.
    VarChar(u16),
    /// TINYTEXT, TEXT, MEDIUMTEXT, LONGTEXT: text up to n bytes, the
    /// bytes the table's row leaves it (MySQL counts a TEXT in bytes).
    Text(u16),
    /// BINARY(n) (kept without MySQL's zero padding) and VARBINARY(n).
    VarBinary(u16),
    /// TINYBLOB, BLOB, MEDIUMBLOB, LONGBLOB.
    Blob(u16),
    /// ENUM('a', 'b', ...).
    Enum(Arc<[String]>),
    /// JSON: the normalized text of a document, up to n bytes (the room
    /// the row leaves it, as TEXT's; docs/design/0041-json.md).
    Json(u16),
}

impl SqlType {
    /// The cluster's column type it is stored as.
    pub fn storage(&self) -> ColumnType {
        match self {
            SqlType::Integer { bytes: 8, unsigned } => ColumnType::BigInt {
                unsigned: *unsigned,
            },
            SqlType::Integer { unsigned, .. } => ColumnType::Int {
                unsigned: *unsigned,
            },
            SqlType::Float | SqlType::Double => ColumnType::Double,
            SqlType::Decimal { precision, .. } if *precision <= DECIMAL_IN_BIGINT => {
                ColumnType::BigInt { unsigned: false }
            }
            SqlType::Decimal { .. } => ColumnType::VarBinary(16),
            SqlType::Date | SqlType::Year => ColumnType::Int { unsigned: false },
            SqlType::DateTime { .. } | SqlType::Timestamp { .. } | SqlType::Time { .. } => {
                ColumnType::BigInt { unsigned: false }
            }
            SqlType::Char(n) => ColumnType::Char(*n),
            // Room for n characters of utf8mb4 (docs/design/0028-sql-types.md).
            SqlType::VarChar(n) => ColumnType::VarChar(n * BYTES_PER_CHARACTER),
            SqlType::Text(n) | SqlType::Json(n) => ColumnType::VarChar(*n),
            SqlType::VarBinary(n) | SqlType::Blob(n) => ColumnType::VarBinary(*n),
            SqlType::Enum(_) => ColumnType::Int { unsigned: true },
        }
    }

    /// The type a cluster column reads as when SQL declared nothing.
    pub fn of_storage(column_type: ColumnType) -> SqlType {
        match column_type {
            ColumnType::Int { unsigned } => SqlType::Integer { bytes: 4, unsigned },
            ColumnType::BigInt { unsigned } => SqlType::Integer { bytes: 8, unsigned },
            ColumnType::Double => SqlType::Double,
            ColumnType::Char(n) => SqlType::Char(n),
            ColumnType::VarChar(n) => SqlType::VarChar(n),
            ColumnType::VarBinary(n) => SqlType::VarBinary(n),
        }
    }

    /// The values an integer type narrower than its storage allows.
    pub fn integer_range(&self) -> Option<(i128, i128)> {
        match self {
            SqlType::Integer { bytes, unsigned } => {
                let bits = *bytes as u32 * 8;
                Some(match unsigned {
                    true => (0, (1i128 << bits) - 1),
                    false => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
                })
            }
            _ => None,
        }
    }

    /// Whether its values are integers.
    pub fn is_integer(&self) -> bool {
        matches!(self, SqlType::Integer { .. })
    }

    /// Whether its stored values order as its SQL values do against
    /// constants (ENUM's member numbers do not order as the text it is
    /// compared as; equality holds).
    pub fn orders_as_stored(&self) -> bool {
        !matches!(self, SqlType::Enum(_))
    }

    /// Whether its values are text compared PAD SPACE.
    pub fn is_text(&self) -> bool {
        matches!(
            self,
            SqlType::Char(_) | SqlType::VarChar(_) | SqlType::Text(_)
        )
    }

    /// Whether two columns' stored values compare as their SQL values
    /// do against each other (a column-to-column filter the data nodes
    /// may evaluate).
    pub fn stored_alike(&self, other: &SqlType) -> bool {
        match (self, other) {
            (a, b) if a.is_integer() && b.is_integer() => true,
            (a, b) if a.is_text() && b.is_text() => true,
            (SqlType::Decimal { scale: a, .. }, SqlType::Decimal { scale: b, .. }) => {
                a == b && self.storage() == other.storage()
            }
            (SqlType::DateTime { .. }, SqlType::DateTime { .. })
            | (SqlType::Timestamp { .. }, SqlType::Timestamp { .. })
            | (SqlType::Time { .. }, SqlType::Time { .. }) => true,
            (SqlType::Enum(_), _) | (_, SqlType::Enum(_)) => false,
            (a, b) => a == b,
        }
    }

    /// The type as SHOW CREATE TABLE and DESCRIBE print it.
    pub fn declared(&self) -> String {
        let sign = |unsigned: bool| if unsigned { " unsigned" } else { "" };
        let fraction = |name: &str, fsp: u8| match fsp {
            0 => name.to_string(),
            fsp => format!("{name}({fsp})"),
        };
        match self {
            SqlType::Integer { bytes, unsigned } => {
                let name = match bytes {
                    1 => "tinyint",
                    2 => "smallint",
                    3 => "mediumint",
                    4 => "int",
                    _ => "bigint",
                };
                format!("{name}{}", sign(*unsigned))
            }
            SqlType::Float => "float".into(),
            SqlType::Double => "double".into(),
            SqlType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            SqlType::Date => "date".into(),
            SqlType::DateTime { fsp } => fraction("datetime", *fsp),
            SqlType::Timestamp { fsp } => fraction("timestamp", *fsp),
            SqlType::Time { fsp } => fraction("time", *fsp),
            SqlType::Year => "year".into(),
            SqlType::Char(n) => format!("char({n})"),
            SqlType::VarChar(n) => format!("varchar({n})"),
            SqlType::Text(n) => text_name("text", *n),
            SqlType::VarBinary(n) => format!("varbinary({n})"),
            SqlType::Blob(n) => text_name("blob", *n),
            SqlType::Json(_) => "json".into(),
            SqlType::Enum(members) => {
                let quoted: Vec<String> = members
                    .iter()
                    .map(|m| format!("'{}'", m.replace('\'', "''")))
                    .collect();
                format!("enum({})", quoted.join(","))
            }
        }
    }
}

/// TINYTEXT for 255 bytes or fewer, else TEXT (the kinds differ in
/// MySQL only by their limit; the row decides ours).
fn text_name(kind: &str, bytes: u16) -> String {
    match bytes <= 255 {
        true => format!("tiny{kind}"),
        false => kind.to_string(),
    }
}

/// A length clause's value, within `1..=most`.
fn bounded(n: u64, most: u16, what: &str) -> SqlResult<u16> {
    u16::try_from(n)
        .ok()
        .filter(|n| *n >= 1 && *n <= most)
        .ok_or_else(|| {
            SqlError::new(
                1074,
                format!(
                    "Column length too big for {what}({n}) (max = {most}); use a shorter length"
                ),
            )
        })
}

/// A fractional seconds precision, 0 to 6 (error 1426 beyond).
fn fsp(precision: Option<u64>, what: &str) -> SqlResult<u8> {
    match precision {
        None => Ok(0),
        Some(n) if n <= 6 => Ok(n as u8),
        Some(n) => Err(SqlError::new(
            1426,
            format!("Too-big precision {n} specified for '{what}'. Maximum is 6."),
        )),
    }
}

/// The most bytes a character takes: text is utf8mb4, so a VARCHAR(n),
/// which counts characters, is stored in room for 4n bytes.
pub const BYTES_PER_CHARACTER: u16 = 4;

/// The bytes a TEXT or BLOB column may hold before the row's room is
/// shared out (`ddl` gives each what the row leaves it).
pub const UNSIZED: u16 = 0;

/// The SQL type of a declared data type. TEXT and BLOB come back with
/// length [`UNSIZED`]: their room depends on the rest of the row.
pub fn of_data_type(data_type: &ast::DataType) -> SqlResult<SqlType> {
    use ast::DataType as D;
    let int = |bytes, unsigned| SqlType::Integer { bytes, unsigned };
    let length = |length: &Option<ast::CharacterLength>, default: u64| match length {
        None => Ok(default),
        Some(ast::CharacterLength::IntegerLength { length, .. }) => Ok(*length),
        Some(ast::CharacterLength::Max) => Err(SqlError::unsupported("length MAX")),
    };
    Ok(match data_type {
        D::TinyInt(_) | D::Bool | D::Boolean => int(1, false),
        D::TinyIntUnsigned(_) => int(1, true),
        D::SmallInt(_) => int(2, false),
        D::SmallIntUnsigned(_) => int(2, true),
        D::MediumInt(_) => int(3, false),
        D::MediumIntUnsigned(_) => int(3, true),
        D::Int(_) | D::Integer(_) => int(4, false),
        D::IntUnsigned(_) | D::IntegerUnsigned(_) | D::Unsigned | D::UnsignedInteger => {
            int(4, true)
        }
        D::BigInt(_) => int(8, false),
        D::BigIntUnsigned(_) => int(8, true),
        D::Float(info) => match info {
            // FLOAT(p) with p above 24 is a DOUBLE in MySQL.
            ast::ExactNumberInfo::Precision(p) if *p > 24 => SqlType::Double,
            _ => SqlType::Float,
        },
        D::Real | D::Float4 => SqlType::Float,
        D::Double(_) | D::DoublePrecision | D::Float8 => SqlType::Double,
        D::Decimal(info) | D::Numeric(info) | D::Dec(info) => {
            let (precision, scale) = match info {
                ast::ExactNumberInfo::None => (10, 0),
                ast::ExactNumberInfo::Precision(p) => (*p, 0),
                ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p, (*s).max(0) as u64),
            };
            if precision == 0 || precision > crate::decimal::MAX_PRECISION as u64 {
                return Err(SqlError::new(
                    1426,
                    format!(
                        "Too-big precision {precision} specified for 'DECIMAL'. Maximum is {} (Tessera's limit; MySQL's is 65).",
                        crate::decimal::MAX_PRECISION
                    ),
                ));
            }
            if scale > crate::decimal::MAX_SCALE as u64 {
                return Err(SqlError::new(
                    1425,
                    format!("Too big scale {scale} specified. Maximum is 30."),
                ));
            }
            if scale > precision {
                return Err(SqlError::new(
                    1427,
                    "For float(M,D), double(M,D) or decimal(M,D), M must be >= D",
                ));
            }
            SqlType::Decimal {
                precision: precision as u8,
                scale: scale as u8,
            }
        }
        D::Date => SqlType::Date,
        D::Datetime(precision) => SqlType::DateTime {
            fsp: fsp(*precision, "datetime")?,
        },
        D::Timestamp(precision, _) => SqlType::Timestamp {
            fsp: fsp(*precision, "timestamp")?,
        },
        D::Time(precision, _) => SqlType::Time {
            fsp: fsp(*precision, "time")?,
        },
        D::Custom(name, _) if name.to_string().eq_ignore_ascii_case("YEAR") => SqlType::Year,
        D::Char(n) | D::Character(n) => SqlType::Char(bounded(length(n, 1)?, 255, "char")?),
        D::Varchar(n) | D::CharacterVarying(n) | D::CharVarying(n) | D::Nvarchar(n) => {
            let Some(n) = n else {
                return Err(SqlError::parse("VARCHAR needs a length"));
            };
            SqlType::VarChar(bounded(
                length(&Some(*n), 0)?,
                client::MAX_VAR_BYTES / BYTES_PER_CHARACTER,
                "varchar",
            )?)
        }
        D::Binary(n) => SqlType::VarBinary(bounded(n.unwrap_or(1), 255, "binary")?),
        D::Varbinary(n) => {
            let n = match n {
                Some(ast::BinaryLength::IntegerLength { length }) => *length,
                _ => return Err(SqlError::parse("VARBINARY needs a length")),
            };
            SqlType::VarBinary(bounded(n, client::MAX_VAR_BYTES, "varbinary")?)
        }
        D::TinyText => SqlType::Text(255),
        D::Text | D::MediumText | D::LongText => SqlType::Text(UNSIZED),
        D::JSON => SqlType::Json(UNSIZED),
        D::TinyBlob => SqlType::Blob(255),
        D::Blob(_) | D::MediumBlob | D::LongBlob => SqlType::Blob(UNSIZED),
        D::Enum(members, _) => {
            let names: Vec<String> = members
                .iter()
                .map(|member| match member {
                    ast::EnumMember::Name(name) => Ok(name.clone()),
                    ast::EnumMember::NamedValue(..) => {
                        Err(SqlError::parse("ENUM members are strings"))
                    }
                })
                .collect::<SqlResult<_>>()?;
            if names.is_empty() || names.len() > 65_535 {
                return Err(SqlError::new(1097, "An ENUM has 1 to 65535 members"));
            }
            for (index, name) in names.iter().enumerate() {
                if names[..index].contains(name) {
                    return Err(SqlError::new(
                        1291,
                        format!("Column has duplicated value '{name}' in ENUM"),
                    ));
                }
            }
            SqlType::Enum(names.into())
        }
        other => return Err(SqlError::unsupported(format!("column type {other}"))),
    })
}

/// The SQL type a stored declaration names (`decimal(12,2)`), with the
/// cluster column's type supplying TEXT's and BLOB's room; `None` when
/// the text does not parse or does not match the cluster column (a
/// declaration from another version is then ignored, the column read as
/// its cluster type).
pub fn of_declaration(declared: &str, storage: ColumnType) -> Option<SqlType> {
    let sql = format!("CREATE TABLE t (c {declared})");
    let statements =
        sqlparser::parser::Parser::parse_sql(&crate::dialect::TesseraDialect::new(), &sql).ok()?;
    let ast::Statement::CreateTable(create) = statements.first()? else {
        return None;
    };
    let sql_type = of_data_type(&create.columns.first()?.data_type).ok()?;
    let sql_type = match (sql_type, storage) {
        (SqlType::Text(_), ColumnType::VarChar(n)) => SqlType::Text(n),
        (SqlType::Json(_), ColumnType::VarChar(n)) => SqlType::Json(n),
        (SqlType::Blob(_), ColumnType::VarBinary(n)) => SqlType::Blob(n),
        (sql_type, _) => sql_type,
    };
    (sql_type.storage() == storage).then_some(sql_type)
}

/// A stored key value of `sql_type` as the cluster compares it in a key
/// (`signal::attr::canonical`): text without trailing spaces (PAD SPACE;
/// VARBINARY's count), a DOUBLE's -0 as +0, every other value as it is.
pub fn canonical_key_value(value: client::Value, sql_type: &SqlType) -> client::Value {
    match value {
        client::Value::Bytes(mut bytes) if sql_type.is_text() => {
            let end = bytes.iter().rposition(|b| *b != b' ').map_or(0, |i| i + 1);
            bytes.truncate(end);
            client::Value::Bytes(bytes)
        }
        // A float pattern compares with ==, so it takes -0 as well.
        client::Value::Double(0.0) => client::Value::Double(0.0),
        other => other,
    }
}

/// `value`, already fitted to `sql_type` (`value::fit`), in its stored
/// form; `zone` is the session's offset from UTC in seconds, for
/// TIMESTAMP.
pub fn store(value: &Value, sql_type: &SqlType, zone: i64) -> client::Value {
    match (value, sql_type) {
        (Value::Null, _) => client::Value::Null,
        (Value::Decimal(decimal), SqlType::Decimal { precision, .. }) => {
            let (mantissa, _) = decimal.parts();
            match *precision <= DECIMAL_IN_BIGINT {
                true => client::Value::Int(mantissa as i64),
                false => {
                    let flipped = (mantissa as u128) ^ (1u128 << 127);
                    client::Value::Bytes(flipped.to_be_bytes().to_vec())
                }
            }
        }
        (Value::Date(date), SqlType::Date) => client::Value::Int(date.pack()),
        (Value::DateTime(datetime), SqlType::DateTime { .. }) => {
            client::Value::Int(datetime.pack())
        }
        (Value::DateTime(datetime), SqlType::Timestamp { .. }) => {
            client::Value::Int(datetime.epoch_micros() - zone * MICROS_PER_SECOND)
        }
        (Value::Time(time), SqlType::Time { .. }) => client::Value::Int(time.micros),
        (Value::Bytes(name), SqlType::Enum(members)) => {
            let index = members
                .iter()
                .position(|m| m.as_bytes() == name.as_slice())
                .map_or(0, |i| i as u64 + 1);
            client::Value::UInt(index)
        }
        (Value::Int(x), _) => client::Value::Int(*x),
        (Value::UInt(x), _) => client::Value::UInt(*x),
        (Value::Double(x), _) => client::Value::Double(*x),
        (Value::Bytes(bytes), _) => client::Value::Bytes(bytes.clone()),
        (other, _) => {
            // `fit` gives every type its own kind of value; another here is
            // a bug in the caller, not input.
            panic!("a {other:?} was not fitted to {sql_type:?} before it was stored")
        }
    }
}

/// A stored value as the SQL value of `sql_type`. A stored value that
/// does not decode (a row the native API wrote, say) comes back as it
/// is rather than failing the statement.
pub fn load(value: client::Value, sql_type: &SqlType, zone: i64) -> Value {
    use client::Value as Stored;
    match (value, sql_type) {
        (Stored::Null, _) => Value::Null,
        (Stored::Int(x), SqlType::Decimal { scale, .. }) => {
            Decimal::new(x as i128, *scale).map_or(Value::Int(x), Value::Decimal)
        }
        (Stored::Bytes(bytes), SqlType::Decimal { scale, .. }) if bytes.len() == 16 => {
            let mut raw = [0u8; 16];
            raw.copy_from_slice(&bytes);
            let mantissa = (u128::from_be_bytes(raw) ^ (1u128 << 127)) as i128;
            Decimal::new(mantissa, *scale).map_or(Value::Bytes(bytes), Value::Decimal)
        }
        (Stored::Double(x), SqlType::Float) => Value::Double(single_precision(x)),
        (Stored::Int(x), SqlType::Date) => Date::unpack(x).map_or(Value::Int(x), Value::Date),
        (Stored::Int(x), SqlType::DateTime { fsp }) => {
            DateTime::unpack(x, *fsp).map_or(Value::Int(x), Value::DateTime)
        }
        (Stored::Int(x), SqlType::Timestamp { fsp }) => {
            DateTime::from_epoch_micros(x + zone * MICROS_PER_SECOND, *fsp)
                .map_or(Value::Int(x), Value::DateTime)
        }
        (Stored::Int(x), SqlType::Time { fsp }) => {
            Time::new(x, *fsp).map_or(Value::Int(x), Value::Time)
        }
        (Stored::UInt(index), SqlType::Enum(members)) => match index {
            0 => Value::Bytes(Vec::new()),
            index => members
                .get(index as usize - 1)
                .map_or(Value::UInt(index), |m| Value::Bytes(m.as_bytes().to_vec())),
        },
        (Stored::Int(x), _) => Value::Int(x),
        (Stored::UInt(x), _) => Value::UInt(x),
        (Stored::Double(x), _) => Value::Double(x),
        (Stored::Bytes(bytes), _) => Value::Bytes(bytes),
    }
}

/// A double rounded to single precision, as the nearest double to the
/// shortest text that reads back as the same single (what MySQL shows
/// for a FLOAT: 1.1, not 1.100000023841858).
pub fn single_precision(x: f64) -> f64 {
    let single = x as f32;
    if !single.is_finite() {
        return single as f64;
    }
    format!("{single}").parse().unwrap_or(single as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_values_are_canonical_as_the_cluster_compares_them() {
        let bytes = |text: &[u8]| client::Value::Bytes(text.to_vec());
        let key = canonical_key_value;
        assert_eq!(key(bytes(b"a  "), &SqlType::VarChar(8)), bytes(b"a"));
        assert_eq!(key(bytes(b"a  "), &SqlType::VarBinary(8)), bytes(b"a  "));
        let zero = key(client::Value::Double(-0.0), &SqlType::Double);
        assert!(
            matches!(zero, client::Value::Double(x) if x.to_bits() == 0),
            "{zero:?}"
        );
        let other = key(client::Value::Double(-1.5), &SqlType::Double);
        assert!(
            matches!(other, client::Value::Double(x) if x == -1.5),
            "{other:?}"
        );
    }

    #[test]
    fn declarations_round_trip() {
        for declared in [
            "tinyint",
            "smallint unsigned",
            "mediumint",
            "int",
            "bigint unsigned",
            "float",
            "double",
            "decimal(12,2)",
            "decimal(30,5)",
            "date",
            "datetime",
            "datetime(6)",
            "timestamp(3)",
            "time",
            "year",
            "char(20)",
            "varchar(100)",
            "varbinary(8)",
            "enum('a','b''c')",
        ] {
            let sql_type = of_declaration(declared, ColumnType::Int { unsigned: false })
                .or_else(|| {
                    let guess = of_declaration_any(declared);
                    of_declaration(declared, guess.storage())
                })
                .unwrap_or_else(|| panic!("{declared} parses"));
            assert_eq!(sql_type.declared(), declared);
        }
        assert_eq!(
            of_declaration("text", ColumnType::VarChar(9000)),
            Some(SqlType::Text(9000))
        );
        assert_eq!(
            of_declaration("json", ColumnType::VarChar(9000)),
            Some(SqlType::Json(9000))
        );
        assert_eq!(of_declaration("text", ColumnType::Double), None);
        assert_eq!(of_declaration("no such type(", ColumnType::Double), None);
    }

    fn of_declaration_any(declared: &str) -> SqlType {
        let sql = format!("CREATE TABLE t (c {declared})");
        let statements =
            sqlparser::parser::Parser::parse_sql(&crate::dialect::TesseraDialect::new(), &sql)
                .unwrap();
        let ast::Statement::CreateTable(create) = &statements[0] else {
            unreachable!()
        };
        of_data_type(&create.columns[0].data_type).unwrap()
    }

    #[test]
    fn large_decimals_store_in_order() {
        let sql_type = SqlType::Decimal {
            precision: 30,
            scale: 2,
        };
        let stored: Vec<Vec<u8>> = ["-99999.99", "-1", "0", "0.01", "12345678901234567890.5"]
            .iter()
            .map(|text| {
                let decimal = Decimal::parse(text).unwrap().rescale(2).unwrap();
                match store(&Value::Decimal(decimal), &sql_type, 0) {
                    client::Value::Bytes(bytes) => bytes,
                    other => panic!("{other:?}"),
                }
            })
            .collect();
        assert!(stored.windows(2).all(|w| w[0] < w[1]));
        let back = load(client::Value::Bytes(stored[0].clone()), &sql_type, 0);
        assert_eq!(crate::value::display(&back), "-99999.99");
    }

    #[test]
    fn timestamps_store_in_utc() {
        let sql_type = SqlType::Timestamp { fsp: 0 };
        let local = DateTime::parse("2024-01-01 02:00:00").unwrap();
        let stored = store(&Value::DateTime(local), &sql_type, 2 * 3600);
        let utc = load(stored.clone(), &sql_type, 0);
        assert_eq!(crate::value::display(&utc), "2024-01-01 00:00:00");
        let back = load(stored, &sql_type, 2 * 3600);
        assert_eq!(crate::value::display(&back), "2024-01-01 02:00:00");
    }

    #[test]
    fn floats_read_back_as_mysql_shows_them() {
        assert_eq!(single_precision(1.1), 1.1);
        assert_eq!(single_precision(1.0 / 3.0), 0.33333334);
    }
}
