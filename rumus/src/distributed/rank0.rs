//! Work that one rank does for all (writing a checkpoint, a log line, a plot), with its
//! outcome shared: if rank 0 fails, every rank returns the error, instead of the others
//! going on to the next collective and waiting there until the timeout.

use std::path::Path;

use super::collective::{Collective, Elements, distributed_error};
use crate::error::Result;
use crate::io::Checkpoint;

/// Runs `work` on rank 0 only, then tells every rank how it went: `Ok(Some(value))` on rank
/// 0, `Ok(None)` elsewhere, and an error on every rank when rank 0's work failed.
pub fn on_rank0<T>(comm: &dyn Collective, work: impl FnOnce() -> Result<T>) -> Result<Option<T>> {
    let outcome = if comm.rank() == 0 { Some(work()) } else { None };
    let message = match &outcome {
        Some(Err(e)) => e.to_string().into_bytes(),
        _ => Vec::new(),
    };
    let mut length = [message.len() as i64];
    comm.broadcast(Elements::I64(&mut length), 0)?;
    if length[0] == 0 {
        return match outcome {
            Some(result) => result.map(Some),
            None => Ok(None),
        };
    }
    let mut text = if comm.rank() == 0 {
        message
    } else {
        vec![0u8; length[0] as usize]
    };
    comm.broadcast(Elements::U8(&mut text), 0)?;
    match outcome {
        Some(Err(e)) => Err(e),
        _ => Err(distributed_error(
            "on_rank0",
            format!("rank 0 failed: {}", String::from_utf8_lossy(&text)),
        )),
    }
}

/// Writes `checkpoint` (atomically, as [`Checkpoint::save`] does) from rank 0 only. Under
/// data-parallel training every rank holds the same model and optimizer state, so one file
/// serves any number of ranks: to resume, every rank loads it and calls
/// [`Checkpoint::restore`], whatever the world size then. A sharded optimizer's checkpoint
/// comes from [`ZeroRedundancyOptimizer::capture`](super::ZeroRedundancyOptimizer::capture)
/// (a collective every rank calls) and is written the same way.
pub fn save_checkpoint(
    comm: &dyn Collective,
    checkpoint: &Checkpoint,
    path: impl AsRef<Path>,
) -> Result<()> {
    on_rank0(comm, || checkpoint.save(path.as_ref())).map(|_| ())
}
