//! PackStream, the binary format of every Bolt message: a marker byte says a
//! value's type and, for small values, its size or the value itself; larger
//! sizes and numbers follow big-endian. Written from the PackStream
//! specification (neo4j.com/docs/bolt/current/packstream/).
//!
//! Encoding writes straight into the connection's output buffer (no
//! intermediate [`Value`] for a message being sent); decoding reads a whole
//! message, already taken out of its chunks, into owned [`Value`]s.

use std::fmt;

/// One PackStream value, as decoded from a message.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed 64-bit integer (every width on the wire).
    Int(i64),
    /// A 64-bit float.
    Float(f64),
    /// A byte array.
    Bytes(Vec<u8>),
    /// A UTF-8 string.
    String(String),
    /// A list of values.
    List(Vec<Value>),
    /// A map with string keys, in wire order (small maps: a Vec is cheaper than a hash map).
    Map(Vec<(String, Value)>),
    /// A structure: a tag byte and up to 15 fields (a message, a node, a date…).
    Struct(u8, Vec<Value>),
}

impl Value {
    /// The entry `key` of a map; `None` for a missing key or a value that is no map.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// A short name of the value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Int(_) => "integer",
            Value::Float(_) => "float",
            Value::Bytes(_) => "bytes",
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Map(_) => "map",
            Value::Struct(..) => "structure",
        }
    }
}

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PackStream: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

// Markers (PackStream specification, "Summary of markers").
const NULL: u8 = 0xC0;
const FLOAT_64: u8 = 0xC1;
const FALSE: u8 = 0xC2;
const TRUE: u8 = 0xC3;
const INT_8: u8 = 0xC8;
const INT_16: u8 = 0xC9;
const INT_32: u8 = 0xCA;
const INT_64: u8 = 0xCB;
const BYTES_8: u8 = 0xCC;
const BYTES_16: u8 = 0xCD;
const BYTES_32: u8 = 0xCE;
const STRING_8: u8 = 0xD0;
const STRING_16: u8 = 0xD1;
const STRING_32: u8 = 0xD2;
const LIST_8: u8 = 0xD4;
const LIST_16: u8 = 0xD5;
const LIST_32: u8 = 0xD6;
const MAP_8: u8 = 0xD8;
const MAP_16: u8 = 0xD9;
const MAP_32: u8 = 0xDA;
const TINY_STRING: u8 = 0x80;
const TINY_LIST: u8 = 0x90;
const TINY_MAP: u8 = 0xA0;
const TINY_STRUCT: u8 = 0xB0;

/// Nesting deeper than this is refused rather than followed (a malicious or
/// broken peer must not overflow the stack).
const MAX_DEPTH: usize = 64;

/// Writes the header of a sized value: a tiny marker (`tiny | size`) when
/// the size fits in four bits, else the 8-, 16- or 32-bit marker and size.
fn write_size(out: &mut Vec<u8>, size: usize, tiny: Option<u8>, markers: [u8; 3]) {
    match (size, tiny) {
        (0..=15, Some(tiny)) => out.push(tiny | size as u8),
        (0..=0xFF, _) => out.extend_from_slice(&[markers[0], size as u8]),
        (0x100..=0xFFFF, _) => {
            out.push(markers[1]);
            out.extend_from_slice(&(size as u16).to_be_bytes());
        }
        _ => {
            out.push(markers[2]);
            out.extend_from_slice(&(size as u32).to_be_bytes());
        }
    }
}

/// Writes an integer in the smallest encoding that holds it.
pub fn write_int(out: &mut Vec<u8>, value: i64) {
    match value {
        -16..=127 => out.push(value as u8),
        -128..=-17 => out.extend_from_slice(&[INT_8, value as u8]),
        -32_768..=32_767 => {
            out.push(INT_16);
            out.extend_from_slice(&(value as i16).to_be_bytes());
        }
        -2_147_483_648..=2_147_483_647 => {
            out.push(INT_32);
            out.extend_from_slice(&(value as i32).to_be_bytes());
        }
        _ => {
            out.push(INT_64);
            out.extend_from_slice(&value.to_be_bytes());
        }
    }
}

/// Writes a string.
pub fn write_string(out: &mut Vec<u8>, value: &str) {
    write_size(out, value.len(), Some(TINY_STRING), [STRING_8, STRING_16, STRING_32]);
    out.extend_from_slice(value.as_bytes());
}

/// Writes the header of a map of `entries` entries; the caller writes each key and value.
pub fn write_map_header(out: &mut Vec<u8>, entries: usize) {
    write_size(out, entries, Some(TINY_MAP), [MAP_8, MAP_16, MAP_32]);
}

/// Writes the header of a list of `items` items; the caller writes each.
pub fn write_list_header(out: &mut Vec<u8>, items: usize) {
    write_size(out, items, Some(TINY_LIST), [LIST_8, LIST_16, LIST_32]);
}

/// Writes the header of a structure of `fields` fields (at most 15) with `tag`.
pub fn write_struct_header(out: &mut Vec<u8>, tag: u8, fields: usize) {
    debug_assert!(fields <= 15, "a structure has at most 15 fields");
    out.extend_from_slice(&[TINY_STRUCT | fields as u8, tag]);
}

/// Writes any value.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.push(NULL),
        Value::Bool(false) => out.push(FALSE),
        Value::Bool(true) => out.push(TRUE),
        Value::Int(i) => write_int(out, *i),
        Value::Float(f) => {
            out.push(FLOAT_64);
            out.extend_from_slice(&f.to_be_bytes());
        }
        Value::Bytes(b) => {
            // Byte arrays have no tiny form.
            write_size(out, b.len(), None, [BYTES_8, BYTES_16, BYTES_32]);
            out.extend_from_slice(b);
        }
        Value::String(s) => write_string(out, s),
        Value::List(items) => {
            write_list_header(out, items.len());
            items.iter().for_each(|item| write_value(out, item));
        }
        Value::Map(entries) => {
            write_map_header(out, entries.len());
            for (key, value) in entries {
                write_string(out, key);
                write_value(out, value);
            }
        }
        Value::Struct(tag, fields) => {
            write_struct_header(out, *tag, fields.len());
            fields.iter().for_each(|field| write_value(out, field));
        }
    }
}

/// Reads values from one message's bytes.
pub struct Decoder<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Decoder<'a> {
        Decoder { bytes, at: 0 }
    }

    /// Whether every byte has been read.
    #[cfg(test)]
    pub fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.bytes.len()).ok_or_else(|| {
            DecodeError(format!("{n} bytes wanted at offset {}, the message ends first", self.at))
        })?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        Ok(self.take(N)?.try_into().expect("take returns N bytes"))
    }

    fn size(&mut self, width: usize) -> Result<usize, DecodeError> {
        Ok(match width {
            1 => self.array::<1>()?[0] as usize,
            2 => u16::from_be_bytes(self.array()?) as usize,
            _ => u32::from_be_bytes(self.array()?) as usize,
        })
    }

    /// The header of a structure: its tag and number of fields.
    pub fn struct_header(&mut self) -> Result<(u8, usize), DecodeError> {
        let marker = self.array::<1>()?[0];
        if marker & 0xF0 != TINY_STRUCT {
            return Err(DecodeError(format!("expected a structure, found marker {marker:#04x}")));
        }
        Ok((self.array::<1>()?[0], (marker & 0x0F) as usize))
    }

    /// The next value.
    pub fn value(&mut self) -> Result<Value, DecodeError> {
        self.value_at(0)
    }

    fn value_at(&mut self, depth: usize) -> Result<Value, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError(format!("values nested deeper than {MAX_DEPTH}")));
        }
        let marker = self.array::<1>()?[0];
        let (kind, size) = match marker {
            0x00..=0x7F | 0xF0..=0xFF => return Ok(Value::Int(marker as i8 as i64)),
            NULL => return Ok(Value::Null),
            FALSE => return Ok(Value::Bool(false)),
            TRUE => return Ok(Value::Bool(true)),
            FLOAT_64 => return Ok(Value::Float(f64::from_be_bytes(self.array()?))),
            INT_8 => return Ok(Value::Int(i8::from_be_bytes(self.array()?) as i64)),
            INT_16 => return Ok(Value::Int(i16::from_be_bytes(self.array()?) as i64)),
            INT_32 => return Ok(Value::Int(i32::from_be_bytes(self.array()?) as i64)),
            INT_64 => return Ok(Value::Int(i64::from_be_bytes(self.array()?))),
            0x80..=0x8F => (TINY_STRING, (marker & 0x0F) as usize),
            0x90..=0x9F => (TINY_LIST, (marker & 0x0F) as usize),
            0xA0..=0xAF => (TINY_MAP, (marker & 0x0F) as usize),
            0xB0..=0xBF => {
                let tag = self.array::<1>()?[0];
                let fields =
                    (0..marker & 0x0F).map(|_| self.value_at(depth + 1)).collect::<Result<_, _>>()?;
                return Ok(Value::Struct(tag, fields));
            }
            BYTES_8 | BYTES_16 | BYTES_32 => {
                let size = self.size(1 << (marker - BYTES_8))?;
                return Ok(Value::Bytes(self.take(size)?.to_vec()));
            }
            STRING_8 | STRING_16 | STRING_32 => (TINY_STRING, self.size(1 << (marker - STRING_8))?),
            LIST_8 | LIST_16 | LIST_32 => (TINY_LIST, self.size(1 << (marker - LIST_8))?),
            MAP_8 | MAP_16 | MAP_32 => (TINY_MAP, self.size(1 << (marker - MAP_8))?),
            other => return Err(DecodeError(format!("unknown marker {other:#04x}"))),
        };
        match kind {
            TINY_STRING => self.string_of(size).map(Value::String),
            TINY_LIST => {
                // Each item takes at least one byte: a size beyond what is
                // left is refused before anything is allocated for it.
                self.fits(size)?;
                (0..size).map(|_| self.value_at(depth + 1)).collect::<Result<_, _>>().map(Value::List)
            }
            _ => {
                self.fits(size)?;
                let mut entries = Vec::with_capacity(size);
                for _ in 0..size {
                    let key = match self.value_at(depth + 1)? {
                        Value::String(key) => key,
                        other => return Err(DecodeError(format!("a map key is a {}", other.type_name()))),
                    };
                    entries.push((key, self.value_at(depth + 1)?));
                }
                Ok(Value::Map(entries))
            }
        }
    }

    fn fits(&self, items: usize) -> Result<(), DecodeError> {
        if items > self.bytes.len() - self.at {
            return Err(DecodeError(format!(
                "{items} items announced, {} bytes left",
                self.bytes.len() - self.at
            )));
        }
        Ok(())
    }

    fn string_of(&mut self, size: usize) -> Result<String, DecodeError> {
        let bytes = self.take(size)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|e| DecodeError(format!("a string is not UTF-8: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encoded(value: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        write_value(&mut out, value);
        out
    }

    fn decoded(bytes: &[u8]) -> Value {
        let mut decoder = Decoder::new(bytes);
        let value = decoder.value().unwrap();
        assert!(decoder.is_done(), "bytes left after {value:?}");
        value
    }

    #[test]
    fn integers_take_the_smallest_width_that_holds_them() {
        let cases: [(i64, &[u8]); 14] = [
            (0, &[0x00]),
            (127, &[0x7F]),
            (-1, &[0xFF]),
            (-16, &[0xF0]),
            (-17, &[0xC8, 0xEF]),
            (-128, &[0xC8, 0x80]),
            (128, &[0xC9, 0x00, 0x80]),
            (-129, &[0xC9, 0xFF, 0x7F]),
            (32_767, &[0xC9, 0x7F, 0xFF]),
            (32_768, &[0xCA, 0x00, 0x00, 0x80, 0x00]),
            (-32_769, &[0xCA, 0xFF, 0xFF, 0x7F, 0xFF]),
            (2_147_483_647, &[0xCA, 0x7F, 0xFF, 0xFF, 0xFF]),
            (2_147_483_648, &[0xCB, 0, 0, 0, 0, 0x80, 0, 0, 0]),
            (i64::MIN, &[0xCB, 0x80, 0, 0, 0, 0, 0, 0, 0]),
        ];
        for (value, bytes) in cases {
            assert_eq!(encoded(&Value::Int(value)), bytes, "{value}");
            assert_eq!(decoded(bytes), Value::Int(value), "{value}");
        }
        // A wider encoding than needed is still read (other writers may use it).
        assert_eq!(decoded(&[0xCB, 0, 0, 0, 0, 0, 0, 0, 0x05]), Value::Int(5));
        assert_eq!(decoded(&[0xC9, 0xFF, 0xFF]), Value::Int(-1));
    }

    #[test]
    fn strings_lists_and_maps_use_tiny_then_sized_headers() {
        assert_eq!(encoded(&Value::String(String::new())), [0x80]);
        assert_eq!(encoded(&Value::String("A".into())), [0x81, 0x41]);
        let fifteen = "x".repeat(15);
        assert_eq!(encoded(&Value::String(fifteen.clone()))[0], 0x8F);
        assert_eq!(encoded(&Value::String("x".repeat(16)))[..2], [0xD0, 16]);
        assert_eq!(encoded(&Value::String("x".repeat(256)))[..3], [0xD1, 0x01, 0x00]);
        assert_eq!(encoded(&Value::String("x".repeat(65_536)))[..5], [0xD2, 0, 1, 0, 0]);
        assert_eq!(decoded(&[0x83, b'a', 0xC3, 0xA9]), Value::String("aé".into()));

        assert_eq!(encoded(&Value::List(vec![])), [0x90]);
        assert_eq!(encoded(&Value::List(vec![Value::Int(1), Value::Null])), [0x92, 0x01, 0xC0]);
        let sixteen = Value::List(vec![Value::Bool(true); 16]);
        assert_eq!(encoded(&sixteen)[..2], [0xD4, 16]);
        assert_eq!(decoded(&encoded(&sixteen)), sixteen);

        let map = Value::Map(vec![("n".into(), Value::Int(-1)), ("qid".into(), Value::Int(-1))]);
        assert_eq!(encoded(&map), [0xA2, 0x81, b'n', 0xFF, 0x83, b'q', b'i', b'd', 0xFF]);
        assert_eq!(decoded(&encoded(&map)), map);
        assert_eq!(map.get("qid"), Some(&Value::Int(-1)));
        assert_eq!(map.get("x"), None);

        assert_eq!(encoded(&Value::Bytes(vec![1, 2])), [0xCC, 2, 1, 2]);
        assert_eq!(encoded(&Value::Float(1.1)), [0xC1, 0x3F, 0xF1, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9A]);
    }

    #[test]
    fn a_node_structure_decodes_with_its_tag_and_fields() {
        // Node (0x4E) of Bolt 5: id, labels, properties, element_id.
        let mut bytes = vec![0xB4, 0x4E, 0x07, 0x91, 0x87];
        bytes.extend_from_slice(b"Content");
        bytes.extend_from_slice(&[0xA1, 0x82, b'i', b'd', 0x2A, 0x83, b'4', b':', b'7']);
        let expected = Value::Struct(
            0x4E,
            vec![
                Value::Int(7),
                Value::List(vec![Value::String("Content".into())]),
                Value::Map(vec![("id".into(), Value::Int(42))]),
                Value::String("4:7".into()),
            ],
        );
        assert_eq!(decoded(&bytes), expected);
        assert_eq!(encoded(&expected), bytes);
        assert_eq!(Decoder::new(&bytes).struct_header(), Ok((0x4E, 4)));
    }

    #[test]
    fn broken_input_is_an_error_not_a_panic_or_a_huge_allocation() {
        for bad in [
            &[0xD0, 5, b'a'][..],                  // string shorter than announced
            &[0xD6, 0xFF, 0xFF, 0xFF, 0xFF],       // a list of 4 billion items in 5 bytes
            &[0xDA, 0x7F, 0xFF, 0xFF, 0xFF, 0x80], // a map of 2 billion entries
            &[0xA1, 0x01, 0x01],                   // a map key that is no string
            &[0x81, 0xFF],                         // not UTF-8
            &[0xE0],                               // a reserved marker
            &[0xCB, 0x01],                         // a truncated integer
            &[],
        ] {
            assert!(Decoder::new(bad).value().is_err(), "{bad:02x?}");
        }
        let deep = [0x91; 100];
        assert!(Decoder::new(&deep).value().is_err(), "too deep");
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::Int),
            (-70_000i64..70_000).prop_map(Value::Int),
            any::<f64>().prop_filter("NaN is not equal to itself", |f| !f.is_nan()).prop_map(Value::Float),
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(Value::Bytes),
            ".{0,40}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 20, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..20).prop_map(Value::List),
                proptest::collection::vec((".{0,8}", inner.clone()), 0..20).prop_map(Value::Map),
                (any::<u8>(), proptest::collection::vec(inner, 0..=15))
                    .prop_map(|(t, f)| Value::Struct(t, f)),
            ]
        })
    }

    proptest! {
        #[test]
        fn every_value_survives_a_round_trip(v in value()) {
            prop_assert_eq!(decoded(&encoded(&v)), v);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Decoder::new(&bytes).value();
        }
    }
}
