//! The JSON of a safetensors header: a reader that turns text into a [`Json`] tree and the
//! quoting the writer needs.
//!
//! A header is a few kilobytes of objects, strings and integer arrays, so a small reader
//! written for it replaces serde and serde_json, a fifth of a cold build's CPU time. It
//! accepts standard JSON (RFC 8259) and never panics: nesting is limited, and every error
//! says what was expected at which byte.

use crate::live_counts::{self, Count};

/// A parsed JSON value. Numbers keep their text, so integers of any size read back exactly
/// (see [`Json::as_u64`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Json {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Json>),
    /// Members in file order; a key may not appear twice.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The value as a whole number, if it is one that fits in a `u64`.
    pub(super) fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Number(text) if text.bytes().all(|b| b.is_ascii_digit()) => text.parse().ok(),
            _ => None,
        }
    }

    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value of member `key`, for an object that has it.
    pub(super) fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// What kind of value this is, for error messages.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

/// Arrays and objects nested deeper than this are refused, so hostile input cannot exhaust
/// the stack (a header needs three levels).
const MAX_DEPTH: usize = 64;

/// Most values one document may hold. A header has a handful per tensor (a model of a
/// million tensors stays below it); the cap bounds the memory of the tree to a few hundred
/// megabytes, whatever the text.
const MAX_VALUES: usize = 1 << 23;

/// Parses `text` as one JSON value, with only whitespace after it.
pub(super) fn parse(text: &str) -> Result<Json, String> {
    let mut reader = Reader {
        bytes: text.as_bytes(),
        at: 0,
        values: 0,
    };
    let value = reader.value(0)?;
    reader.skip_space();
    if reader.at < reader.bytes.len() {
        return Err(reader.error("the end of the text"));
    }
    Ok(value)
}

/// A key of the object being read, whose equality comparisons are counted
/// ([`header_key_comparisons`]): the set finds a repeated key with O(1) of them per key.
struct SeenKey(String);

/// Hashes as the string does, consistent with `eq` comparing the strings.
impl std::hash::Hash for SeenKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl PartialEq for SeenKey {
    fn eq(&self, other: &Self) -> bool {
        live_counts::add(Count::KeyComparisons, 1);
        self.0 == other.0
    }
}

impl Eq for SeenKey {}

/// How many times the readers of safetensors and checkpoint headers have compared two keys
/// of a JSON object, over the whole process. Reading a header of n keys costs O(n) of them
/// (a key is compared only with keys of the same hash); tests read this to prove it, with a
/// count that does not depend on the machine's speed or load.
pub fn header_key_comparisons() -> usize {
    live_counts::total(Count::KeyComparisons)
}

/// `s` as a JSON string literal, quotes included.
pub(super) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Values read so far, against [`MAX_VALUES`].
    values: usize,
}

impl Reader<'_> {
    fn error(&self, expected: &str) -> String {
        match self.bytes.get(self.at) {
            Some(&b) => format!(
                "expected {expected} at byte {} of the header, found `{}`",
                self.at,
                char::from(b).escape_default()
            ),
            None => format!("expected {expected}, but the header ends"),
        }
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// Consumes `byte` (after whitespace) if it comes next.
    fn eat(&mut self, byte: u8) -> bool {
        self.skip_space();
        if self.bytes.get(self.at) == Some(&byte) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, byte: u8, what: &str) -> Result<(), String> {
        if self.eat(byte) {
            Ok(())
        } else {
            Err(self.error(what))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > MAX_DEPTH {
            return Err(format!("values nest deeper than {MAX_DEPTH} levels"));
        }
        self.values += 1;
        if self.values > MAX_VALUES {
            return Err(format!(
                "the text holds more than {MAX_VALUES} values, more than any header needs"
            ));
        }
        self.skip_space();
        match self.bytes.get(self.at) {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Json::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => {
                for (word, value) in [
                    ("true", Json::Bool(true)),
                    ("false", Json::Bool(false)),
                    ("null", Json::Null),
                ] {
                    if self.bytes[self.at..].starts_with(word.as_bytes()) {
                        self.at += word.len();
                        return Ok(value);
                    }
                }
                Err(self.error("a value"))
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, String> {
        self.at += 1;
        let mut members: Vec<(String, Json)> = Vec::new();
        // Keys seen so far: a set, so an object of n members is read in O(n) (a header of
        // 160k keys took 47 s when each key was compared with every earlier one).
        let mut seen: std::collections::HashSet<SeenKey> = std::collections::HashSet::new();
        if self.eat(b'}') {
            return Ok(Json::Object(members));
        }
        loop {
            self.skip_space();
            if self.bytes.get(self.at) != Some(&b'"') {
                return Err(self.error("a quoted key"));
            }
            let key = self.string()?;
            if !seen.insert(SeenKey(key.clone())) {
                return Err(format!("the key {} appears twice", quote(&key)));
            }
            self.expect(b':', "`:`")?;
            members.push((key, self.value(depth + 1)?));
            if self.eat(b'}') {
                return Ok(Json::Object(members));
            }
            self.expect(b',', "`,` or `}`")?;
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, String> {
        self.at += 1;
        let mut items = Vec::new();
        if self.eat(b']') {
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            if self.eat(b']') {
                return Ok(Json::Array(items));
            }
            self.expect(b',', "`,` or `]`")?;
        }
    }

    /// A number's text, checked against JSON's grammar: `-? int frac? exp?`.
    fn number(&mut self) -> Result<Json, String> {
        let start = self.at;
        let digits = |r: &mut Self| {
            let from = r.at;
            while r.bytes.get(r.at).is_some_and(u8::is_ascii_digit) {
                r.at += 1;
            }
            r.at > from
        };
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        let int_start = self.at;
        if !digits(self) {
            return Err(self.error("a digit"));
        }
        if self.bytes[int_start] == b'0' && self.at - int_start > 1 {
            return Err(format!("a number at byte {start} has a leading zero"));
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            if !digits(self) {
                return Err(self.error("a digit after `.`"));
            }
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.at) {
                self.at += 1;
            }
            if !digits(self) {
                return Err(self.error("an exponent"));
            }
        }
        let text = std::str::from_utf8(&self.bytes[start..self.at]).expect("ASCII");
        Ok(Json::Number(text.to_string()))
    }

    /// A string literal starting at the opening quote, escapes decoded.
    fn string(&mut self) -> Result<String, String> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.bytes.get(self.at) else {
                return Err(self.error("a closing `\"`"));
            };
            self.at += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    let escaped = self.bytes.get(self.at).copied();
                    self.at += 1;
                    let c = match escaped {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => self.unicode_escape()?,
                        _ => {
                            self.at -= 1;
                            return Err(self.error("an escape (one of `\"\\/bfnrtu`)"));
                        }
                    };
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                0..0x20 => {
                    self.at -= 1;
                    return Err(self.error("no raw control character inside a string"));
                }
                _ => out.push(b),
            }
        }
        // The input is a `&str` and escapes add whole characters, so this holds.
        Ok(String::from_utf8(out).expect("UTF-8 in, UTF-8 out"))
    }

    /// The character of a `\uXXXX` escape (after the `u`), pairing UTF-16 surrogates.
    fn unicode_escape(&mut self) -> Result<char, String> {
        let high = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&high) {
            if !self.bytes[self.at..].starts_with(b"\\u") {
                return Err(self.error("the low half of a surrogate pair (`\\uDC00`-`\\uDFFF`)"));
            }
            self.at += 2;
            let low = self.hex4()?;
            if !(0xDC00..0xE000).contains(&low) {
                return Err(format!(
                    "`\\u{high:04X}` is followed by `\\u{low:04X}`, not a low surrogate"
                ));
            }
            0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
        } else {
            high
        };
        char::from_u32(code).ok_or_else(|| format!("`\\u{code:04X}` is not a character"))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .bytes
            .get(self.at..self.at + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.error("four hex digits"))?;
        self.at += 4;
        Ok(u32::from_str_radix(digits, 16).expect("checked hex digits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(members: &[(&str, Json)]) -> Json {
        Json::Object(
            members
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn reads_a_header_shaped_document() {
        let text = r#" {"w": {"dtype":"F32", "shape":[2, 3], "data_offsets":[0,24]},
                        "__metadata__": {"note": "a\"b\\c\u00e9\ud83d\ude00"}}   "#;
        let expected = object(&[
            (
                "w",
                object(&[
                    ("dtype", Json::String("F32".into())),
                    (
                        "shape",
                        Json::Array(vec![Json::Number("2".into()), Json::Number("3".into())]),
                    ),
                    (
                        "data_offsets",
                        Json::Array(vec![Json::Number("0".into()), Json::Number("24".into())]),
                    ),
                ]),
            ),
            (
                "__metadata__",
                object(&[("note", Json::String("a\"b\\c\u{e9}\u{1F600}".into()))]),
            ),
        ]);
        assert_eq!(parse(text).unwrap(), expected);
    }

    #[test]
    fn reads_every_kind_of_value() {
        let value = parse(r#"[true, false, null, -1.5e+3, 0, "", {}, []]"#).unwrap();
        let Json::Array(items) = value else {
            panic!("not an array")
        };
        let kinds: Vec<&str> = items.iter().map(Json::kind).collect();
        assert_eq!(
            kinds,
            [
                "a boolean",
                "a boolean",
                "null",
                "a number",
                "a number",
                "a string",
                "an object",
                "an array"
            ]
        );
        assert_eq!(items[3], Json::Number("-1.5e+3".into()));
    }

    #[test]
    fn whole_numbers_read_exactly_and_others_do_not_pass_as_integers() {
        assert_eq!(
            parse("18446744073709551615").unwrap().as_u64(),
            Some(u64::MAX)
        );
        for text in ["18446744073709551616", "-1", "1.0", "1e3", "\"7\""] {
            assert_eq!(parse(text).unwrap().as_u64(), None, "{text}");
        }
    }

    #[test]
    fn quoting_round_trips_through_the_reader() {
        let nasty = "quote \" backslash \\ newline \n tab \t bell \u{7} nul \u{0} é 😀";
        assert_eq!(parse(&quote(nasty)).unwrap(), Json::String(nasty.into()));
    }

    #[test]
    fn malformed_text_is_an_error_that_names_the_place() {
        let cases = [
            ("", "ends"),
            ("{", "ends"),
            ("{\"a\" 1}", "`:`"),
            ("{\"a\":1,}", "quoted key"),
            ("[1 2]", "`,` or `]`"),
            ("[1,]", "a value"),
            ("\"open", "closing"),
            ("\"bad \\q\"", "an escape"),
            ("\"\\ud800\"", "low half"),
            ("\"\\ud800\\u0041\"", "not a low surrogate"),
            ("\"\\u12\"", "four hex digits"),
            ("\"tab\tinside\"", "control character"),
            ("01", "leading zero"),
            ("1.", "digit after"),
            ("-", "a digit"),
            ("1e", "an exponent"),
            ("tru", "a value"),
            ("{} x", "the end of the text"),
            ("{\"a\":1,\"a\":2}", "appears twice"),
        ];
        for (text, expected) in cases {
            let error = parse(text).expect_err(text);
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }

    #[test]
    fn a_document_of_too_many_values_is_refused() {
        let many = format!("[{}0]", "0,".repeat(MAX_VALUES));
        assert!(parse(&many).unwrap_err().contains("more than"));
        let fine = format!("[{}0]", "0,".repeat(MAX_VALUES - 2));
        assert!(parse(&fine).is_ok());
    }

    #[test]
    fn deep_nesting_is_refused_without_exhausting_the_stack() {
        let deep = "[".repeat(100_000);
        assert!(parse(&deep).unwrap_err().contains("nest deeper"));
        let fine = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(&fine).is_ok());
    }
}
