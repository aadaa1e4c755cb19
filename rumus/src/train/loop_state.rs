//! What a [`Trainer`](super::Trainer) keeps in a checkpoint's
//! [`loop_state`](crate::io::Checkpoint::loop_state) beyond the model and the optimizer: the
//! history so far (so a resumed run returns, logs and plots every epoch), the scheduler's
//! fields, each callback's state, and for a checkpoint saved mid-epoch how far the epoch
//! got. Numbers are written as Rust prints them (`{:e}`), the shortest text that parses back
//! to the same `f64`, so a resumed run continues bit for bit.

use std::collections::BTreeMap;

use super::callback::Callback;
use super::summary::{EpochSummary, PhaseSummary};
use crate::error::{Error, Result};
use crate::io::Checkpoint;
use crate::optim::{Optimizer, Scheduler};

const KEY_HISTORY: &str = "history";
const KEY_CALLBACKS: &str = "callbacks";
const SCHEDULER: &str = "scheduler.";
const KEY_EPOCH_BATCHES: &str = "epoch.batches";
const KEY_EPOCH_LOSS_SUM: &str = "epoch.loss_sum";
const KEY_EPOCH_COUNT: &str = "epoch.count";

/// How far an epoch got when a checkpoint was saved inside it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct MidEpoch {
    /// Batches of the epoch already trained.
    pub batches: usize,
    /// Their loss sum and example count (the metrics' state is not kept: a resumed epoch's
    /// metrics cover the batches trained after the resume).
    pub loss_sum: f64,
    pub count: usize,
}

/// Every callback's state under `callback.<index>.`, and their names under `callbacks`.
pub(super) fn callback_states(callbacks: &[Box<dyn Callback>]) -> BTreeMap<String, String> {
    let names: Vec<String> = callbacks.iter().map(|c| c.name()).collect();
    let mut state = BTreeMap::from([(KEY_CALLBACKS.to_string(), names.join("\n"))]);
    for (i, callback) in callbacks.iter().enumerate() {
        for (key, value) in callback.state() {
            state.insert(format!("callback.{i}.{key}"), value);
        }
    }
    state
}

/// The loop state of a run after the last epoch of `history` (and `mid_epoch` batches into
/// the next one, if given).
pub(super) fn capture(
    history: &[EpochSummary],
    scheduler: Option<&dyn Scheduler>,
    callback_states: &BTreeMap<String, String>,
    mid_epoch: Option<MidEpoch>,
) -> BTreeMap<String, String> {
    let mut state = callback_states.clone();
    state.insert(KEY_HISTORY.to_string(), encode_history(history));
    if let Some(scheduler) = scheduler {
        for (key, value) in scheduler.state() {
            state.insert(format!("{SCHEDULER}{key}"), value);
        }
    }
    if let Some(mid) = mid_epoch {
        state.insert(KEY_EPOCH_BATCHES.into(), mid.batches.to_string());
        state.insert(KEY_EPOCH_LOSS_SUM.into(), format!("{:e}", mid.loss_sum));
        state.insert(KEY_EPOCH_COUNT.into(), mid.count.to_string());
    }
    state
}

/// Puts back what [`capture`] saved (the model, optimizer and generator are restored by
/// [`Checkpoint::restore`] before) and returns the history and how far into the next epoch
/// the checkpoint was saved. A checkpoint without a scheduler for a run with one, or the
/// other way round, or with other callbacks, is an error: the run would not follow the one
/// that wrote it.
pub(super) fn restore(
    checkpoint: &Checkpoint,
    optimizer: &mut dyn Optimizer,
    scheduler: Option<&mut dyn Scheduler>,
    callbacks: &mut [Box<dyn Callback>],
) -> Result<(Vec<EpochSummary>, MidEpoch)> {
    let source = checkpoint.source.as_deref().unwrap_or("the checkpoint");
    let refuse = |message: String| Error::InvalidArgument {
        op: "Trainer::resume_from",
        message: format!("{source}: {message}"),
    };
    let state = &checkpoint.loop_state;
    let history = state.get(KEY_HISTORY).ok_or_else(|| {
        refuse(
            "it holds no training history; resume from a checkpoint written by the trainer \
             (`Trainer::checkpoint`, `SaveCheckpoints` or `EpochEnd::checkpoint`)"
                .into(),
        )
    })?;
    let history = decode_history(history).map_err(&refuse)?;
    if history.len() as u64 != checkpoint.epoch {
        return Err(refuse(format!(
            "its history has {} epochs but it was written after epoch {}",
            history.len(),
            checkpoint.epoch
        )));
    }
    let fields = |prefix: &str| -> BTreeMap<String, String> {
        state
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.to_string(), v.clone())))
            .collect()
    };
    match (scheduler, checkpoint.scheduler_epoch) {
        (Some(scheduler), Some(epoch)) => scheduler
            .restore(optimizer, epoch, &fields(SCHEDULER))
            .map_err(|e| refuse(e.to_string()))?,
        (None, None) => {}
        (Some(_), None) => {
            return Err(refuse(
                "it was written by a run without a scheduler, and this run has one".into(),
            ));
        }
        (None, Some(_)) => {
            return Err(refuse(
                "it was written by a run with a scheduler; give this run the same one \
                 (`Run::scheduler`)"
                    .into(),
            ));
        }
    }
    check_callbacks(state, callbacks).map_err(&refuse)?;
    for (i, callback) in callbacks.iter_mut().enumerate() {
        callback.restore(&fields(&format!("callback.{i}.")), source)?;
    }
    Ok((history, mid_epoch(state).map_err(refuse)?))
}

/// Whether the checkpoint's callbacks are this run's, in the same order (each gets the state
/// saved at its place).
fn check_callbacks(
    state: &BTreeMap<String, String>,
    callbacks: &[Box<dyn Callback>],
) -> std::result::Result<(), String> {
    let written: Vec<&str> = state
        .get(KEY_CALLBACKS)
        .map_or(Vec::new(), |names| names.split_terminator('\n').collect());
    let ours: Vec<String> = callbacks.iter().map(|c| c.name()).collect();
    if written != ours {
        return Err(format!(
            "it was written by a run with the callbacks [{}], and this run has [{}]; resume \
             with the same callbacks in the same order",
            written.join(", "),
            ours.join(", ")
        ));
    }
    Ok(())
}

fn mid_epoch(state: &BTreeMap<String, String>) -> std::result::Result<MidEpoch, String> {
    let Some(batches) = state.get(KEY_EPOCH_BATCHES) else {
        return Ok(MidEpoch::default());
    };
    let bad = |key: &str| format!("its field `{key}` is missing or malformed");
    let parse = |key: &str| state.get(key).ok_or_else(|| bad(key));
    Ok(MidEpoch {
        batches: batches.parse().map_err(|_| bad(KEY_EPOCH_BATCHES))?,
        loss_sum: parse(KEY_EPOCH_LOSS_SUM)?
            .parse()
            .map_err(|_| bad(KEY_EPOCH_LOSS_SUM))?,
        count: parse(KEY_EPOCH_COUNT)?
            .parse()
            .map_err(|_| bad(KEY_EPOCH_COUNT))?,
    })
}

/// One line per epoch of `key=value` fields joined by `,`: `epoch`, `lr`, `seconds`, then per
/// phase `train.loss_sum`, `train.count` and `train.<metric>` (the same for `eval`).
fn encode_history(history: &[EpochSummary]) -> String {
    let mut text = String::new();
    for s in history {
        let mut fields = vec![
            format!("epoch={}", s.epoch),
            format!("lr={:e}", s.lr),
            format!("seconds={:e}", s.seconds),
        ];
        for (phase, summary) in [("train", &s.train), ("eval", &s.eval)] {
            fields.push(format!("{phase}.loss_sum={:e}", summary.loss_sum));
            fields.push(format!("{phase}.count={}", summary.count));
            for (name, value) in &summary.values {
                fields.push(format!("{phase}.{name}={value:e}"));
            }
        }
        text.push_str(&fields.join(","));
        text.push('\n');
    }
    text
}

fn decode_history(text: &str) -> std::result::Result<Vec<EpochSummary>, String> {
    text.split_terminator('\n')
        .enumerate()
        .map(|(i, line)| {
            let summary = decode_epoch(line)
                .ok_or_else(|| format!("line {} of its history, `{line}`, is malformed", i + 1))?;
            if summary.epoch != i + 1 {
                return Err(format!(
                    "line {} of its history is epoch {}",
                    i + 1,
                    summary.epoch
                ));
            }
            Ok(summary)
        })
        .collect()
}

fn decode_epoch(line: &str) -> Option<EpochSummary> {
    let mut summary = EpochSummary {
        epoch: 0,
        train: PhaseSummary::default(),
        eval: PhaseSummary::default(),
        lr: f64::NAN,
        seconds: f64::NAN,
    };
    let mut seen = 0;
    for field in line.split(',') {
        let (key, value) = field.split_once('=')?;
        match key {
            "epoch" => summary.epoch = value.parse().ok()?,
            "lr" => summary.lr = value.parse().ok()?,
            "seconds" => summary.seconds = value.parse().ok()?,
            _ => {
                let (phase, name) = key.split_once('.')?;
                let phase = match phase {
                    "train" => &mut summary.train,
                    "eval" => &mut summary.eval,
                    _ => return None,
                };
                match name {
                    "loss_sum" => phase.loss_sum = value.parse().ok()?,
                    "count" => phase.count = value.parse().ok()?,
                    _ => phase.values.push((name.to_string(), value.parse().ok()?)),
                }
            }
        }
        seen += 1;
    }
    (seen >= 7).then_some(summary)
}
