//! Numeric tables in CSV: one item per row, every field a number, optionally a header line
//! and a class-label column. A field that is not a number, or a row of the wrong width, is an
//! error naming the file, line and column.
//!
//! This reads the plain numeric CSV that data sets ship as (no quoting: a quoted field is
//! reported as not a number).

use std::path::Path;

use super::dataset::InMemory;
use super::sample::{Features, Sample, Target};
use crate::error::{Error, Result};

/// How to read a table.
#[derive(Debug, Clone)]
pub struct CsvOptions {
    /// Skip the first line.
    pub has_header: bool,
    /// The field separator; `,` by default.
    pub delimiter: char,
    /// The column holding integer class labels; negative counts from the end (`-1` is the
    /// last). `None`: every column is input and items have no label (`Target::Values` of
    /// zero length).
    pub label_column: Option<isize>,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            has_header: false,
            delimiter: ',',
            label_column: None,
        }
    }
}

impl CsvOptions {
    /// Labels in the last column, no header: the layout of most classification tables.
    pub fn labels_last() -> Self {
        CsvOptions {
            label_column: Some(-1),
            ..Self::default()
        }
    }
}

/// Parses CSV `text`; `name` is used in errors (a path or a description).
pub fn parse_csv(text: &str, name: &str, options: &CsvOptions) -> Result<Vec<Sample>> {
    let bad = |line: usize, message: String| Error::Format {
        path: name.to_string(),
        message: format!("line {line}: {message}"),
    };
    let mut width = None;
    let mut samples = Vec::new();
    let rows = text
        .lines()
        .enumerate()
        .skip(usize::from(options.has_header))
        .filter(|(_, line)| !line.trim().is_empty());
    for (number, line) in rows {
        let line_number = number + 1;
        let fields: Vec<&str> = line.split(options.delimiter).map(str::trim).collect();
        let columns = *width.get_or_insert(fields.len());
        if fields.len() != columns {
            return Err(bad(
                line_number,
                format!("{} fields, but the first row has {columns}", fields.len()),
            ));
        }
        let label_at = match options.label_column {
            None => None,
            Some(c) => {
                let resolved = if c < 0 { columns as isize + c } else { c };
                if resolved < 0 || resolved as usize >= columns {
                    return Err(bad(
                        line_number,
                        format!("label column {c} does not exist in a row of {columns} fields"),
                    ));
                }
                Some(resolved as usize)
            }
        };
        let mut values = Vec::with_capacity(columns);
        let mut label = None;
        for (column, field) in fields.iter().enumerate() {
            if Some(column) == label_at {
                let class = field.parse::<i64>().map_err(|_| {
                    bad(
                        line_number,
                        format!(
                            "column {}: label `{field}` is not an integer class",
                            column + 1
                        ),
                    )
                })?;
                label = Some(class);
            } else {
                let value = field.parse::<f32>().map_err(|_| {
                    bad(
                        line_number,
                        format!("column {}: `{field}` is not a number", column + 1),
                    )
                })?;
                values.push(value);
            }
        }
        let input = Features::vector(values);
        samples.push(match label {
            Some(class) => Sample::classified(input, class),
            None => Sample {
                input,
                target: Target::Values(Features::vector(Vec::new())),
            },
        });
    }
    Ok(samples)
}

/// Reads a CSV file into an in-memory dataset.
pub fn read_csv(path: impl AsRef<Path>, options: &CsvOptions) -> Result<InMemory<Sample>> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    Ok(InMemory::new(parse_csv(
        &text,
        &path.display().to_string(),
        options,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_labels_and_reports_bad_fields() {
        let text = "a,b,label\n1,2.5,3\n\n-1,0,7\n";
        let options = CsvOptions {
            has_header: true,
            ..CsvOptions::labels_last()
        };
        let rows = parse_csv(text, "t.csv", &options).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].input.values, vec![1.0, 2.5]);
        assert_eq!(rows[1].target, Target::Class(7));
        let err = parse_csv("1,2,3\n1,x,3\n", "t.csv", &CsvOptions::labels_last())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("t.csv") && err.contains("line 2") && err.contains("column 2"),
            "{err}"
        );
        let err = parse_csv("1,2,3\n1,2\n", "t.csv", &CsvOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2") && err.contains("2 fields"), "{err}");
        assert!(parse_csv("1,2,0.5\n", "t.csv", &CsvOptions::labels_last()).is_err());
    }
}
