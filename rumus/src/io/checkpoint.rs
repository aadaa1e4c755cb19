//! Training checkpoints: everything needed to continue a run bit for bit as if it had never
//! stopped (model and optimizer state, schedule position, the process-wide random generator,
//! epoch and step), in one safetensors file written atomically and guarded by a CRC-32.
//!
//! # File format (version 1)
//!
//! A safetensors file. Model tensors are named `model.<name>`, optimizer buffers
//! `optimizer.<key>` (`optimizer.0.1.exp_avg`). The `__metadata__` map holds:
//!
//! | key | value |
//! |---|---|
//! | `format`, `format_version` | `rumus.checkpoint`, `1` |
//! | `epoch`, `step` | decimal |
//! | `scheduler_epoch` | decimal, or `none` |
//! | `optimizer.lrs` | comma-separated rates, exact (`{:e}` round-trips) |
//! | `optimizer.steps` | one `<group>.<index>=<count>` per line |
//! | `model.order`, `optimizer.order` | tensor names, one per line, in their original order |
//! | `rng.state`, `rng.spare_normal` | four 16-digit hex words; the spare as hex bits or `none` |
//! | `user.<key>` | the user's [`Checkpoint::metadata`] |
//! | `loop.<key>` | [`Checkpoint::loop_state`] (absent in files without it) |
//! | `checksum` | `crc32:<8 hex digits>` |
//!
//! The checksum covers every other metadata entry and every tensor's name, dtype, shape and
//! bytes, so a flipped bit anywhere in the data (and in most of the header) is reported as
//! corruption instead of silently resuming from damaged weights.
//!
//! A checksum does not make the values sane: a file can be written by hand, or by a buggy
//! tool, with a correct checksum. Saving, loading and restoring therefore also check that
//! every value is one a run can be in: learning rates finite and `>= 0`, optimizer buffers
//! finite (and `>= 0` where they average squares), step and epoch counts at most 2^53, a
//! generator state the generator can be in. Model tensors are not checked: a model may hold
//! infinities on purpose (masks).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::Path;

use super::atomic::write_atomic;
use super::safetensors::{Encoded, decode, format_error, io_error, serialize};
use super::safetensors_format::{self, TensorToWrite};
use crate::error::{Error, Result};
use crate::nn::{Module, StateDict};
use crate::optim::limits::{Check, check_state, count};
use crate::optim::{Optimizer, OptimizerState};
use crate::rng::{Generator, global_state, set_global_state};

const FORMAT: &str = "rumus.checkpoint";
const VERSION: u32 = 1;

const KEY_FORMAT: &str = "format";
const KEY_VERSION: &str = "format_version";
const KEY_EPOCH: &str = "epoch";
const KEY_STEP: &str = "step";
const KEY_SCHEDULER_EPOCH: &str = "scheduler_epoch";
const KEY_LRS: &str = "optimizer.lrs";
const KEY_STEPS: &str = "optimizer.steps";
const KEY_MODEL_ORDER: &str = "model.order";
const KEY_OPTIMIZER_ORDER: &str = "optimizer.order";
const KEY_RNG_STATE: &str = "rng.state";
const KEY_RNG_SPARE: &str = "rng.spare_normal";
const KEY_CHECKSUM: &str = "checksum";
const USER_PREFIX: &str = "user.";
const LOOP_PREFIX: &str = "loop.";
const MODEL_PREFIX: &str = "model.";
const OPTIMIZER_PREFIX: &str = "optimizer.";
const NONE: &str = "none";

/// A snapshot of a training run. [`Checkpoint::capture`] takes it, [`Checkpoint::save`] and
/// [`Checkpoint::load`] move it through a file, [`Checkpoint::restore`] puts it back.
///
/// Resuming, in this order:
/// 1. build the model, the optimizer and the scheduler exactly as for a fresh run (the
///    scheduler takes its base rates from the fresh optimizer);
/// 2. [`Checkpoint::restore`] the model, the optimizer and the global generator;
/// 3. `scheduler.set_epoch(&mut optimizer, epoch)` with [`Checkpoint::scheduler_epoch`];
/// 4. continue at [`Checkpoint::epoch`] / [`Checkpoint::step`]: a
///    [`DataLoader`](crate::data::DataLoader) built with the same seed and resumed with
///    `epoch_from(epoch, batch)` yields exactly the batches the uninterrupted run would have
///    seen (its order and augmentations depend only on seed, epoch and index).
///
/// ```
/// use rumus::io::Checkpoint;
/// use rumus::nn::{Linear, Module};
/// use rumus::optim::{Adam, AdamConfig};
///
/// # fn main() -> rumus::Result<()> {
/// let model = Linear::<2, 1>::new()?;
/// let adam = Adam::new(model.parameters(), AdamConfig::adam())?;
/// // ... training; then, at epoch 3 after 120 steps:
/// let checkpoint = Checkpoint::capture(&model, &adam, None, 3, 120)?.with_metadata("run", "a");
/// // `save(path)` writes these bytes atomically; `load(path)` reads them back.
/// let bytes = checkpoint.to_bytes()?;
///
/// // Resuming: a fresh model and optimizer (other random weights), then restore.
/// let resumed = Linear::<2, 1>::new()?;
/// let mut resumed_adam = Adam::new(resumed.parameters(), AdamConfig::adam())?;
/// let loaded = Checkpoint::from_bytes(&bytes, "in memory")?;
/// loaded.restore(&resumed, &mut resumed_adam)?;
/// assert_eq!((loaded.epoch, loaded.step), (3, 120));
/// assert_eq!(loaded.metadata["run"], "a");
/// for (a, b) in resumed.parameters().iter().zip(model.parameters()) {
///     assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
/// }
///
/// // A damaged file is an error, not silently different weights.
/// let mut damaged = bytes.clone();
/// *damaged.last_mut().unwrap() ^= 1;
/// assert!(Checkpoint::from_bytes(&damaged, "damaged").is_err());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Checkpoint {
    /// Model parameters and buffers by dotted name.
    pub model: StateDict,
    /// The optimizer's learning rates, step counts and buffers.
    pub optimizer: OptimizerState,
    /// [`LrScheduler::epoch`](crate::optim::LrScheduler::epoch), if a scheduler is used.
    pub scheduler_epoch: Option<u64>,
    /// The process-wide generator (dropout masks and random initialisation draw from it).
    pub rng: Generator,
    /// The epoch to resume at.
    pub epoch: u64,
    /// The step to resume at, as the caller counts steps (e.g. batches trained so far).
    pub step: u64,
    /// Free-form fields of the caller (run name, best validation loss, ...).
    pub metadata: BTreeMap<String, String>,
    /// The state of the training loop beyond the optimizer, as text that round-trips
    /// exactly: what [`Trainer`](crate::train::Trainer) needs to resume (a
    /// [`ReduceLrOnPlateau`](crate::optim::ReduceLrOnPlateau)'s counters, early stopping's
    /// best value, the history so far). Empty for checkpoints written by hand.
    pub loop_state: BTreeMap<String, String>,
    /// Where the checkpoint was read from (the path, or the name given to
    /// [`Checkpoint::from_bytes`]); `None` for one captured in memory. Errors of
    /// [`Checkpoint::restore`] name it. It is not stored in the file.
    pub source: Option<String>,
}

impl fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shapes = |state: &[(String, crate::DynTensor)]| {
            state
                .iter()
                .map(|(n, t)| format!("{n}: {:?} {}", t.dims(), t.dtype()))
                .collect::<Vec<_>>()
        };
        f.debug_struct("Checkpoint")
            .field("model", &shapes(&self.model))
            .field("optimizer.lrs", &self.optimizer.lrs)
            .field("optimizer.steps", &self.optimizer.steps)
            .field("optimizer.buffers", &shapes(&self.optimizer.buffers))
            .field("scheduler_epoch", &self.scheduler_epoch)
            .field("rng", &self.rng)
            .field("epoch", &self.epoch)
            .field("step", &self.step)
            .field("metadata", &self.metadata)
            .field("loop_state", &self.loop_state)
            .field("source", &self.source)
            .finish()
    }
}

impl Checkpoint {
    /// Snapshots `model`, `optimizer` and the process-wide generator. `scheduler_epoch` is
    /// `scheduler.epoch()` (or `None`); `epoch` and `step` are the position to resume at.
    /// Fails when a GPU tensor cannot be read back (a lost device) or a copy cannot be
    /// allocated.
    pub fn capture(
        model: &dyn Module,
        optimizer: &dyn Optimizer,
        scheduler_epoch: Option<u64>,
        epoch: u64,
        step: u64,
    ) -> Result<Self> {
        Checkpoint::with_optimizer_state(
            model,
            optimizer.state_dict()?,
            scheduler_epoch,
            epoch,
            step,
        )
    }

    /// [`Checkpoint::capture`] with the optimizer's state given: for an optimizer whose
    /// state is assembled elsewhere, e.g. gathered from the ranks of a
    /// `rumus::distributed::ZeroRedundancyOptimizer` (a plain name, not a link: that module
    /// exists only with the `distributed` feature).
    pub fn with_optimizer_state(
        model: &dyn Module,
        optimizer: OptimizerState,
        scheduler_epoch: Option<u64>,
        epoch: u64,
        step: u64,
    ) -> Result<Self> {
        Ok(Checkpoint {
            model: model.state_dict()?,
            optimizer,
            scheduler_epoch,
            rng: global_state(),
            epoch,
            step,
            metadata: BTreeMap::new(),
            loop_state: BTreeMap::new(),
            source: None,
        })
    }

    /// Adds a user field (stored as `user.<key>` in the file).
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Loads the model and optimizer state and sets the process-wide generator. Every check
    /// (the values, as [`Checkpoint::load`] checks them; names, shapes and dtypes of model
    /// and optimizer tensors, parameter groups) runs before anything changes, so a checkpoint
    /// of another architecture is an error that leaves the model, the optimizer and the
    /// generator as they were. Errors name [`Checkpoint::source`] and the tensor or field.
    /// The scheduler is not touched: call `set_epoch` with [`Checkpoint::scheduler_epoch`]
    /// afterwards.
    pub fn restore(&self, model: &dyn Module, optimizer: &mut dyn Optimizer) -> Result<()> {
        // Checked now, reported in its turn (after the values and the model).
        let optimizer_fits = check_optimizer(optimizer, &self.optimizer);
        self.restore_checked(model, optimizer_fits, |state| {
            optimizer.load_state_dict(state)
        })
    }

    /// [`Checkpoint::restore`] for an optimizer that is not one [`Optimizer`]:
    /// `load_optimizer` receives [`Checkpoint::optimizer`] after the model is loaded, and if
    /// it fails the model is put back as it was and the generator is not touched. It should
    /// check everything before it changes anything, as `load_state_dict` does.
    pub fn restore_with(
        &self,
        model: &dyn Module,
        load_optimizer: impl FnOnce(&OptimizerState) -> Result<()>,
    ) -> Result<()> {
        self.restore_checked(model, Ok(()), load_optimizer)
    }

    /// Checks the values, then the model, then reports `optimizer_fits`, before anything
    /// changes; then loads the model and the optimizer and sets the generator.
    fn restore_checked(
        &self,
        model: &dyn Module,
        optimizer_fits: Check,
        load_optimizer: impl FnOnce(&OptimizerState) -> Result<()>,
    ) -> Result<()> {
        self.check_values()
            .map_err(|message| self.restore_error(message))?;
        check_model(model, &self.model)
            .and(optimizer_fits)
            .map_err(|message| self.restore_error(another_model(message)))?;
        // The model's own values, to put back if loading the optimizer fails: not reading
        // them is the model's error (its GPU), not the checkpoint's.
        let previous = model.state_dict()?;
        model
            .load_state_dict(&self.model)
            .map_err(|e| self.restore_error(e.to_string()))?;
        if let Err(e) = load_optimizer(&self.optimizer) {
            model.load_state_dict(&previous)?;
            return Err(self.restore_error(e.to_string()));
        }
        set_global_state(self.rng.clone());
        Ok(())
    }

    /// An error of [`Checkpoint::restore`], naming where the checkpoint came from.
    fn restore_error(&self, message: String) -> Error {
        let message = match &self.source {
            Some(source) => format!("{source}: {message}"),
            None => message,
        };
        Error::InvalidArgument {
            op: "Checkpoint::restore",
            message,
        }
    }

    /// The values that a checkpoint's checksum cannot vouch for: counters at most 2^53, and
    /// the optimizer's rates, step counts and buffers in their ranges (see the module
    /// documentation). The generator needs no check: a [`Generator`] cannot be built in a
    /// state it cannot be in.
    fn check_values(&self) -> Check {
        count(&format!("`{KEY_EPOCH}`"), self.epoch)?;
        count(&format!("`{KEY_STEP}`"), self.step)?;
        if let Some(epoch) = self.scheduler_epoch {
            count(&format!("`{KEY_SCHEDULER_EPOCH}`"), epoch)?;
        }
        check_state(&self.optimizer)
    }

    /// Writes the checkpoint to `path` atomically: a crash while saving leaves the previous
    /// file at `path` intact.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        write_atomic(path, &self.bytes_for(path)?)
    }

    /// [`to_bytes`](Checkpoint::to_bytes), its errors naming the file they were meant for.
    pub(super) fn bytes_for(&self, path: &Path) -> Result<Vec<u8>> {
        self.to_bytes().map_err(|e| match e {
            Error::InvalidArgument { op, message } => Error::InvalidArgument {
                op,
                message: format!("{}: {message}", path.display()),
            },
            other => other,
        })
    }

    /// Reads a checkpoint written by [`Checkpoint::save`]; damaged files are errors naming
    /// the file (see [`Checkpoint::from_bytes`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Checkpoint> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
        Checkpoint::from_bytes(&bytes, &path.display().to_string())
    }

    /// The file contents [`Checkpoint::save`] writes. A value that [`Checkpoint::load`] would
    /// refuse (a NaN learning rate, ...) is an error here already, so that a file that saves
    /// always loads.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        self.check_values()
            .map_err(|message| Error::InvalidArgument {
                op: "Checkpoint::to_bytes",
                message,
            })?;
        check_names("model", self.model.iter().map(|(n, _)| n.as_str()))?;
        check_names(
            "optimizer buffer",
            self.optimizer.buffers.iter().map(|(n, _)| n.as_str()),
        )?;
        check_names(
            "optimizer step",
            self.optimizer.steps.iter().map(|(n, _)| n.as_str()),
        )?;
        let mut tensors: Vec<Encoded> = Vec::new();
        for (name, t) in &self.model {
            tensors.push(Encoded::new(format!("{MODEL_PREFIX}{name}"), t)?);
        }
        for (name, t) in &self.optimizer.buffers {
            tensors.push(Encoded::new(format!("{OPTIMIZER_PREFIX}{name}"), t)?);
        }
        let mut meta = HashMap::new();
        let mut put = |key: &str, value: String| meta.insert(key.to_string(), value);
        put(KEY_FORMAT, FORMAT.into());
        put(KEY_VERSION, VERSION.to_string());
        put(KEY_EPOCH, self.epoch.to_string());
        put(KEY_STEP, self.step.to_string());
        put(
            KEY_SCHEDULER_EPOCH,
            self.scheduler_epoch.map_or(NONE.into(), |e| e.to_string()),
        );
        let lrs: Vec<String> = self
            .optimizer
            .lrs
            .iter()
            .map(|lr| format!("{lr:e}"))
            .collect();
        put(KEY_LRS, lrs.join(","));
        put(
            KEY_STEPS,
            self.optimizer
                .steps
                .iter()
                .map(|(k, v)| format!("{k}={v}\n"))
                .collect(),
        );
        put(KEY_MODEL_ORDER, lines(self.model.iter().map(|(n, _)| n)));
        put(
            KEY_OPTIMIZER_ORDER,
            lines(self.optimizer.buffers.iter().map(|(n, _)| n)),
        );
        let (words, spare) = self.rng.state();
        let words: Vec<String> = words.iter().map(|w| format!("{w:016x}")).collect();
        put(KEY_RNG_STATE, words.join(","));
        put(
            KEY_RNG_SPARE,
            spare.map_or(NONE.into(), |bits| format!("{bits:016x}")),
        );
        for (key, value) in &self.metadata {
            meta.insert(format!("{USER_PREFIX}{key}"), value.clone());
        }
        for (key, value) in &self.loop_state {
            meta.insert(format!("{LOOP_PREFIX}{key}"), value.clone());
        }
        let parts: Vec<TensorToWrite> = tensors.iter().map(Encoded::to_write).collect();
        let crc = checksum(&meta, parts);
        meta.insert(KEY_CHECKSUM.into(), format!("crc32:{crc:08x}"));
        Ok(serialize(&tensors, &meta))
    }

    /// Parses the contents of a checkpoint file; `name` (usually the path) names it in
    /// errors and becomes [`Checkpoint::source`]. Any damage (truncation, flipped bits,
    /// foreign files, values no run can be in) is an [`Error::Format`], never a panic,
    /// whatever the bytes are.
    pub fn from_bytes(bytes: &[u8], name: &str) -> Result<Checkpoint> {
        let path = Path::new(name);
        let bad = |message: String| format_error(path, message);
        let file = safetensors_format::parse(bytes).map_err(|e| {
            bad(format!(
                "not a readable checkpoint ({e}); the file is truncated, damaged or not a \
                 safetensors file"
            ))
        })?;
        let meta = &file.metadata;
        match meta.get(KEY_FORMAT).map(String::as_str) {
            Some(FORMAT) => {}
            _ => {
                return Err(bad(format!(
                    "not a rumus checkpoint (its metadata has no `{KEY_FORMAT}: {FORMAT}` \
                     entry); model weights load with `load_safetensors`"
                )));
            }
        }
        let version = meta.get(KEY_VERSION).map(String::as_str).unwrap_or("?");
        if version != VERSION.to_string() {
            return Err(bad(format!(
                "checkpoint format version {version}; this rumus reads version {VERSION} \
                 (a newer rumus wrote it?)"
            )));
        }
        let parts = file
            .tensors
            .iter()
            .map(|view| TensorToWrite {
                name: &view.name,
                dtype: &view.dtype,
                dims: &view.dims,
                data: view.data,
            })
            .collect();
        let stored = meta.get(KEY_CHECKSUM).map(String::as_str).unwrap_or("");
        let computed = format!("crc32:{:08x}", checksum(meta, parts));
        if stored != computed {
            return Err(bad(format!(
                "checkpoint is corrupted: checksum mismatch (stored `{stored}`, computed \
                 `{computed}`); the file changed after it was written; resume from an \
                 earlier checkpoint"
            )));
        }

        let field = |key: &str| {
            meta.get(key)
                .map(String::as_str)
                .ok_or_else(|| bad(format!("the checkpoint metadata has no `{key}` entry")))
        };
        let number = |key: &str, text: &str| {
            text.parse::<u64>()
                .map_err(|_| bad(format!("metadata `{key}` is `{text}`, not a whole number")))
        };
        let hex = |key: &str, text: &str| {
            u64::from_str_radix(text, 16)
                .map_err(|_| bad(format!("metadata `{key}` holds `{text}`, not a hex word")))
        };
        let epoch = number(KEY_EPOCH, field(KEY_EPOCH)?)?;
        let step = number(KEY_STEP, field(KEY_STEP)?)?;
        let scheduler_epoch = match field(KEY_SCHEDULER_EPOCH)? {
            NONE => None,
            text => Some(number(KEY_SCHEDULER_EPOCH, text)?),
        };
        let lrs = match field(KEY_LRS)? {
            "" => Vec::new(),
            text => text
                .split(',')
                .map(|lr| {
                    lr.parse::<f64>()
                        .map_err(|_| bad(format!("metadata `{KEY_LRS}` holds `{lr}`")))
                })
                .collect::<Result<_>>()?,
        };
        let steps = field(KEY_STEPS)?
            .split_terminator('\n')
            .map(|line| {
                let (key, count) = line
                    .rsplit_once('=')
                    .ok_or_else(|| bad(format!("metadata `{KEY_STEPS}` has the line `{line}`")))?;
                Ok((key.to_string(), number(KEY_STEPS, count)?))
            })
            .collect::<Result<Vec<_>>>()?;
        let words: Vec<u64> = field(KEY_RNG_STATE)?
            .split(',')
            .map(|w| hex(KEY_RNG_STATE, w))
            .collect::<Result<_>>()?;
        let words: [u64; 4] = words.try_into().map_err(|w: Vec<u64>| {
            bad(format!(
                "metadata `{KEY_RNG_STATE}` has {} words, not 4",
                w.len()
            ))
        })?;
        let spare = match field(KEY_RNG_SPARE)? {
            NONE => None,
            text => Some(hex(KEY_RNG_SPARE, text)?),
        };
        let rng = Generator::from_state(words, spare).map_err(|e| {
            bad(format!(
                "metadata `{KEY_RNG_STATE}` and `{KEY_RNG_SPARE}` hold no state the generator \
                 can be in: {e}"
            ))
        })?;

        let mut model = HashMap::new();
        let mut buffers = HashMap::new();
        for view in &file.tensors {
            let tensor_name = view.name.as_str();
            let tensor = decode(path, view)?;
            if let Some(n) = tensor_name.strip_prefix(MODEL_PREFIX) {
                model.insert(n, tensor);
            } else if let Some(n) = tensor_name.strip_prefix(OPTIMIZER_PREFIX) {
                buffers.insert(n, tensor);
            } else {
                return Err(bad(format!(
                    "tensor `{tensor_name}` is neither `{MODEL_PREFIX}*` nor \
                     `{OPTIMIZER_PREFIX}*`"
                )));
            }
        }
        let model = in_order(KEY_MODEL_ORDER, field(KEY_MODEL_ORDER)?, model, &bad)?;
        let buffers = in_order(
            KEY_OPTIMIZER_ORDER,
            field(KEY_OPTIMIZER_ORDER)?,
            buffers,
            &bad,
        )?;
        let with_prefix = |prefix: &str| {
            meta.iter()
                .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.to_string(), v.clone())))
                .collect()
        };
        let metadata = with_prefix(USER_PREFIX);
        let loop_state = with_prefix(LOOP_PREFIX);
        let checkpoint = Checkpoint {
            model,
            optimizer: OptimizerState {
                lrs,
                steps,
                buffers,
            },
            scheduler_epoch,
            rng,
            epoch,
            step,
            metadata,
            loop_state,
            source: Some(name.to_string()),
        };
        checkpoint.check_values().map_err(bad)?;
        Ok(checkpoint)
    }
}

/// Names are stored one per line, and must be unique to be found again by name.
fn check_names<'a>(what: &str, names: impl Iterator<Item = &'a str>) -> Result<()> {
    let mut seen = HashSet::new();
    for name in names {
        let problem = if name.contains('\n') {
            "contains a line break"
        } else if !seen.insert(name) {
            "appears twice"
        } else {
            continue;
        };
        return Err(Error::InvalidArgument {
            op: "Checkpoint::to_bytes",
            message: format!(
                "{what} name {name:?} {problem}; checkpoint names must be unique single lines"
            ),
        });
    }
    Ok(())
}

fn lines<'a>(names: impl Iterator<Item = &'a String>) -> String {
    names.map(|n| format!("{n}\n")).collect()
}

/// The tensors of `by_name` in the order listed (one name per line) in metadata `key`.
fn in_order(
    key: &str,
    order: &str,
    mut by_name: HashMap<&str, crate::DynTensor>,
    bad: &dyn Fn(String) -> Error,
) -> Result<StateDict> {
    let mut out = Vec::with_capacity(by_name.len());
    for name in order.split_terminator('\n') {
        let tensor = by_name.remove(name).ok_or_else(|| {
            bad(format!(
                "metadata `{key}` lists `{name}`, which is not in the file (or listed twice)"
            ))
        })?;
        out.push((name.to_string(), tensor));
    }
    if let Some(extra) = by_name.keys().next() {
        return Err(bad(format!(
            "tensor `{extra}` is in the file but not listed in metadata `{key}`"
        )));
    }
    Ok(out)
}

/// CRC-32 over a canonical encoding of the metadata (sorted by key, without the checksum
/// itself) and the tensors (sorted by name), each string and byte run length-prefixed so
/// that moving bytes between fields changes the sum.
fn checksum(meta: &HashMap<String, String>, mut parts: Vec<TensorToWrite>) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    let mut put = |bytes: &[u8]| {
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    let mut entries: Vec<(&String, &String)> =
        meta.iter().filter(|(k, _)| *k != KEY_CHECKSUM).collect();
    entries.sort();
    for (key, value) in entries {
        put(key.as_bytes());
        put(value.as_bytes());
    }
    parts.sort_by(|a, b| a.name.cmp(b.name));
    for part in parts {
        put(part.name.as_bytes());
        put(part.dtype.tag().as_bytes());
        let dims: Vec<u8> = part
            .dims
            .iter()
            .flat_map(|&d| (d as u64).to_le_bytes())
            .collect();
        put(&dims);
        put(part.data);
    }
    hasher.finalize()
}

/// A mismatch of a checkpoint and the model or optimizer it is restored into, with the
/// likely cause.
fn another_model(message: String) -> String {
    format!("{message}; was the checkpoint written for another model or optimizer?")
}

/// The checks of `Module::load_state_dict`, without writing anything.
fn check_model(model: &dyn Module, state: &StateDict) -> Check {
    let own = model.named_tensors();
    let saved: HashMap<&str, &crate::DynTensor> =
        state.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let own_names: HashSet<&str> = own.iter().map(|(n, _)| n.as_str()).collect();
    let mut missing: Vec<&str> = own_names
        .iter()
        .filter(|n| !saved.contains_key(*n))
        .copied()
        .collect();
    let mut unexpected: Vec<&str> = saved
        .keys()
        .filter(|n| !own_names.contains(*n))
        .copied()
        .collect();
    if !missing.is_empty() || !unexpected.is_empty() {
        missing.sort_unstable();
        unexpected.sort_unstable();
        return Err(format!(
            "the model has parameters the checkpoint lacks {missing:?}, and the checkpoint has \
             parameters the model lacks {unexpected:?}"
        ));
    }
    for (name, target) in &own {
        let source = saved[name.as_str()];
        if source.dims() != target.dims() || source.dtype() != target.dtype() {
            return Err(format!(
                "parameter `{name}` is {:?} {} in the model but {:?} {} in the checkpoint",
                target.dims(),
                target.dtype(),
                source.dims(),
                source.dtype()
            ));
        }
    }
    Ok(())
}

/// Everything `Optimizer::load_state_dict` checks, and more: the step counts must name
/// exactly this optimizer's parameters, and buffers must match their parameter's shape and
/// dtype.
fn check_optimizer(optimizer: &dyn Optimizer, state: &OptimizerState) -> Check {
    let groups = optimizer.param_groups();
    if state.lrs.len() != groups.len() {
        return Err(format!(
            "the checkpoint's optimizer has {} parameter groups, this one {}",
            state.lrs.len(),
            groups.len()
        ));
    }
    let mut params = HashMap::new();
    for (g, group) in groups.iter().enumerate() {
        for (i, p) in group.params.iter().enumerate() {
            params.insert(format!("{g}.{i}"), p);
        }
    }
    let sizes: Vec<usize> = groups.iter().map(|g| g.params.len()).collect();
    let mut counted = HashSet::new();
    for (key, _) in &state.steps {
        if !params.contains_key(key) || !counted.insert(key.as_str()) {
            return Err(format!(
                "the checkpoint's optimizer state names parameter `{key}` (group.index), but \
                 this optimizer's groups hold {sizes:?} parameters"
            ));
        }
    }
    if counted.len() != params.len() {
        return Err(format!(
            "the checkpoint's optimizer covers {} parameters, this one {} (groups {sizes:?})",
            counted.len(),
            params.len()
        ));
    }
    for (key, saved) in &state.buffers {
        let param = key.rsplit_once('.').and_then(|(k, _)| params.get(k));
        let Some(param) = param else {
            return Err(format!(
                "optimizer buffer `{key}` belongs to no parameter of this optimizer (groups \
                 hold {sizes:?} parameters)"
            ));
        };
        if saved.dims() != param.dims() || saved.dtype() != param.dtype() {
            return Err(format!(
                "optimizer buffer `{key}` is {:?} {} but its parameter is {:?} {}",
                saved.dims(),
                saved.dtype(),
                param.dims(),
                param.dtype()
            ));
        }
    }
    Ok(())
}
