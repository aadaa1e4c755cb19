//! Checkpoints. `checkpoint_loader`: any bytes load as a checkpoint or give an error.
//! `checkpoint_structure`: the bytes are a checkpoint whose checksum is recomputed here the
//! way `Checkpoint::to_bytes` computes it (see `checksum` in `rumus/src/io/checkpoint.rs`),
//! so that mutations of the metadata and the tensors reach the parsing behind the CRC.
//!
//! Both then go on as a resumed run does: a checkpoint that loads writes and reads back
//! unchanged, restores into a `Linear` and its `Adam` or gives an error (leaving them as
//! they were), and a restored pair takes a training step.

use rumus::io::Checkpoint;
use rumus::nn::{Linear, Module};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::{DType, DynTensor};
use serde_json::{Map, Value};

use super::same_state;

const NAME: &str = "fuzz.safetensors";
const CHECKSUM_KEY: &str = "checksum";
const METADATA_KEY: &str = "__metadata__";

/// The model and optimizer checkpoints are restored into (the seeds are theirs).
pub fn model_and_optimizer() -> rumus::Result<(Linear<3, 2>, Adam)> {
    rumus::manual_seed(0);
    let model = Linear::<3, 2>::new()?;
    let optimizer = Adam::new(model.parameters(), AdamConfig::adam())?;
    Ok((model, optimizer))
}

/// One step of training: a forward pass, its gradients and an update.
pub fn train_step(model: &Linear<3, 2>, optimizer: &mut Adam) -> rumus::Result<()> {
    let x = DynTensor::ones(&[2, 3], DType::F32)?;
    let mut grads = model.forward_dyn(&x)?.sum_all()?.backward()?;
    optimizer.step(&mut grads)
}

pub fn load(bytes: &[u8]) -> rumus::Result<()> {
    resume(&Checkpoint::from_bytes(bytes, NAME)?)
}

pub fn structured(bytes: &[u8]) -> rumus::Result<()> {
    match with_checksum(bytes) {
        Some(fixed) => load(&fixed),
        None => load(bytes),
    }
}

fn resume(checkpoint: &Checkpoint) -> rumus::Result<()> {
    if let Ok(bytes) = checkpoint.to_bytes() {
        let again = Checkpoint::from_bytes(&bytes, NAME)
            .unwrap_or_else(|e| panic!("a checkpoint rumus wrote does not read: {e}"));
        assert_eq!(format!("{again:?}"), format!("{checkpoint:?}"));
        assert!(same_state(&again.model, &checkpoint.model));
        assert!(same_state(
            &again.optimizer.buffers,
            &checkpoint.optimizer.buffers
        ));
    }
    let (model, mut optimizer) = model_and_optimizer()?;
    let (before, lrs) = (model.state_dict()?, optimizer.lrs());
    if let Err(e) = checkpoint.restore(&model, &mut optimizer) {
        assert!(
            same_state(&model.state_dict()?, &before),
            "a failed restore changed the model"
        );
        assert_eq!(
            optimizer.lrs(),
            lrs,
            "a failed restore changed the optimizer"
        );
        return Err(e);
    }
    assert!(same_state(&model.state_dict()?, &checkpoint.model));
    train_step(&model, &mut optimizer)
}

/// `bytes` with the checksum its contents need, when they are a safetensors file whose
/// header is JSON rumus could read; `None` otherwise (rumus refuses such files before it
/// looks at the checksum). The header is written anew: standard JSON, duplicate keys gone.
pub fn with_checksum(bytes: &[u8]) -> Option<Vec<u8>> {
    let header_len = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
    let header = bytes.get(8..8usize.checked_add(header_len)?)?;
    let data = &bytes[8 + header_len..];
    let Value::Object(mut header) = serde_json::from_slice::<Value>(header).ok()? else {
        return None;
    };
    let mut metadata: Map<String, Value> = match header.remove(METADATA_KEY) {
        Some(Value::Object(m)) => m,
        Some(_) => return None,
        None => Map::new(),
    };
    metadata.remove(CHECKSUM_KEY);
    let mut strings: Vec<(&str, &str)> = Vec::new();
    for (key, value) in &metadata {
        strings.push((key, value.as_str()?));
    }
    let mut tensors = Vec::new();
    for (name, entry) in &header {
        let dtype = entry.get("dtype")?.as_str()?;
        let whole = |v: &Value| v.as_u64().and_then(|n| usize::try_from(n).ok());
        let dims: Vec<usize> = entry
            .get("shape")?
            .as_array()?
            .iter()
            .map(whole)
            .collect::<Option<_>>()?;
        let offsets: Vec<usize> = entry
            .get("data_offsets")?
            .as_array()?
            .iter()
            .map(whole)
            .collect::<Option<_>>()?;
        let &[begin, end] = offsets.as_slice() else {
            return None;
        };
        tensors.push((name.as_str(), dtype, dims, data.get(begin..end)?));
    }

    // The canonical encoding of `checksum` in rumus: metadata sorted by key, then tensors
    // sorted by name, every string and byte run preceded by its length (u64 LE).
    let mut hasher = crc32fast::Hasher::new();
    let mut put = |bytes: &[u8]| {
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    strings.sort();
    for (key, value) in strings {
        put(key.as_bytes());
        put(value.as_bytes());
    }
    tensors.sort_by(|a, b| a.0.cmp(b.0));
    for (name, dtype, dims, data) in tensors {
        put(name.as_bytes());
        put(dtype.as_bytes());
        let dims: Vec<u8> = dims
            .iter()
            .flat_map(|&d| (d as u64).to_le_bytes())
            .collect();
        put(&dims);
        put(data);
    }
    let crc = hasher.finalize();

    metadata.insert(
        CHECKSUM_KEY.into(),
        Value::String(format!("crc32:{crc:08x}")),
    );
    header.insert(METADATA_KEY.into(), Value::Object(metadata));
    let header = serde_json::to_vec(&Value::Object(header)).ok()?;
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    out.extend(data);
    Some(out)
}
