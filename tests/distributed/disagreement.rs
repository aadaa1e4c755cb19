//! Ranks that disagree, and ranks that die: what every rank sees. Each scenario runs on the
//! ranks (`rank_*`) and writes what it saw to `rank{r}.txt`; each check runs the launcher
//! side and reads those reports.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rumus::data::DataLoader;
use rumus::distributed::{
    Collective, DistributedDataParallel, Elements, Reduction, ZeroRedundancyOptimizer, all_reduce,
    broadcast_, shard,
};
use rumus::nn::{Linear, Module};
use rumus::optim::{Sgd, SgdConfig};
use rumus::prelude::*;

use super::launch;
use super::training::load_digits;

fn report(out: &Path, rank: usize, text: &str) {
    std::fs::write(out.join(format!("rank{rank}.txt")), text).unwrap();
}

fn reports(out: &Path, ranks: usize) -> Vec<String> {
    (0..ranks)
        .map(|r| {
            std::fs::read_to_string(out.join(format!("rank{r}.txt")))
                .unwrap_or_else(|_| panic!("rank {r} wrote no report"))
        })
        .collect()
}

fn assert_contains(text: &str, expected: &str) {
    assert!(text.contains(expected), "expected `{expected}` in:\n{text}");
}

/// A sum over the ranks that every rank must agree on: proof the communicator still works
/// (and no buffer was overrun) after the refused calls.
fn still_sums(comm: &dyn Collective) {
    let world = comm.world_size() as f32;
    let ones = DynTensor::from_vec(vec![1f32; 3], &[3]).unwrap();
    let sum = all_reduce(comm, &ones, Reduction::Sum).unwrap();
    assert_eq!(sum.to_vec::<f32>().unwrap(), vec![world; 3]);
}

pub fn rank_mismatched_calls(comm: &dyn Collective, out: &Path) {
    let rank = comm.rank();
    let mut seen = String::new();
    // Rank 0 passes 4 elements, rank 1 100,000 (MPI would write 100,000 into rank 0's 4).
    let n = if rank == 0 { 4 } else { 100_000 };
    let tensor = DynTensor::from_vec(vec![1f32; n], &[n]).unwrap();
    writeln!(
        seen,
        "{}",
        all_reduce(comm, &tensor, Reduction::Sum).unwrap_err()
    )
    .unwrap();
    // The reverse through a broadcast: the receivers keep their values.
    let n = if rank == 0 { 100_000 } else { 4 };
    let tensor = DynTensor::from_vec(vec![rank as f32; n], &[n]).unwrap();
    writeln!(seen, "{}", broadcast_(comm, &tensor, 0).unwrap_err()).unwrap();
    assert_eq!(tensor.to_vec::<f32>().unwrap(), vec![rank as f32; n]);
    // Same count, different element types.
    let tensor = if rank == 0 {
        DynTensor::from_vec(vec![1f32; 4], &[4]).unwrap()
    } else {
        DynTensor::from_vec(vec![1f64; 4], &[4]).unwrap()
    };
    writeln!(
        seen,
        "{}",
        all_reduce(comm, &tensor, Reduction::Sum).unwrap_err()
    )
    .unwrap();
    // A root only rank 1 gets wrong: both fail, neither waits for the other.
    let root = if rank == 0 { 0 } else { 7 };
    let mut data = [0f32; 4];
    writeln!(
        seen,
        "{}",
        comm.broadcast(Elements::F32(&mut data), root).unwrap_err()
    )
    .unwrap();
    // Different counts per rank in an all-gather, each list valid on its own rank (rank 1
    // would receive 5 elements where rank 0 sends 4).
    let counts = if rank == 0 { vec![2, 2] } else { vec![3, 2] };
    let mut local = vec![0f32; 2];
    let mut gathered = vec![0f32; counts.iter().sum()];
    let gather = comm.all_gather(
        Elements::F32(&mut local),
        Elements::F32(&mut gathered),
        &counts,
    );
    writeln!(seen, "{}", gather.unwrap_err()).unwrap();
    still_sums(comm);
    report(out, rank, &seen);
}

pub fn mismatched_calls_are_refused_on_every_rank(mpirun: &Path) {
    let out = launch(mpirun, 2, "mismatched_calls", &[]);
    for seen in reports(&out, 2) {
        assert_contains(
            &seen,
            "rank 1 passes 100000 elements to all_reduce_sum where rank 0 passes 4",
        );
        assert_contains(
            &seen,
            "rank 1 passes 4 elements to broadcast where rank 0 passes 100000",
        );
        assert_contains(
            &seen,
            "rank 1 passes f64 elements to all_reduce_sum where rank 0 passes f32",
        );
        assert_contains(&seen, "expects other per-rank counts in all_gather");
    }
    let seen = reports(&out, 2);
    assert_contains(&seen[0], "rank 1's arguments failed its own checks");
    assert_contains(
        &seen[1],
        "root rank 7 does not exist in a world of 2 processes",
    );
}

pub fn rank_mismatched_models(comm: Arc<dyn Collective>, out: &Path) {
    let rank = comm.rank();
    manual_seed(rank as u64);
    let model: Box<dyn Module> = if rank == 0 {
        Box::new(Linear::<16, 32>::new().unwrap())
    } else {
        Box::new(Linear::<16, 48>::new().unwrap())
    };
    let before: Vec<Vec<f32>> = model
        .parameters()
        .iter()
        .map(|p| p.to_vec().unwrap())
        .collect();
    let mut seen = String::new();
    let ddp = DistributedDataParallel::new(comm.clone(), &*model);
    writeln!(seen, "{}", ddp.err().expect("different models are refused")).unwrap();
    let zero = ZeroRedundancyOptimizer::new(comm.clone(), model.parameters(), |own| {
        Sgd::new(own, SgdConfig::default())
    });
    writeln!(
        seen,
        "{}",
        zero.err().expect("different parameters are refused")
    )
    .unwrap();
    // Nothing was overwritten by rank 0's parameters.
    for (param, old) in model.parameters().iter().zip(&before) {
        assert_eq!(&param.to_vec::<f32>().unwrap(), old);
    }
    still_sums(&*comm);
    report(out, rank, &seen);
}

pub fn mismatched_models_fail_at_construction(mpirun: &Path) {
    let out = launch(mpirun, 2, "mismatched_models", &[]);
    for seen in reports(&out, 2) {
        assert_contains(&seen, "DistributedDataParallel::new");
        assert_contains(&seen, "(f32 [48, 16]) where rank 0 has");
        assert_contains(&seen, "(f32 [32, 16]) (tensor 0 in declaration order)");
        assert_contains(&seen, "ZeroRedundancyOptimizer::new");
        assert_contains(&seen, "rank 1 has `parameter 0` (f32 [48, 16])");
    }
}

pub fn rank_mismatched_seeds(comm: Arc<dyn Collective>, out: &Path) {
    let rank = comm.rank();
    let (train, _) = load_digits().unwrap();
    let model = Linear::<64, 10>::new().unwrap();
    let ddp = DistributedDataParallel::new(comm.clone(), &model).unwrap();
    let mut seen = String::new();
    // Checked when the loader is built.
    let loader = DataLoader::new(train.clone(), 8)
        .unwrap()
        .shuffle(7 + rank as u64);
    writeln!(
        seen,
        "{}",
        shard(loader, &*comm).err().expect("seeds differ")
    )
    .unwrap();
    // Sharded by hand: checked at the first collective of the epoch.
    let mut loader = DataLoader::new(train.clone(), 8)
        .unwrap()
        .shuffle(7 + rank as u64)
        .shard(rank, comm.world_size())
        .unwrap();
    let batch = loader.epoch().next().unwrap().unwrap();
    let loss = model
        .forward(&batch.input::<(Dyn, D<64>)>().unwrap())
        .sum_all();
    writeln!(
        seen,
        "{}",
        ddp.backward(loss.as_dyn()).expect_err("seeds differ")
    )
    .unwrap();
    // The same seed everywhere trains.
    let mut loader = shard(DataLoader::new(train, 8).unwrap().shuffle(7), &*comm).unwrap();
    let batch = loader.epoch().next().unwrap().unwrap();
    let loss = model
        .forward(&batch.input::<(Dyn, D<64>)>().unwrap())
        .sum_all();
    ddp.backward(loss.as_dyn()).unwrap();
    report(out, rank, &seen);
}

pub fn mismatched_seeds_are_named(mpirun: &Path) {
    let out = launch(mpirun, 2, "mismatched_seeds", &[]);
    for seen in reports(&out, 2) {
        let lines: Vec<&str> = seen.lines().collect();
        assert_eq!(lines.len(), 2, "{seen}");
        for line in lines {
            assert_contains(
                line,
                "rank 1 draws its sharded batches from 1438 items in global batches of 16",
            );
            assert_contains(
                line,
                "shuffled with seed 8 (epoch 0) where rank 0 draws them",
            );
            assert_contains(line, "shuffled with seed 7 (epoch 0)");
        }
    }
}

pub fn rank_killed_default(comm: Arc<dyn Collective>, out: &Path) {
    let rank = comm.rank();
    let ones = DynTensor::from_vec(vec![1f32; 3], &[3]).unwrap();
    all_reduce(&*comm, &ones, Reduction::Sum).unwrap();
    if rank == comm.world_size() - 1 {
        let _ = std::process::Command::new("kill")
            .args(["-9", &std::process::id().to_string()])
            .status();
        std::thread::sleep(Duration::from_secs(60));
    }
    let error = all_reduce(&*comm, &ones, Reduction::Sum).unwrap_err();
    report(out, rank, &error.to_string());
    // MPI_Finalize would wait for the dead rank; leave without it.
    std::process::exit(0);
}

/// With the default settings (a 300 s timeout), the survivors must learn of the death from
/// the heartbeat: the launcher gives up on a job after 240 s.
pub fn killed_rank_is_noticed_with_default_settings(mpirun: &Path) {
    let out = launch(mpirun, 3, "killed_default", &["--enable-recovery"]);
    for seen in reports(&out, 2) {
        assert_contains(&seen, "stopped answering the heartbeat");
    }
}

pub fn rank_slow(comm: Arc<dyn Collective>, out: &Path) {
    let rank = comm.rank();
    if rank == 1 {
        // Busy (here: asleep) for more than twice the liveness limit the scenario sets.
        std::thread::sleep(Duration::from_secs(5));
    }
    still_sums(&*comm);
    report(out, rank, "summed");
}

/// A rank that is only slow keeps answering the heartbeat from its own thread.
pub fn slow_rank_is_not_taken_for_dead(mpirun: &Path) {
    let out = launch(mpirun, 2, "slow", &[]);
    for seen in reports(&out, 2) {
        assert_eq!(seen, "summed");
    }
}

/// One rank's call in [`rank_random_calls`].
#[derive(Debug, Clone, PartialEq)]
struct Call {
    /// 0: all-reduce, 1: broadcast, 2: all-gather.
    op: u64,
    /// 0: f32, 1: f64, 2: i64, 3: u8.
    dtype: u64,
    /// Elements this rank passes (all-gather: both ranks' counts).
    counts: [usize; 2],
    /// A broadcast's root; 2 is no rank of a world of 2.
    root: usize,
}

/// SplitMix64: the same stream on every rank from the same seed.
fn mix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Case `case`'s calls on ranks 0 and 1: the same call, or with one field changed on rank 1.
fn random_calls(case: u64) -> [Call; 2] {
    let mut state = case;
    let mut pick = |n: u64| mix(&mut state) % n;
    let base = Call {
        op: pick(3),
        dtype: pick(4),
        counts: [pick(40) as usize, pick(40) as usize],
        root: pick(3) as usize,
    };
    let mut other = base.clone();
    match pick(6) {
        0 => other.op = (other.op + 1 + pick(2)) % 3,
        1 => other.dtype = (other.dtype + 1 + pick(3)) % 4,
        2 => other.counts[0] += 1 + pick(1000) as usize,
        3 => other.counts[1] = (other.counts[1] + 1 + pick(5) as usize) % 50,
        4 => other.root = (other.root + 1) % 3,
        _ => {}
    }
    [base, other]
}

impl Call {
    /// The call with the fields its collective ignores cleared, to tell whether two ranks'
    /// calls really differ.
    fn effective(&self) -> Call {
        Call {
            counts: [
                self.counts[0],
                if self.op == 2 { self.counts[1] } else { 0 },
            ],
            root: if self.op == 1 { self.root } else { 0 },
            ..self.clone()
        }
    }
}

/// Whether `call` passes a rank's own checks in a world of 2.
fn locally_valid(call: &Call) -> bool {
    match call.op {
        0 => call.dtype != 3,
        1 => call.root < 2,
        _ => true,
    }
}

/// Rank `rank`'s element `i` in a case: distinct per rank, exact in every type.
fn value(rank: usize, i: usize) -> f64 {
    ((rank + 1) * 100 + i % 100) as f64
}

/// Runs `call` on `comm` with this rank's values, returning the result as f64s.
fn run_call(comm: &dyn Collective, call: &Call) -> rumus::Result<Vec<f64>> {
    let rank = comm.rank();
    let own = if call.op == 2 {
        call.counts[rank]
    } else {
        call.counts[0]
    };
    let total = call.counts[0] + call.counts[1];
    let mine: Vec<f64> = (0..own).map(|i| value(rank, i)).collect();
    macro_rules! run {
        ($variant:ident, $t:ty) => {{
            let mut data: Vec<$t> = mine.iter().map(|&v| v as $t).collect();
            match call.op {
                0 => comm.all_reduce_sum(Elements::$variant(&mut data))?,
                1 => comm.broadcast(Elements::$variant(&mut data), call.root)?,
                _ => {
                    let mut gathered: Vec<$t> = vec![Default::default(); total];
                    comm.all_gather(
                        Elements::$variant(&mut data),
                        Elements::$variant(&mut gathered),
                        &call.counts,
                    )?;
                    data = gathered;
                }
            }
            Ok(data.iter().map(|&v| v as f64).collect())
        }};
    }
    match call.dtype {
        0 => run!(F32, f32),
        1 => run!(F64, f64),
        2 => run!(I64, i64),
        _ => run!(U8, u8),
    }
}

/// What `call` gives when both ranks make it, computed without any collective.
fn expected(call: &Call) -> Vec<f64> {
    // `as u8` saturates.
    let wrap = |v: f64| if call.dtype == 3 { v.min(255.0) } else { v };
    match call.op {
        0 => (0..call.counts[0])
            .map(|i| value(0, i) + value(1, i))
            .collect(),
        1 => (0..call.counts[0])
            .map(|i| wrap(value(call.root, i)))
            .collect(),
        _ => (0..2)
            .flat_map(|r| (0..call.counts[r]).map(move |i| wrap(value(r, i))))
            .collect(),
    }
}

/// Hundreds of random pairs of calls, each the same on both ranks or differing in one
/// argument: every pair either gives the right result on both ranks or an error on both,
/// and the communicator stays usable (no buffer overrun, no rank left waiting).
pub fn rank_random_calls(comm: &dyn Collective, out: &Path) {
    let rank = comm.rank();
    let (mut agreed, mut refused) = (0, 0);
    for case in 0..400 {
        let calls = random_calls(case);
        let outcome = run_call(comm, &calls[rank]);
        let valid = calls.iter().all(locally_valid);
        if valid && calls[0].effective() == calls[1].effective() {
            let found = outcome.unwrap_or_else(|e| panic!("case {case} {:?}: {e}", calls[0]));
            assert_eq!(found, expected(&calls[0]), "case {case} {:?}", calls[0]);
            agreed += 1;
        } else {
            assert!(outcome.is_err(), "case {case} {calls:?} was not refused");
            refused += 1;
        }
    }
    still_sums(comm);
    report(out, rank, &format!("{agreed} agreed, {refused} refused"));
}

pub fn random_calls_are_right_or_refused_on_both_ranks(mpirun: &Path) {
    let out = launch(mpirun, 2, "random_calls", &[]);
    let seen = reports(&out, 2);
    assert_eq!(seen[0], seen[1]);
    // Both kinds of case were exercised.
    let counts: Vec<usize> = seen[0]
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    assert!(counts.iter().all(|&n| n > 50), "{}", seen[0]);
}
