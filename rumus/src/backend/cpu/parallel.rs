//! When to use the second core. Splitting tiny tensors across threads costs more than it
//! saves (rayon's fork-join is a few microseconds), so work is split only above a grain size.

use rayon::prelude::*;

/// Elements below which a loop stays on the calling thread.
pub const PARALLEL_GRAIN: usize = 1 << 15;

/// Whether `work` element visits are worth handing to rayon: above the grain, and only when
/// rayon has more than one thread. With one thread a parallel loop run from outside the pool
/// still hands its work to the pool's thread and sleeps until it is done (two context
/// switches an op: 11% of an MLP step's samples under `perf` with `RAYON_NUM_THREADS=1`).
pub fn worth_splitting(work: usize) -> bool {
    work >= PARALLEL_GRAIN && rayon::current_num_threads() > 1
}

/// Runs `f(row_index, row)` for every `row_len`-sized row of `out`, in parallel when the
/// total size is worth it.
pub fn for_each_row<O: Send>(out: &mut [O], row_len: usize, f: impl Fn(usize, &mut [O]) + Sync) {
    if row_len == 0 {
        return;
    }
    if worth_splitting(out.len()) && out.len() / row_len > 1 {
        let rows_per_task = (PARALLEL_GRAIN / row_len).max(1);
        out.par_chunks_mut(rows_per_task * row_len)
            .enumerate()
            .for_each(|(task, chunk)| {
                for (i, row) in chunk.chunks_mut(row_len).enumerate() {
                    f(task * rows_per_task + i, row);
                }
            });
    } else {
        for (i, row) in out.chunks_mut(row_len).enumerate() {
            f(i, row);
        }
    }
}
