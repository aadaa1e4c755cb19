//! The fingerprint every rank sends before a collective moves data.
//!
//! MPI trusts each rank's count: a rank that passes 4 elements to an all-reduce whose peer
//! passes 100,000 gets 100,000 elements written into its 4-element buffer, corrupting the
//! heap from safe code. So an engine first all-gathers a few words from every rank (which
//! collective, element type, count, root or counts, and the order of the latest sharded
//! epoch), and every rank compares them before any data moves. The gather is the same size
//! on every rank whatever the call, so it cannot itself overrun, and every rank sees the
//! same words, so all of them fail together with the same message, naming the first rank
//! that differs from rank 0 and how.

use super::collective::{Elements, distributed_error};
use crate::data::shard_order::{self, ShardOrder};
use crate::error::Result;

/// Which collective a rank is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    AllReduceSum = 1,
    Broadcast = 2,
    AllGather = 3,
    Barrier = 4,
}

impl Op {
    fn name(code: i64) -> &'static str {
        match code {
            1 => "all_reduce_sum",
            2 => "broadcast",
            3 => "all_gather",
            4 => "barrier",
            _ => "an unknown collective",
        }
    }
}

/// One rank's description of the collective it is about to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    op: Op,
    /// The element type's code (0 when the collective moves no data).
    dtype: i64,
    /// Elements this rank passes.
    count: usize,
    /// The root rank of a broadcast; a hash of every rank's count for an all-gather.
    extra: u64,
    /// How this process drew its latest sharded epoch.
    shard: Option<ShardOrder>,
    /// Whether this rank's arguments passed its own checks.
    valid: bool,
}

/// Words per rank in the gathered fingerprints.
pub(crate) const WORDS: usize = 10;

impl Fingerprint {
    /// The fingerprint of `op` over `data` (`None`: a barrier), with `extra` as described
    /// on the field.
    pub(crate) fn new(op: Op, data: Option<&Elements<'_>>, extra: u64) -> Fingerprint {
        Fingerprint {
            op,
            dtype: data.map_or(0, dtype_code),
            count: data.map_or(0, Elements::len),
            extra,
            shard: shard_order::latest(),
            valid: true,
        }
    }

    /// The same fingerprint, marked as that of a rank whose arguments failed its own checks
    /// when `valid` is false (so that the others fail with it instead of waiting for it).
    pub(crate) fn valid(self, valid: bool) -> Fingerprint {
        Fingerprint { valid, ..self }
    }

    /// The fingerprint as the words one rank contributes to the gather.
    pub(crate) fn words(&self) -> [i64; WORDS] {
        let shard = self.shard.unwrap_or(ShardOrder {
            items: usize::MAX,
            global_batch: 0,
            seed: None,
            epoch: 0,
        });
        [
            self.op as i64,
            self.dtype,
            self.count as i64,
            self.extra as i64,
            shard.items as i64,
            shard.global_batch as i64,
            i64::from(shard.seed.is_some()),
            shard.seed.unwrap_or(0) as i64,
            // The epoch only matters to a shuffled order.
            if shard.seed.is_some() {
                shard.epoch as i64
            } else {
                0
            },
            i64::from(self.valid),
        ]
    }
}

/// A hash of every rank's count in an all-gather, so ranks that disagree on them are caught.
pub(crate) fn counts_hash(counts: &[usize]) -> u64 {
    // FNV-1a over the counts' bytes: no need for more than telling lists apart.
    counts
        .iter()
        .flat_map(|c| (*c as u64).to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// Checks that every rank's words in `gathered` (rank `r` at `r * WORDS`) equal rank 0's.
pub(crate) fn check_agreement(op: &'static str, gathered: &[i64]) -> Result<()> {
    if let Some(r) = gathered.chunks_exact(WORDS).position(|w| w[WORDS - 1] == 0) {
        return Err(distributed_error(
            op,
            format!(
                "rank {r}'s arguments failed its own checks (its error says which); no rank moved data"
            ),
        ));
    }
    let mut ranks = gathered.chunks_exact(WORDS);
    let Some(first) = ranks.next() else {
        return Ok(());
    };
    for (r, words) in ranks.enumerate() {
        if words != first {
            return Err(distributed_error(
                op,
                format!(
                    "the ranks disagree before any data moved: {}",
                    difference(r + 1, words, first)
                ),
            ));
        }
    }
    Ok(())
}

/// What differs between rank `r`'s words and rank 0's, in words a user acts on.
fn difference(r: usize, words: &[i64], first: &[i64]) -> String {
    let field = (0..WORDS).find(|&i| words[i] != first[i]).unwrap_or(0);
    let (op, op0) = (Op::name(words[0]), Op::name(first[0]));
    match field {
        0 => format!(
            "rank {r} called {op} where rank 0 called {op0}; every rank must call the same collectives in the same order"
        ),
        1 => format!(
            "rank {r} passes {} elements to {op} where rank 0 passes {}; convert every rank's tensor to the same dtype",
            dtype_name(words[1]),
            dtype_name(first[1])
        ),
        2 | 3 if first[0] == Op::AllGather as i64 => format!(
            "rank {r} expects other per-rank counts in all_gather than rank 0 does ({} elements in all where rank 0 expects {}); every rank must pass the same counts",
            words[2], first[2]
        ),
        2 => format!(
            "rank {r} passes {} elements to {op} where rank 0 passes {}; every rank must pass a tensor of the same shape (the same model, the same parameter)",
            words[2], first[2]
        ),
        3 if first[0] == Op::Broadcast as i64 => format!(
            "rank {r} broadcasts from root {} where rank 0 broadcasts from root {}; every rank must name the same root",
            words[3], first[3]
        ),
        3 => format!("rank {r} passes other arguments to {op} than rank 0 does"),
        _ => format!(
            "rank {r} draws its sharded batches {} where rank 0 draws them {}, so their slices would overlap or miss items; every rank must shard the same dataset with the same batch size and shuffle seed",
            describe_shard(words),
            describe_shard(first)
        ),
    }
}

fn describe_shard(words: &[i64]) -> String {
    if words[4] as u64 == u64::MAX {
        return "from no sharded loader".to_string();
    }
    let order = if words[6] != 0 {
        format!(
            "shuffled with seed {} (epoch {})",
            words[7] as u64, words[8]
        )
    } else {
        "unshuffled".to_string()
    };
    format!(
        "from {} items in global batches of {}, {order}",
        words[4], words[5]
    )
}

fn dtype_code(data: &Elements<'_>) -> i64 {
    match data {
        Elements::F32(_) => 1,
        Elements::F64(_) => 2,
        Elements::I64(_) => 3,
        Elements::U8(_) => 4,
    }
}

fn dtype_name(code: i64) -> &'static str {
    match code {
        1 => "f32",
        2 => "f64",
        3 => "i64",
        4 => "u8",
        _ => "no",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(op: Op, data: &mut [f32], extra: u64) -> [i64; WORDS] {
        Fingerprint::new(op, Some(&Elements::F32(data)), extra).words()
    }

    #[test]
    fn equal_calls_agree_and_the_first_difference_is_named() {
        let a = words(Op::AllReduceSum, &mut [0.0; 4], 0);
        let b = words(Op::AllReduceSum, &mut [0.0; 7], 0);
        assert!(check_agreement("all_reduce_sum", &[a, a, a].concat()).is_ok());
        let message = check_agreement("all_reduce_sum", &[a, a, b].concat())
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("rank 2 passes 7 elements to all_reduce_sum where rank 0 passes 4"),
            "{message}"
        );
        let c = words(Op::Broadcast, &mut [0.0; 4], 1);
        let message = check_agreement("broadcast", &[a, c].concat())
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("rank 1 called broadcast where rank 0 called all_reduce_sum"),
            "{message}"
        );
    }

    #[test]
    fn different_shuffle_seeds_are_named() {
        let mut a = words(Op::AllReduceSum, &mut [0.0; 4], 0);
        let mut b = a;
        for (w, seed) in [(&mut a, 7i64), (&mut b, 8)] {
            w[4..WORDS - 1].copy_from_slice(&[64, 16, 1, seed, 0]);
        }
        let message = check_agreement("all_reduce_sum", &[a, b].concat())
            .unwrap_err()
            .to_string();
        assert!(message.contains("shuffled with seed 8"), "{message}");
        assert!(message.contains("shuffled with seed 7"), "{message}");
    }

    #[test]
    fn a_rank_with_invalid_arguments_fails_every_rank() {
        let a = words(Op::Broadcast, &mut [0.0; 4], 5);
        let b = Fingerprint::new(Op::Broadcast, Some(&Elements::F32(&mut [0.0; 4])), 5)
            .valid(false)
            .words();
        let message = check_agreement("broadcast", &[a, b].concat())
            .unwrap_err()
            .to_string();
        assert!(message.contains("rank 1's arguments failed"), "{message}");
    }
}
