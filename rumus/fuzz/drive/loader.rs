//! `data_loader`: a `DataLoader` with worker threads over a record file of fuzzed records,
//! each decoded as a sample: every batch of an epoch arrives, in order, as `Ok` or `Err`
//! (a panic inside a worker would become an `Err` naming it, which counts as a finding), and
//! an epoch dropped after its first batch stops its workers.
//!
//! Input: one configuration byte (see [`Config`]), then the records, each a u16
//! little-endian length and that many bytes (the last one takes what is left).

use rumus::data::{DataLoader, Dataset, RecordDataset, RecordWriter, Sample};

use super::framing;
use super::scratch::Scratch;

/// What the configuration byte selects.
pub struct Config {
    pub batch_size: usize,
    pub drop_last: bool,
    pub shuffle: bool,
    pub workers: usize,
    pub prefetch: usize,
}

impl Config {
    pub fn from_byte(byte: u8) -> Config {
        Config {
            batch_size: 1 + usize::from(byte & 3),
            drop_last: byte & 4 != 0,
            shuffle: byte & 8 != 0,
            workers: 1 + usize::from(byte >> 4 & 1),
            prefetch: 1 + usize::from(byte >> 5 & 3),
        }
    }
}

/// The input that holds `records` under configuration byte `config` (for seeds).
pub fn frame(config: u8, records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![config];
    for record in records {
        let len = u16::try_from(record.len()).expect("a seed record under 64 KiB");
        out.extend(len.to_le_bytes());
        out.extend(record);
    }
    out
}

fn records(mut rest: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let Some((len, tail)) = rest.split_first_chunk::<2>() {
        let len = usize::from(u16::from_le_bytes(*len)).min(tail.len());
        let (record, tail) = tail.split_at(len);
        out.push(record);
        rest = tail;
    }
    out
}

pub fn run(bytes: &[u8]) -> rumus::Result<()> {
    let (&config, rest) = bytes
        .split_first()
        .ok_or_else(|| framing("no configuration byte"))?;
    let config = Config::from_byte(config);
    let scratch = Scratch::new()?;
    let path = scratch.path("fuzz.rrec");
    let mut writer = RecordWriter::create(&path)?;
    for record in records(rest) {
        writer.append(record)?;
    }
    writer.finish()?;
    let dataset = RecordDataset::open(&path)?.map(|bytes: Vec<u8>| Sample::from_bytes(&bytes));
    let mut loader = DataLoader::new(dataset, config.batch_size)?
        .workers(config.workers)
        .prefetch(config.prefetch)
        .drop_last(config.drop_last);
    if config.shuffle {
        loader = loader.shuffle(7);
    }
    let expected = loader.len();
    let (mut seen, mut first_error) = (0, None);
    for batch in loader.epoch() {
        seen += 1;
        match batch {
            Ok(batch) => {
                assert!((1..=config.batch_size).contains(&batch.len()));
                assert_eq!(batch.target.dims().first(), Some(&batch.len()));
            }
            Err(e) => {
                let message = e.to_string();
                assert!(!message.contains("panicked"), "{message}");
                first_error.get_or_insert(e);
            }
        }
    }
    assert_eq!(seen, expected, "batches of an epoch");
    drop(loader.epoch().next());
    assert_eq!(loader.dataset().len(), records(rest).len());
    first_error.map_or(Ok(()), Err)
}
