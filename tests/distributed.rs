//! Data-parallel training under `mpirun`: this file is both the launcher (run by `cargo
//! test`) and the ranks (the same binary started by `mpirun` with `RUMUS_MPI_SCENARIO`
//! set). Each launcher check starts a job, waits for it under a watchdog, and compares what
//! the ranks wrote with a single-process computation of the same thing.

#[allow(dead_code)]
#[path = "../examples/digits/training.rs"]
mod training;

#[path = "distributed/disagreement.rs"]
mod disagreement;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rumus::data::{Batch, DataLoader};
use rumus::distributed::{
    Collective, DistributedDataParallel, Mpi, Reduction, ZeroRedundancyOptimizer, all_gather,
    all_reduce, broadcast_, on_rank0, save_checkpoint,
};
use rumus::io::Checkpoint;
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;
use rumus::train::classification;
use training::{Mlp, load_digits};

const STEPS: usize = 6;
const PER_RANK_BATCH: usize = 8;

fn main() {
    if let Ok(scenario) = std::env::var("RUMUS_MPI_SCENARIO") {
        let out = PathBuf::from(std::env::var("RUMUS_MPI_OUT").expect("output directory"));
        rank_main(&scenario, &out);
        return;
    }
    let Some(mpirun) = find_mpirun() else {
        if std::env::var_os("RUMUS_REQUIRE_MPI").is_some() {
            panic!("mpirun not found; install openmpi-bin");
        }
        println!("distributed tests skipped: no mpirun (apt-get install openmpi-bin)");
        return;
    };
    let checks: [Check; 14] = [
        (
            "collectives match their definitions on 2 and 4 ranks",
            collectives_match,
        ),
        (
            "2-rank training equals the single process bit for bit",
            two_ranks_bit_identical,
        ),
        (
            "4-rank training equals the single process on the global batch",
            four_ranks_match,
        ),
        (
            "gradient accumulation over 2 ranks equals one big batch",
            accumulation_matches,
        ),
        (
            "a killed rank makes the others fail within the timeout",
            killed_rank_is_an_error,
        ),
        (
            "a killed rank is noticed by the heartbeat with default settings",
            disagreement::killed_rank_is_noticed_with_default_settings,
        ),
        (
            "a rank busy for longer than the liveness limit is not taken for dead",
            disagreement::slow_rank_is_not_taken_for_dead,
        ),
        (
            "ranks passing different counts, dtypes or roots are refused on every rank",
            disagreement::mismatched_calls_are_refused_on_every_rank,
        ),
        (
            "random pairs of calls are right on both ranks or refused on both",
            disagreement::random_calls_are_right_or_refused_on_both_ranks,
        ),
        (
            "ranks with different models fail at construction",
            disagreement::mismatched_models_fail_at_construction,
        ),
        (
            "ranks sharding with different seeds fail, naming both",
            disagreement::mismatched_seeds_are_named,
        ),
        (
            "sharded Adam state (ZeRO 1) trains bit for bit like plain Adam",
            zero_matches_plain_adam,
        ),
        (
            "a rank-0 checkpoint of 2 ranks resumes on 4",
            checkpoint_resumes_on_another_world_size,
        ),
        (
            "a sharded optimizer's checkpoint resumes sharded on 4 ranks and unsharded",
            sharded_checkpoint_resumes_anywhere,
        ),
    ];
    // `cargo test --test distributed -- WORDS` runs the checks whose names contain WORDS.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut passed = 0;
    for (name, check) in checks {
        if !filter.iter().all(|f| name.contains(f.as_str())) {
            continue;
        }
        print!("test {name} ... ");
        check(&mpirun);
        println!("ok");
        passed += 1;
    }
    println!("\ntest result: ok. {passed} passed");
}

/// A launcher check: its name, and the function that runs it with `mpirun`'s path.
type Check = (&'static str, fn(&Path));

fn find_mpirun() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join("mpirun"))
        .find(|p| p.is_file())
}

/// Runs `scenario` on `ranks` processes and returns the directory they wrote to.
fn launch(mpirun: &Path, ranks: usize, scenario: &str, extra: &[&str]) -> PathBuf {
    launch_with(mpirun, ranks, scenario, extra, &[])
}

fn launch_with(
    mpirun: &Path,
    ranks: usize,
    scenario: &str,
    extra: &[&str],
    env: &[(&str, &Path)],
) -> PathBuf {
    let out = std::env::temp_dir().join(format!(
        "rumus-mpi-{scenario}-{ranks}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let mut child = Command::new(mpirun)
        .args(["--oversubscribe", "-np", &ranks.to_string()])
        .args(extra)
        .arg(std::env::current_exe().unwrap())
        .env("RUMUS_MPI_SCENARIO", scenario)
        .env("RUMUS_MPI_OUT", &out)
        // CI runs as root; OpenMPI refuses that without both variables.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // Two processes on two cores: one compute thread each.
        .env("RAYON_NUM_THREADS", "1")
        .envs(env.iter().copied())
        .spawn()
        .expect("start mpirun");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(240) {
            let _ = child.kill();
            panic!("`{scenario}` on {ranks} ranks still running after 240 s: a hang");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if !scenario.starts_with("killed") {
        assert!(
            status.success(),
            "`{scenario}` on {ranks} ranks failed: {status}"
        );
    }
    out
}

// ----- what each rank runs -----

fn rank_main(scenario: &str, out: &Path) {
    let comm: Arc<dyn Collective> = Arc::new(
        match scenario {
            "killed" => Mpi::init_with_timeout(Duration::from_secs(3)),
            "killed_default" => Mpi::init(),
            "slow" => Mpi::init_with_limits(Duration::from_secs(120), Duration::from_secs(2)),
            _ => Mpi::init_with_timeout(Duration::from_secs(120)),
        }
        .unwrap(),
    );
    match scenario {
        "killed_default" => disagreement::rank_killed_default(comm, out),
        "slow" => disagreement::rank_slow(comm, out),
        "mismatched_calls" => disagreement::rank_mismatched_calls(&*comm, out),
        "random_calls" => disagreement::rank_random_calls(&*comm, out),
        "mismatched_models" => disagreement::rank_mismatched_models(comm, out),
        "mismatched_seeds" => disagreement::rank_mismatched_seeds(comm, out),
        "collectives" => rank_collectives(&*comm),
        "train" => rank_train(comm, out, 1),
        "accumulate" => rank_train(comm, out, 2),
        "killed" => rank_killed(comm, out),
        "save" => rank_save(comm, out, false),
        "save_sharded" => rank_save(comm, out, true),
        "zero" => rank_zero(comm, out),
        "resume" => rank_resume(comm, out, false),
        "resume_sharded" => rank_resume(comm, out, true),
        other => panic!("unknown scenario {other}"),
    }
}

fn rank_collectives(comm: &dyn Collective) {
    let (rank, world) = (comm.rank(), comm.world_size());
    let mine =
        DynTensor::from_vec(vec![rank as f32 + 1.0, 2.0 * (rank as f32 + 1.0)], &[2]).unwrap();
    let total = (world * (world + 1) / 2) as f32;
    let sum = all_reduce(comm, &mine, Reduction::Sum).unwrap();
    assert_eq!(sum.to_vec::<f32>().unwrap(), vec![total, 2.0 * total]);
    let mean = all_reduce(comm, &mine, Reduction::Mean).unwrap();
    assert_eq!(
        mean.to_vec::<f32>().unwrap(),
        vec![total / world as f32, 2.0 * total / world as f32]
    );
    let ints = DynTensor::from_vec(vec![rank as i64; 3], &[3]).unwrap();
    let int_sum = all_reduce(comm, &ints, Reduction::Sum).unwrap();
    assert_eq!(
        int_sum.to_vec::<i64>().unwrap(),
        vec![(world * (world - 1) / 2) as i64; 3]
    );

    let shared = DynTensor::from_vec(vec![rank as f64; 4], &[2, 2]).unwrap();
    broadcast_(comm, &shared, world - 1).unwrap();
    assert_eq!(shared.to_vec::<f64>().unwrap(), vec![(world - 1) as f64; 4]);
    assert!(
        broadcast_(comm, &shared, world).is_err(),
        "a root beyond the world is an error"
    );

    // Rank r sends r + 1 rows of the value r.
    let rows = DynTensor::from_vec(vec![rank as f32; (rank + 1) * 2], &[rank + 1, 2]).unwrap();
    let gathered = all_gather(comm, &rows).unwrap();
    let expected: Vec<f32> = (0..world)
        .flat_map(|r| std::iter::repeat_n(r as f32, (r + 1) * 2))
        .collect();
    assert_eq!(gathered.dims(), &[world * (world + 1) / 2, 2]);
    assert_eq!(gathered.to_vec::<f32>().unwrap(), expected);
    comm.barrier().unwrap();
}

fn loss_of(model: &Mlp, batch: &Batch) -> DynTensor {
    let logits = model
        .forward(&batch.input::<(Dyn, D<64>)>().unwrap())
        .unwrap();
    classification(logits.as_dyn(), &batch.target).unwrap().0
}

fn adam(model: &Mlp) -> Adam {
    Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 2e-3,
            ..AdamConfig::adam()
        },
    )
    .unwrap()
}

fn parameter_bytes(model: &Mlp) -> Vec<u8> {
    model
        .parameters()
        .iter()
        .flat_map(|p| p.to_vec::<f32>().unwrap())
        .flat_map(f32::to_le_bytes)
        .collect()
}

/// `STEPS` steps of data-parallel Adam; with `micro > 1`, each rank's batch is cut into
/// `micro` pieces whose gradients are accumulated without communication until the last.
fn rank_train(comm: Arc<dyn Collective>, out: &Path, micro: usize) {
    let rank = comm.rank();
    // Different initial weights on every rank: DDP must replace them with rank 0's.
    manual_seed(7 + 1000 * rank as u64);
    let model = Mlp::new().unwrap();
    let ddp = DistributedDataParallel::with_bucket_bytes(comm.clone(), &model, 16 << 10).unwrap();
    assert!(
        ddp.bucket_count() > 1,
        "the test must exercise several buckets"
    );
    let mut optimizer = adam(&model);
    let mut loaders: Vec<_> = (0..micro)
        .map(|m| {
            let (train, _) = load_digits().unwrap();
            DataLoader::new(train, PER_RANK_BATCH / micro)
                .unwrap()
                .shuffle(11)
                .shard(rank * micro + m, comm.world_size() * micro)
                .unwrap()
        })
        .collect();
    let mut epochs: Vec<_> = loaders.iter_mut().map(|l| l.epoch()).collect();
    for _ in 0..STEPS {
        let mut accumulated = GradientStore::new();
        for epoch in &mut epochs[..micro - 1] {
            let loss = loss_of(&model, &epoch.next().unwrap().unwrap())
                .mul_scalar(1.0 / micro as f64)
                .unwrap();
            ddp.accumulate(&loss, &mut accumulated).unwrap();
        }
        let batch = epochs[micro - 1].next().unwrap().unwrap();
        let loss = loss_of(&model, &batch)
            .mul_scalar(1.0 / micro as f64)
            .unwrap();
        let mut grads = ddp.backward_accumulated(&loss, accumulated).unwrap();
        optimizer.step(&mut grads).unwrap();
    }
    std::fs::write(out.join(format!("rank{rank}.bin")), parameter_bytes(&model)).unwrap();
}

fn rank_killed(comm: Arc<dyn Collective>, out: &Path) {
    let rank = comm.rank();
    manual_seed(7);
    let model = Mlp::new().unwrap();
    let ddp = DistributedDataParallel::new(comm.clone(), &model).unwrap();
    let (train, _) = load_digits().unwrap();
    let mut loader = DataLoader::new(train, PER_RANK_BATCH)
        .unwrap()
        .shard(rank, comm.world_size())
        .unwrap();
    let mut epoch = loader.epoch();
    for step in 0..2 {
        let loss = loss_of(&model, &epoch.next().unwrap().unwrap());
        if step == 1 && rank == comm.world_size() - 1 {
            // Killed mid-step, after the forward pass, before its gradients are sent.
            let _ = Command::new("kill")
                .args(["-9", &std::process::id().to_string()])
                .status();
            std::thread::sleep(Duration::from_secs(60));
        }
        let started = Instant::now();
        if let Err(e) = ddp.backward(&loss) {
            let report = format!("{e}\nwaited {:.1} s", started.elapsed().as_secs_f64());
            std::fs::write(out.join(format!("rank{rank}.txt")), report).unwrap();
            // MPI_Finalize would wait for the dead rank; leave without it.
            std::process::exit(0);
        }
    }
    std::fs::write(out.join(format!("rank{rank}.txt")), "no error").unwrap();
}

/// Steps of each half of the checkpoint test, and the global batch of both halves.
const HALF: usize = 3;
const GLOBAL: usize = 16;

/// `steps` data-parallel steps of this rank's `GLOBAL / world` items from batch `first` of
/// epoch 0, each ending with `update` of the averaged gradients.
fn train_steps(
    comm: &Arc<dyn Collective>,
    model: &Mlp,
    mut update: impl FnMut(&mut GradientStore),
    first: usize,
    steps: usize,
) {
    let ddp = DistributedDataParallel::new(comm.clone(), model).unwrap();
    let (train, _) = load_digits().unwrap();
    let mut loader = DataLoader::new(train, GLOBAL / comm.world_size())
        .unwrap()
        .shuffle(11)
        .shard(comm.rank(), comm.world_size())
        .unwrap();
    let mut epoch = loader.epoch_from(0, first);
    for _ in 0..steps {
        let loss = loss_of(model, &epoch.next().unwrap().unwrap());
        update(&mut ddp.backward(&loss).unwrap());
    }
}

/// Adam's state sharded over the ranks of `comm`.
fn zero_adam(comm: &Arc<dyn Collective>, model: &Mlp) -> ZeroRedundancyOptimizer<Adam> {
    ZeroRedundancyOptimizer::new(comm.clone(), model.parameters(), |own| {
        Adam::new(
            own,
            AdamConfig {
                lr: 2e-3,
                ..AdamConfig::adam()
            },
        )
    })
    .unwrap()
}

/// Like `rank_train`, with Adam's state sharded across the ranks.
fn rank_zero(comm: Arc<dyn Collective>, out: &Path) {
    let rank = comm.rank();
    manual_seed(7 + 1000 * rank as u64);
    let model = Mlp::new().unwrap();
    let ddp = DistributedDataParallel::new(comm.clone(), &model).unwrap();
    let mut optimizer = zero_adam(&comm, &model);
    let owned: usize = optimizer.owned().iter().map(DynTensor::numel).sum();
    assert!(
        owned > 0 && owned < model.num_parameters(),
        "rank {rank} keeps state for a part: {owned}"
    );
    let (train, _) = load_digits().unwrap();
    let mut loader = DataLoader::new(train, PER_RANK_BATCH)
        .unwrap()
        .shuffle(11)
        .shard(rank, comm.world_size())
        .unwrap();
    let mut epoch = loader.epoch();
    for _ in 0..STEPS {
        let loss = loss_of(&model, &epoch.next().unwrap().unwrap());
        optimizer.step(&mut ddp.backward(&loss).unwrap()).unwrap();
    }
    std::fs::write(out.join(format!("rank{rank}.bin")), parameter_bytes(&model)).unwrap();
}

/// `HALF` steps, then a checkpoint written by rank 0; with `sharded`, of a
/// [`ZeroRedundancyOptimizer`] (its state consolidated from the ranks).
fn rank_save(comm: Arc<dyn Collective>, out: &Path, sharded: bool) {
    manual_seed(7);
    let model = Mlp::new().unwrap();
    let checkpoint = if sharded {
        let mut optimizer = zero_adam(&comm, &model);
        train_steps(&comm, &model, |g| optimizer.step(g).unwrap(), 0, HALF);
        optimizer.capture(&model, None, 0, HALF as u64).unwrap()
    } else {
        let mut optimizer = adam(&model);
        train_steps(&comm, &model, |g| optimizer.step(g).unwrap(), 0, HALF);
        Checkpoint::capture(&model, &optimizer, None, 0, HALF as u64).unwrap()
    };
    save_checkpoint(&*comm, &checkpoint, out.join("run.ckpt")).unwrap();
    // A failure on rank 0 is an error on every rank.
    let failed = on_rank0(&*comm, || {
        checkpoint.save(out.join("no-such-dir").join("x.ckpt"))
    });
    assert!(
        failed.is_err(),
        "rank {} sees rank 0's failure",
        comm.rank()
    );
}

/// Restores `RUMUS_MPI_CHECKPOINT` and trains `HALF` more steps.
fn rank_resume(comm: Arc<dyn Collective>, out: &Path, sharded: bool) {
    let saved = std::env::var("RUMUS_MPI_CHECKPOINT").unwrap();
    manual_seed(99);
    let model = Mlp::new().unwrap();
    let checkpoint = Checkpoint::load(&saved).unwrap();
    let first = checkpoint.step as usize;
    if sharded {
        let mut optimizer = zero_adam(&comm, &model);
        optimizer.restore(&checkpoint, &model).unwrap();
        train_steps(&comm, &model, |g| optimizer.step(g).unwrap(), first, HALF);
    } else {
        let mut optimizer = adam(&model);
        checkpoint.restore(&model, &mut optimizer).unwrap();
        train_steps(&comm, &model, |g| optimizer.step(g).unwrap(), first, HALF);
    }
    std::fs::write(
        out.join(format!("rank{}.bin", comm.rank())),
        parameter_bytes(&model),
    )
    .unwrap();
}

// ----- what the launcher checks -----

fn collectives_match(mpirun: &Path) {
    launch(mpirun, 2, "collectives", &[]);
    launch(mpirun, 4, "collectives", &[]);
}

/// The single-process reference: each global batch is the union of the ranks' slices
/// (`DataLoader::shard`, proven against the unsharded loader in rumus/tests/data_loader.rs); the
/// gradient is the sum of the slices' gradients in rank order divided by the number of
/// slices, which is exactly what an all-reduce of two ranks computes.
fn reference_sliced(slices: usize) -> Vec<u8> {
    manual_seed(7);
    let model = Mlp::new().unwrap();
    let mut optimizer = adam(&model);
    let mut loaders: Vec<_> = (0..slices)
        .map(|s| {
            let (train, _) = load_digits().unwrap();
            DataLoader::new(train, PER_RANK_BATCH)
                .unwrap()
                .shuffle(11)
                .shard(s, slices)
                .unwrap()
        })
        .collect();
    let mut epochs: Vec<_> = loaders.iter_mut().map(|l| l.epoch()).collect();
    for _ in 0..STEPS {
        let grads: Vec<GradientStore> = epochs
            .iter_mut()
            .map(|e| {
                loss_of(&model, &e.next().unwrap().unwrap())
                    .backward()
                    .unwrap()
            })
            .collect();
        let mut averaged = GradientStore::new();
        for param in model.parameters() {
            let mut sum = grads[0].grad(&param).unwrap().clone();
            for g in &grads[1..] {
                sum = sum.add(g.grad(&param).unwrap()).unwrap();
            }
            let mean = sum.div_scalar(slices as f64).unwrap();
            averaged.accumulate(param.id().unwrap(), mean).unwrap();
        }
        optimizer.step(&mut averaged).unwrap();
    }
    parameter_bytes(&model)
}

/// The plain single-process run on global batches of `global` items.
fn reference_global(global: usize) -> Vec<f32> {
    manual_seed(7);
    let model = Mlp::new().unwrap();
    let mut optimizer = adam(&model);
    let (train, _) = load_digits().unwrap();
    let mut loader = DataLoader::new(train, global).unwrap().shuffle(11);
    let mut epoch = loader.epoch();
    for _ in 0..STEPS {
        let loss = loss_of(&model, &epoch.next().unwrap().unwrap());
        optimizer.step(&mut loss.backward().unwrap()).unwrap();
    }
    floats(&parameter_bytes(&model))
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn rank_files(out: &Path, ranks: usize) -> Vec<Vec<u8>> {
    (0..ranks)
        .map(|r| std::fs::read(out.join(format!("rank{r}.bin"))).unwrap())
        .collect()
}

fn assert_close(found: &[f32], expected: &[f32], what: &str) {
    assert_eq!(found.len(), expected.len());
    let worst = found
        .iter()
        .zip(expected)
        .map(|(a, b)| (a - b).abs() / (1e-3 + b.abs()))
        .fold(0.0f32, f32::max);
    assert!(
        worst < 1e-4,
        "{what}: parameters differ by {worst:e} (relative)"
    );
}

fn two_ranks_bit_identical(mpirun: &Path) {
    let out = launch(mpirun, 2, "train", &[]);
    let ranks = rank_files(&out, 2);
    assert_eq!(ranks[0], ranks[1], "both ranks hold the same parameters");
    assert!(
        ranks[0] == reference_sliced(2),
        "2 ranks equal the sliced single process bit for bit"
    );
    assert_close(
        &floats(&ranks[0]),
        &reference_global(2 * PER_RANK_BATCH),
        "2 ranks vs one batch of 16",
    );
}

fn four_ranks_match(mpirun: &Path) {
    let out = launch(mpirun, 4, "train", &[]);
    let ranks = rank_files(&out, 4);
    assert!(
        ranks.iter().all(|r| *r == ranks[0]),
        "every rank holds the same parameters"
    );
    assert_close(
        &floats(&ranks[0]),
        &reference_global(4 * PER_RANK_BATCH),
        "4 ranks vs one batch of 32",
    );
}

fn accumulation_matches(mpirun: &Path) {
    let out = launch(mpirun, 2, "accumulate", &[]);
    let ranks = rank_files(&out, 2);
    assert_eq!(ranks[0], ranks[1]);
    assert_close(
        &floats(&ranks[0]),
        &reference_global(2 * PER_RANK_BATCH),
        "2 ranks x 2 micro-batches vs one batch of 16",
    );
}

fn killed_rank_is_an_error(mpirun: &Path) {
    // Without --enable-recovery, OpenMPI's mpirun ends the whole job when a rank dies.
    let out = launch(mpirun, 3, "killed", &["--enable-recovery"]);
    for rank in 0..2 {
        let report = std::fs::read_to_string(out.join(format!("rank{rank}.txt")))
            .unwrap_or_else(|_| panic!("rank {rank} wrote no report"));
        assert!(
            report.contains("not every one of the 3 ranks took part"),
            "rank {rank} reports the failure: {report}"
        );
    }
}

fn checkpoint_resumes_on_another_world_size(mpirun: &Path) {
    let checkpoint = saved_checkpoint(mpirun, "save");
    let resumed = resume(mpirun, &checkpoint, "resume");
    assert_close(
        &resumed,
        &reference_resumed(None),
        "saved on 2 ranks, resumed on 4",
    );
}

/// A checkpoint of a sharded optimizer is an ordinary one: it resumes sharded on 4 ranks,
/// and unsharded in one process.
fn sharded_checkpoint_resumes_anywhere(mpirun: &Path) {
    let checkpoint = saved_checkpoint(mpirun, "save_sharded");
    let reference = reference_resumed(None);
    assert_close(
        &resume(mpirun, &checkpoint, "resume_sharded"),
        &reference,
        "ZeRO saved on 2 ranks, resumed with ZeRO on 4",
    );
    assert_close(
        &reference_resumed(Some(&checkpoint)),
        &reference,
        "ZeRO saved on 2 ranks, resumed by plain Adam in one process",
    );
}

/// Runs `scenario` on 2 ranks and returns the one file it wrote, checking it is the only
/// one (rank 0 writes).
fn saved_checkpoint(mpirun: &Path, scenario: &str) -> PathBuf {
    let saved = launch(mpirun, 2, scenario, &[]);
    let entries: Vec<_> = std::fs::read_dir(&saved)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        entries,
        vec![std::ffi::OsString::from("run.ckpt")],
        "one file, written by rank 0"
    );
    saved.join("run.ckpt")
}

/// Resumes `checkpoint` on 4 ranks and returns their (equal) parameters.
fn resume(mpirun: &Path, checkpoint: &Path, scenario: &str) -> Vec<f32> {
    let out = launch_with(
        mpirun,
        4,
        scenario,
        &[],
        &[("RUMUS_MPI_CHECKPOINT", checkpoint)],
    );
    let ranks = rank_files(&out, 4);
    assert!(ranks.iter().all(|r| *r == ranks[0]));
    floats(&ranks[0])
}

/// One process, 2 x HALF steps of GLOBAL items (the ranks' global batches in the same
/// order); with `checkpoint`, the first HALF are restored from it instead of trained.
fn reference_resumed(checkpoint: Option<&Path>) -> Vec<f32> {
    manual_seed(7);
    let model = Mlp::new().unwrap();
    let mut optimizer = adam(&model);
    let (train, _) = load_digits().unwrap();
    let mut loader = DataLoader::new(train, GLOBAL).unwrap().shuffle(11);
    let first = match checkpoint {
        Some(path) => {
            let checkpoint = Checkpoint::load(path).unwrap();
            checkpoint.restore(&model, &mut optimizer).unwrap();
            HALF
        }
        None => 0,
    };
    let mut epoch = loader.epoch_from(0, first);
    for _ in first..2 * HALF {
        let loss = loss_of(&model, &epoch.next().unwrap().unwrap());
        optimizer.step(&mut loss.backward().unwrap()).unwrap();
    }
    floats(&parameter_bytes(&model))
}

fn zero_matches_plain_adam(mpirun: &Path) {
    let out = launch(mpirun, 2, "zero", &[]);
    let ranks = rank_files(&out, 2);
    assert_eq!(ranks[0], ranks[1], "both ranks hold the same parameters");
    assert!(
        ranks[0] == reference_sliced(2),
        "ZeRO on 2 ranks equals the sliced single process bit for bit"
    );
}
