//! What a [`Trainer`](super::Trainer) keeps in a checkpoint's
//! [`loop_state`](crate::io::Checkpoint::loop_state) beyond the model and the optimizer: the
//! history so far (so a resumed run returns, logs and plots every epoch), the scheduler's
//! fields and early stopping's. Numbers are written as Rust prints them (`{:e}`), the
//! shortest text that parses back to the same `f64`, so a resumed run continues bit for bit.

use std::collections::BTreeMap;

use super::early_stopping::EarlyStopping;
use super::metrics::{EpochSummary, Metrics};
use crate::error::{Error, Result};
use crate::io::Checkpoint;
use crate::optim::{Optimizer, Scheduler};

const KEY_HISTORY: &str = "history";
const SCHEDULER: &str = "scheduler.";
const EARLY_STOPPING: &str = "early_stopping.";

/// The loop state of a run after the last epoch of `history`.
pub(super) fn capture(
    history: &[EpochSummary],
    scheduler: Option<&dyn Scheduler>,
    early_stopping: Option<&EarlyStopping>,
) -> BTreeMap<String, String> {
    let mut state = BTreeMap::from([(KEY_HISTORY.to_string(), encode_history(history))]);
    let mut put = |prefix: &str, fields: BTreeMap<String, String>| {
        state.extend(fields.into_iter().map(|(k, v)| (format!("{prefix}{k}"), v)));
    };
    if let Some(scheduler) = scheduler {
        put(SCHEDULER, scheduler.state());
    }
    if let Some(early_stopping) = early_stopping {
        put(EARLY_STOPPING, early_stopping.state());
    }
    state
}

/// Puts back what [`capture`] saved (the model, optimizer and generator are restored by
/// [`Checkpoint::restore`] before) and returns the history. A checkpoint without a
/// scheduler for a run with one, or the other way round, is an error: the rates would not
/// follow the run that wrote it.
pub(super) fn restore(
    checkpoint: &Checkpoint,
    optimizer: &mut dyn Optimizer,
    scheduler: Option<&mut dyn Scheduler>,
    early_stopping: Option<&mut EarlyStopping>,
) -> Result<Vec<EpochSummary>> {
    let source = checkpoint.source.as_deref().unwrap_or("the checkpoint");
    let refuse = |message: String| Error::InvalidArgument {
        op: "Trainer::resume_from",
        message: format!("{source}: {message}"),
    };
    let history = checkpoint.loop_state.get(KEY_HISTORY).ok_or_else(|| {
        refuse(
            "it holds no training history; resume from a checkpoint written by the trainer \
             (`Trainer::checkpoint` or `EpochEnd::checkpoint`)"
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
        checkpoint
            .loop_state
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
    if let Some(early_stopping) = early_stopping {
        early_stopping.restore(&fields(EARLY_STOPPING), source)?;
    }
    Ok(history)
}

/// One line per epoch: `epoch,loss_sum,correct,count,loss_sum,correct,count,lr,seconds`
/// (train, then evaluation).
fn encode_history(history: &[EpochSummary]) -> String {
    history
        .iter()
        .map(|s| {
            format!(
                "{},{:e},{},{},{:e},{},{},{:e},{:e}\n",
                s.epoch,
                s.train.loss_sum,
                s.train.correct,
                s.train.count,
                s.eval.loss_sum,
                s.eval.correct,
                s.eval.count,
                s.lr,
                s.seconds
            )
        })
        .collect()
}

fn decode_history(text: &str) -> std::result::Result<Vec<EpochSummary>, String> {
    text.split_terminator('\n')
        .enumerate()
        .map(|(i, line)| {
            let bad = || format!("line {} of its history, `{line}`, is malformed", i + 1);
            let fields: Vec<&str> = line.split(',').collect();
            let [epoch, tl, tc, tn, el, ec, en, lr, seconds] = fields[..] else {
                return Err(bad());
            };
            let float = |t: &str| t.parse::<f64>().map_err(|_| bad());
            let whole = |t: &str| t.parse::<usize>().map_err(|_| bad());
            let metrics = |l, c, n| -> std::result::Result<Metrics, String> {
                Ok(Metrics {
                    loss_sum: float(l)?,
                    correct: whole(c)?,
                    count: whole(n)?,
                })
            };
            let summary = EpochSummary {
                epoch: whole(epoch)?,
                train: metrics(tl, tc, tn)?,
                eval: metrics(el, ec, en)?,
                lr: float(lr)?,
                seconds: float(seconds)?,
            };
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
