//! Inputs a user or a file can hand rumus that once hung it, aborted it or returned garbage:
//! each must now give a readable `Err` (or the right answer) in time proportional to its size.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use rumus::io::{Checkpoint, header_key_comparisons, read_state};
use rumus::prelude::*;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rumus-hostile-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A valid safetensors file of `keys` empty f32 tensors named `k0`, `k1`, ...
fn many_keys_file(keys: usize) -> Vec<u8> {
    let mut header = String::from("{");
    for i in 0..keys {
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            "\"k{i}\":{{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}"
        ));
    }
    header.push('}');
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes
}

/// Reading a header of n keys compares keys O(n) times, not O(n^2): the duplicate-key scan
/// that compared each key with every earlier one made n^2 / 2 comparisons (47 s for 160k
/// keys). A hash set compares a key only with keys whose hash looks the same, about one in
/// ten of them; the bound, one comparison per key, leaves room for the other tests of this
/// binary that read JSON meanwhile and is a 160,000th of the quadratic count. Counted, not
/// timed: the count is the same on a loaded machine.
#[test]
fn safetensors_headers_are_read_in_linear_time() {
    let dir = temp_dir("header");
    let keys = 320_000;
    let path = dir.join(format!("keys{keys}.safetensors"));
    std::fs::write(&path, many_keys_file(keys)).unwrap();
    let comparisons = |f: &dyn Fn()| {
        let before = header_key_comparisons();
        f();
        header_key_comparisons() - before
    };
    let read = comparisons(&|| {
        let state = read_state(&path).unwrap();
        assert_eq!(state.len(), keys);
    });
    assert!(
        read <= keys,
        "read_state compared keys {read} times for {keys} keys"
    );
    let load = comparisons(&|| {
        let message = Checkpoint::load(&path).unwrap_err().to_string();
        assert!(message.contains("not a rumus checkpoint"), "{message}");
    });
    assert!(
        load <= keys,
        "Checkpoint::load compared keys {load} times for {keys} keys"
    );
    // The count is of real comparisons: finding a repeated key takes one.
    let repeated = dir.join("repeated.safetensors");
    std::fs::write(&repeated, file_repeating_k3(1000)).unwrap();
    let found = comparisons(&|| assert!(read_state(&repeated).is_err()));
    assert!(
        found >= 1,
        "a repeated key was found in {found} comparisons"
    );

    // Loading those keys into a model names what is wrong without listing 320k names.
    let model = rumus::nn::Linear::<2, 3>::new().unwrap();
    let message = rumus::io::load_safetensors(&model, &path)
        .unwrap_err()
        .to_string();
    assert!(message.contains("unexpected keys"), "{message}");
    assert!(message.len() < 2_000, "{} bytes of message", message.len());
    std::fs::remove_dir_all(dir).ok();
}

/// [`many_keys_file`] with its last key renamed `k3`, a name it already has.
fn file_repeating_k3(keys: usize) -> Vec<u8> {
    let mut bytes = many_keys_file(keys);
    let text = String::from_utf8(bytes.split_off(8)).unwrap();
    let repeated = text.replacen(&format!("\"k{}\"", keys - 1), "\"k3\"", 1);
    let mut file = (repeated.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(repeated.as_bytes());
    file
}

#[test]
fn a_header_with_a_repeated_key_is_an_error() {
    let path = temp_dir("repeat").join("repeat.safetensors");
    std::fs::write(&path, file_repeating_k3(1000)).unwrap();
    let message = read_state(&path).unwrap_err().to_string();
    assert!(message.contains("\"k3\" appears twice"), "{message}");
}

/// Two threads multiply `a` by `b` in opposite argument order while two more scale `a` and
/// `b` in place. With the read locks taken in argument order, std's writer-preferring
/// `RwLock` deadlocked this within seconds; the watchdog turns a hang into a failure.
#[test]
fn opposite_order_readers_and_writers_do_not_deadlock() {
    let a = DynTensor::ones(&[64, 64], DType::F32).unwrap();
    let b = DynTensor::ones(&[64, 64], DType::F32).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (done, finished) = mpsc::channel();
    type Job = Box<dyn Fn(&DynTensor, &DynTensor) + Send>;
    let jobs: [Job; 4] = [
        Box::new(|a, b| drop(a.mul(b).unwrap())),
        Box::new(|a, b| drop(b.mul(a).unwrap())),
        Box::new(|a, _| a.mul_scalar_(1.0).unwrap()),
        Box::new(|_, b| b.mul_scalar_(1.0).unwrap()),
    ];
    for job in jobs {
        let (a, b, stop, done) = (a.clone(), b.clone(), stop.clone(), done.clone());
        std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                job(&a, &b);
                rounds += 1;
            }
            done.send(rounds).unwrap();
        });
    }
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    for _ in 0..4 {
        let rounds = finished
            .recv_timeout(Duration::from_secs(60))
            .expect("a thread is still waiting for a lock a minute later: deadlock");
        assert!(rounds > 0);
    }
    // The values are still what the in-place updates by 1.0 leave.
    assert_eq!(
        a.mul(&b).unwrap().sum_all().unwrap().item::<f32>().unwrap(),
        4096.0
    );
}

/// Sizes that cannot be allocated are errors that say so, never a process abort or a wrapped
/// product. Every size here is past 2^57 bytes, more than any x86-64 or AArch64 address
/// space maps, so the answer does not depend on the machine's overcommit setting.
#[test]
fn absurd_sizes_are_errors_not_aborts() {
    fn out_of_memory(result: rumus::Result<DynTensor>, what: &str) {
        match result {
            Err(rumus::Error::OutOfMemory { .. }) | Err(rumus::Error::Shape(_)) => {}
            Err(other) => panic!("{what}: unexpected error {other}"),
            Ok(t) => panic!("{what}: returned a tensor of {:?}", t.dims()),
        }
    }
    // n * n once wrapped to 0 here, giving an empty "identity" of [2^32, 2^32].
    out_of_memory(DynTensor::eye(1 << 32, DType::F32), "eye(2^32)");
    out_of_memory(DynTensor::eye(1 << 29, DType::F32), "eye(2^29)");
    out_of_memory(DynTensor::arange(0.0, 1e12, 1.0, DType::F32), "arange 1e12");
    let one = DynTensor::ones(&[1], DType::F32).unwrap();
    let wide = one.broadcast_to(&[1 << 58]).unwrap();
    out_of_memory(wide.contiguous(), "contiguous of 2^58");
    out_of_memory(wide.exp(), "exp of 2^58");
    out_of_memory(wide.to_dtype(DType::F64), "to_dtype of 2^58");
    out_of_memory(wide.add(&one), "add over 2^58");
    out_of_memory(
        wide.compare(&one, rumus::ops::CompareOp::Lt),
        "compare over 2^58",
    );
    out_of_memory(DynTensor::cat(&[&wide, &wide], 0), "cat of 2^58");
    assert!(wide.to_vec::<f32>().is_err());

    // Products and reductions of empty operands can ask for any size of result.
    let tall = DynTensor::zeros(&[1 << 29, 0], DType::F32).unwrap();
    let flat = DynTensor::zeros(&[0, 1 << 29], DType::F32).unwrap();
    out_of_memory(tall.matmul(&flat), "[2^29, 0] @ [0, 2^29]");
    let empty = DynTensor::zeros(&[0, 1 << 62], DType::F32).unwrap();
    out_of_memory(
        empty.sum(&[0], false),
        "sum over the empty axis of [0, 2^62]",
    );

    let image = DynTensor::ones(&[1, 1, 4, 4], DType::F32).unwrap();
    let weight = DynTensor::ones(&[1, 1, 3, 3], DType::F32).unwrap();
    let pad = 1 << 28;
    out_of_memory(
        image.conv2d(&weight, None, (1, 1), (pad, pad), (1, 1), 1),
        "conv2d padded by 2^28",
    );
    out_of_memory(
        image.unfold2d((3, 3), (1, 1), (pad, pad), (1, 1)),
        "unfold2d padded by 2^28",
    );
    out_of_memory(
        DynTensor::zeros(&[1 << 58], DType::F32),
        "zeros of 2^58 floats",
    );
}

#[test]
fn embedding_with_a_weight_that_is_not_a_matrix_is_an_error() {
    let weight = DynTensor::ones(&[10], DType::F32).unwrap();
    let indices = DynTensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    let message = rumus::nn::functional::embedding(&weight, &indices)
        .unwrap_err()
        .to_string();
    assert!(message.contains("embedding weight"), "{message}");
    assert!(
        message.contains("[num_embeddings, embedding_dim]"),
        "{message}"
    );
}

/// `fn main() -> rumus::Result<()>` prints an error with `Debug`: it must read as a sentence.
#[test]
fn errors_debug_print_their_message_and_alternate_debug_their_structure() {
    let a = DynTensor::zeros(&[2, 3], DType::F32).unwrap();
    let b = DynTensor::zeros(&[4, 5], DType::F32).unwrap();
    let error = a.matmul(&b).unwrap_err();
    assert_eq!(format!("{error:?}"), error.to_string());
    assert!(error.to_string().contains("inner dimensions differ"));
    let structured = format!("{error:#?}");
    assert!(
        structured.starts_with("Shape(") && structured.contains("MatmulInner"),
        "{structured}"
    );
}

/// Layer sizes PyTorch refuses when the layer is made are errors here too, not panics in the
/// first forward pass: a recurrent layer without hidden units (whose gates could not be
/// split), a group norm whose groups do not divide its channels.
#[test]
fn layers_without_a_valid_size_are_errors_when_made() {
    use rumus::nn::{GroupNorm, Gru, Lstm, RnnWeights, lstm};
    let hidden = Lstm::<2, 0>::new().err().unwrap().to_string();
    assert!(hidden.contains("hidden size must be positive"), "{hidden}");
    assert!(Gru::<2, 0>::new().is_err());
    // The functional form refuses hand-made weights of no hidden units the same way.
    let empty = DynTensor::zeros(&[0, 2], DType::F32).unwrap();
    let weights = RnnWeights {
        weight_ih: &empty,
        weight_hh: &DynTensor::zeros(&[0, 0], DType::F32).unwrap(),
        bias_ih: None,
        bias_hh: None,
    };
    let x = DynTensor::zeros(&[1, 3, 2], DType::F32).unwrap();
    let refused = lstm(&x, weights, None).err().unwrap().to_string();
    assert!(refused.contains("hidden > 0"), "{refused}");
    let groups = GroupNorm::<3, 4>::new().err().unwrap().to_string();
    assert!(
        groups.contains("3 groups must divide the 4 channels"),
        "{groups}"
    );
    assert!(GroupNorm::<0, 4>::new().is_err());
    assert!(GroupNorm::<2, 4>::new().is_ok());
}
