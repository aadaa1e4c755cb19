//! `csv_reader`: CSV text with options chosen by the first byte. Parsing gives rows of one
//! width that collate into one batch, or an error; through a file (`read_csv`) it gives the
//! same rows as from memory (`parse_csv`).

use rumus::data::{Collate, CsvOptions, Sample, parse_csv, read_csv};

use super::framing;
use super::scratch::Scratch;

const DELIMITERS: [char; 4] = [',', ';', '\t', '\u{2192}'];
const LABEL_COLUMNS: [Option<isize>; 8] = [
    None,
    Some(-1),
    Some(0),
    Some(1),
    Some(-2),
    Some(3),
    Some(isize::MIN),
    Some(isize::MAX),
];
/// Flag of the options byte: also read the text from a file.
pub const THROUGH_A_FILE: u8 = 0x80;

/// Bit 0: a header line; bits 1-2: the delimiter; bits 3-5: the label column.
pub fn options(byte: u8) -> CsvOptions {
    CsvOptions {
        has_header: byte & 1 != 0,
        delimiter: DELIMITERS[usize::from(byte >> 1 & 3)],
        label_column: LABEL_COLUMNS[usize::from(byte >> 3 & 7)],
    }
}

pub fn run(bytes: &[u8]) -> rumus::Result<()> {
    let (&flags, text) = bytes
        .split_first()
        .ok_or_else(|| framing("no options byte"))?;
    let options = options(flags);
    let parsed = std::str::from_utf8(text)
        .map_err(|e| framing(&format!("not UTF-8: {e}")))
        .and_then(|text| parse_csv(text, "fuzz.csv", &options));
    if flags & THROUGH_A_FILE != 0 {
        let scratch = Scratch::new()?;
        let path = scratch.write("fuzz.csv", text)?;
        let read = read_csv(&path, &options);
        match (&parsed, &read) {
            // Debug rather than `==`: NaN values are equal here.
            (Ok(rows), Ok(set)) => assert_eq!(format!("{rows:?}"), format!("{:?}", set.items())),
            (Err(_), Err(_)) => {}
            _ => panic!(
                "parse_csv and read_csv disagree: {:?} vs {:?}",
                parsed.as_ref().err(),
                read.as_ref().err()
            ),
        }
    }
    let rows = parsed?;
    for row in &rows {
        assert_eq!(row.input.dims, [row.input.values.len()]);
    }
    if !rows.is_empty() {
        let n = rows.len();
        let batch = Sample::collate(rows).unwrap_or_else(|e| panic!("rows do not collate: {e}"));
        assert_eq!(batch.len(), n);
    }
    Ok(())
}
