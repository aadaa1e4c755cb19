//! ONNX files written to hurt the importer: each asks for terabytes, hours of work or ranks
//! of thousands in a few hundred bytes, and must be an error naming the limit it broke (see
//! `rumus::onnx::Limits`), never an abort or a hang. Limits set low in a test prove that a
//! check covers an allocation (scratch, index lists) by refusing it before it is made. The
//! same models seed the `onnx_import` fuzz target (`write_hostile_seeds`).

mod onnx_graphs;

use onnx_graphs::{Attr, Graph};
use rumus::DynTensor;
use rumus::onnx::{Limits, MAX_IMPORT_OPSET, OnnxModel};

const TB: i64 = 1 << 40;

/// Limits that let an `Expand` to `[2^40]` through, so the ops after it meet their own checks.
fn past_the_element_limit() -> Limits {
    Limits {
        max_elements: usize::MAX,
        max_allocation_bytes: 1 << 30,
        ..Limits::default()
    }
}

/// `one` ([1.0]) broadcast to `dims` as `name`.
fn expanded(graph: &mut Graph, name: &str, dims: &[i64]) {
    let shape = format!("{name}_shape");
    graph.floats("one", &[1], &[1.0]).ints(&shape, dims).node(
        "Expand",
        &["one", &shape],
        &[name],
        &[],
    );
}

fn cumsum_reversed_of_expanded() -> Vec<u8> {
    let mut g = Graph::new(17);
    expanded(&mut g, "big", &[TB]);
    g.ints("axis", &[0])
        .node(
            "CumSum",
            &["big", "axis"],
            &["y"],
            &[Attr::Int("reverse", 1)],
        )
        .output("y");
    g.bytes()
}

fn slice_by_two_of_expanded() -> Vec<u8> {
    let mut g = Graph::new(17);
    expanded(&mut g, "big", &[TB]);
    g.ints("starts", &[0])
        .ints("ends", &[TB])
        .ints("axes", &[0])
        .ints("steps", &[2])
        .node(
            "Slice",
            &["big", "starts", "ends", "axes", "steps"],
            &["y"],
            &[],
        )
        .output("y");
    g.bytes()
}

fn matmul_of_expanded() -> Vec<u8> {
    let mut g = Graph::new(17);
    expanded(&mut g, "a", &[1 << 20, 1 << 20]);
    g.ints("b_shape", &[1 << 20, 1])
        .node("Expand", &["one", "b_shape"], &["b"], &[])
        .node("MatMul", &["a", "b"], &["y"], &[])
        .output("y");
    g.bytes()
}

fn resize_of_empty_to_huge() -> Vec<u8> {
    let mut g = Graph::new(17);
    g.floats("x", &[1, 0], &[])
        .ints("sizes", &[TB, 0])
        .node("Resize", &["x", "", "", "sizes"], &["y"], &[])
        .output("y");
    g.bytes()
}

/// A [1, 1] input of 3.0 resized linearly to [n, 1].
fn resize_linear(n: i64) -> Vec<u8> {
    let mut g = Graph::new(17);
    g.floats("x", &[1, 1], &[3.0])
        .ints("sizes", &[n, 1])
        .node(
            "Resize",
            &["x", "", "", "sizes"],
            &["y"],
            &[Attr::Str("mode", "linear")],
        )
        .output("y");
    g.bytes()
}

fn cumsum_of_input(len: usize, reverse: i64, exclusive: i64) -> Vec<u8> {
    let mut g = Graph::new(17);
    g.input("x", &[len])
        .ints("axis", &[0])
        .node(
            "CumSum",
            &["x", "axis"],
            &["y"],
            &[
                Attr::Int("reverse", reverse),
                Attr::Int("exclusive", exclusive),
            ],
        )
        .output("y");
    g.bytes()
}

fn unsqueeze(axes: &[i64]) -> Vec<u8> {
    let mut g = Graph::new(17);
    g.input("x", &[2])
        .ints("axes", axes)
        .node("Unsqueeze", &["x", "axes"], &["y"], &[])
        .output("y");
    g.bytes()
}

fn identity_at_opset(opset: i64) -> Vec<u8> {
    let mut g = Graph::new(opset);
    g.input("x", &[2])
        .node("Identity", &["x"], &["y"], &[])
        .output("y");
    g.bytes()
}

/// `x` and `weights` scalar initializers, each also listed as a graph input.
fn inputs_naming_initializers(weights: usize) -> Vec<u8> {
    let mut g = Graph::new(17);
    g.input("x", &[2]);
    for k in 0..weights {
        let name = format!("w{k}");
        g.floats(&name, &[], &[k as f32]).input(&name, &[]);
    }
    g.node("Identity", &["x"], &["y"], &[]).output("y");
    g.bytes()
}

fn load(bytes: &[u8], limits: Limits) -> rumus::Result<OnnxModel> {
    OnnxModel::from_bytes_with_limits(bytes, "hostile.onnx", limits)
}

/// The error of loading and running a graph without inputs.
fn refusal(bytes: &[u8], limits: Limits) -> String {
    match load(bytes, limits).and_then(|m| m.run(&[])) {
        Ok(out) => panic!("ran to outputs of shapes {:?}", out[0].dims()),
        Err(e) => e.to_string(),
    }
}

fn assert_names(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(message.contains(part), "{part:?} not in: {message}");
    }
}

#[test]
fn flipping_a_broadcast_view_checks_its_index_list_first() {
    for len in [1usize << 40, 1 << 62] {
        let view = DynTensor::from_vec(vec![1f32], &[1])
            .unwrap()
            .broadcast_to(&[len])
            .unwrap();
        let refused = view.flip(&[0]).unwrap_err().to_string();
        assert_names(&refused, &["flip", &len.to_string()]);
    }
}

#[test]
fn graphs_of_huge_broadcast_views_stop_at_the_element_limit() {
    for bytes in [
        cumsum_reversed_of_expanded(),
        slice_by_two_of_expanded(),
        matmul_of_expanded(),
    ] {
        let refused = refusal(&bytes, Limits::default());
        assert_names(&refused, &["Expand", "elements", "Limits::max_elements"]);
    }
}

#[test]
fn ops_on_huge_broadcast_views_check_their_own_allocations_and_work() {
    let limits = past_the_element_limit();
    let flip = refusal(&cumsum_reversed_of_expanded(), limits);
    assert_names(
        &flip,
        &["flip", "8796093022208 bytes", "max_allocation_bytes"],
    );
    // 2^39 indices of 8 bytes
    let slice = refusal(&slice_by_two_of_expanded(), limits);
    assert_names(
        &slice,
        &["Slice", "4398046511104 bytes", "max_allocation_bytes"],
    );
    let product = refusal(&matmul_of_expanded(), limits);
    assert_names(
        &product,
        &["MatMul", "1099511627776 multiply-adds", "max_multiply_adds"],
    );
}

#[test]
fn resizing_an_empty_input_checks_its_index_list() {
    let refused = refusal(&resize_of_empty_to_huge(), Limits::default());
    assert_names(
        &refused,
        &["Resize", "1099511627776 elements", "max_elements"],
    );
}

#[test]
fn linear_resizing_checks_its_scratch() {
    let n = 1usize << 16;
    // The [n, 1] f32 result (4n bytes) fits, its index lists (n values of 8 bytes) do not.
    let tight = Limits {
        max_allocation_bytes: 5 * n,
        ..Limits::default()
    };
    let refused = refusal(&resize_linear(n as i64), tight);
    assert_names(
        &refused,
        &[
            "Resize",
            &format!("{} bytes", 8 * n),
            "max_allocation_bytes",
        ],
    );
    let enough = Limits {
        max_allocation_bytes: 8 * n,
        ..Limits::default()
    };
    let out = load(&resize_linear(n as i64), enough)
        .unwrap()
        .run(&[])
        .unwrap();
    assert_eq!(out[0].dims(), [n, 1]);
    // every blend of a single value is that value
    assert!(out[0].to_vec::<f32>().unwrap().iter().all(|&v| v == 3.0));
}

/// Running sums as the ONNX operator defines them: from the end when `reverse`, each
/// without its own element when `exclusive`.
fn running_sums(x: &[f32], reverse: bool, exclusive: bool) -> Vec<f32> {
    let order: Vec<usize> = if reverse {
        (0..x.len()).rev().collect()
    } else {
        (0..x.len()).collect()
    };
    let mut sums = vec![0.0; x.len()];
    let mut total = 0.0;
    for i in order {
        let before = total;
        total += x[i];
        sums[i] = if exclusive { before } else { total };
    }
    sums
}

#[test]
fn cumsum_runs_in_memory_linear_in_its_length() {
    // A product with an [n, n] triangle would need 40 GB; one allocation may have 1 MiB.
    let n = 100_000;
    let limits = Limits {
        max_allocation_bytes: 1 << 20,
        ..Limits::default()
    };
    let x: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let input = DynTensor::from_vec(x.clone(), &[n]).unwrap();
    for (reverse, exclusive) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
        let model = load(&cumsum_of_input(n, reverse, exclusive), limits).unwrap();
        let sums = model.run(&[&input]).unwrap()[0].to_vec::<f32>().unwrap();
        // sums of small integers below 2^24 are exact in f32
        assert_eq!(sums, running_sums(&x, reverse == 1, exclusive == 1));
    }
}

#[test]
fn unsqueeze_axes_must_be_distinct_in_range_and_few() {
    let input = DynTensor::from_vec(vec![1f32, 2.0], &[2]).unwrap();
    let run = |axes: &[i64]| load(&unsqueeze(axes), Limits::default())?.run(&[&input]);
    assert_eq!(run(&[0, -1]).unwrap()[0].dims(), [1, 2, 1]);
    assert_names(
        &run(&[0, 0]).unwrap_err().to_string(),
        &["Unsqueeze", "twice"],
    );
    assert_names(&run(&[1, -2]).unwrap_err().to_string(), &["twice"]);
    assert_names(
        &run(&[3]).unwrap_err().to_string(),
        &["axis 3 is out of range"],
    );
    let many: Vec<i64> = (0..50_000).collect();
    assert_names(
        &run(&many).unwrap_err().to_string(),
        &["rank 50001", "Limits::max_rank"],
    );
}

#[test]
fn node_outputs_past_the_rank_limit_are_refused() {
    let mut g = Graph::new(17);
    g.floats("x", &[1], &[1.0])
        .ints("shape", &[1; 65])
        .node("Reshape", &["x", "shape"], &["y"], &[])
        .output("y");
    assert_names(
        &refusal(&g.bytes(), Limits::default()),
        &["rank 65", "Limits::max_rank"],
    );
}

#[test]
fn opsets_past_the_newest_known_are_refused() {
    for opset in [1 << 62, MAX_IMPORT_OPSET + 1] {
        let refused = load(&identity_at_opset(opset), Limits::default()).unwrap_err();
        assert_names(
            &refused.to_string(),
            &[&format!("opset {opset}"), "13 to 22"],
        );
    }
    assert!(load(&identity_at_opset(MAX_IMPORT_OPSET), Limits::default()).is_ok());
}

#[test]
fn graphs_with_too_many_nodes_or_inputs_are_refused() {
    let mut g = Graph::new(17);
    g.input("x", &[2])
        .node("Identity", &["x"], &["a"], &[])
        .node("Identity", &["a"], &["b"], &[])
        .node("Identity", &["b"], &["y"], &[])
        .output("y");
    let two_nodes = Limits {
        max_nodes: 2,
        ..Limits::default()
    };
    assert_names(
        &load(&g.bytes(), two_nodes).unwrap_err().to_string(),
        &["3 nodes", "max_nodes"],
    );

    let bytes = inputs_naming_initializers(100_000);
    let refused = load(&bytes, Limits::default()).unwrap_err().to_string();
    assert_names(&refused, &["100001 inputs", "Limits::max_inputs"]);
    let roomy = Limits {
        max_inputs: 1 << 20,
        ..Limits::default()
    };
    let model = load(&bytes, roomy).unwrap();
    assert_eq!(
        model.input_names(),
        ["x"],
        "inputs naming weights are weights"
    );
    assert_eq!(model.initializers().len(), 100_000);
}

/// Limits exactly at a product's multiply-adds, counted by hand, let it run; one less does
/// not.
#[test]
fn products_are_counted_before_they_run() {
    let conv = {
        let mut g = Graph::new(17);
        g.input("x", &[1, 1, 8, 8])
            .floats("w", &[1, 1, 3, 3], &[1.0; 9])
            .node("Conv", &["x", "w"], &["y"], &[])
            .output("y");
        g.bytes()
    };
    let matmul = {
        let mut g = Graph::new(17);
        g.input("x", &[2, 3])
            .floats("w", &[3, 4], &[1.0; 12])
            .node("MatMul", &["x", "w"], &["y"], &[])
            .output("y");
        g.bytes()
    };
    // 6 x 6 outputs of 9 terms; 2 x 4 outputs of 3 terms
    for (bytes, dims, work) in [(conv, vec![1, 1, 8, 8], 324), (matmul, vec![2, 3], 24)] {
        let input = DynTensor::ones(&dims, rumus::DType::F32).unwrap();
        let at = |max_multiply_adds: u64| {
            let limits = Limits {
                max_multiply_adds,
                ..Limits::default()
            };
            load(&bytes, limits).unwrap().run(&[&input])
        };
        assert!(at(work).is_ok());
        let refused = at(work - 1).unwrap_err().to_string();
        assert_names(
            &refused,
            &[&format!("{work} multiply-adds"), "max_multiply_adds"],
        );
    }
}

/// The hostile models seeding the `onnx_import` fuzz target, by file name.
fn hostile_seeds() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "hostile_cumsum_reversed_of_expanded.onnx",
            cumsum_reversed_of_expanded(),
        ),
        (
            "hostile_slice_by_two_of_expanded.onnx",
            slice_by_two_of_expanded(),
        ),
        ("hostile_matmul_of_expanded.onnx", matmul_of_expanded()),
        (
            "hostile_resize_of_empty_to_huge.onnx",
            resize_of_empty_to_huge(),
        ),
        ("hostile_unsqueeze_twice.onnx", unsqueeze(&[0, 0])),
        (
            "hostile_unsqueeze_many.onnx",
            unsqueeze(&(0..1000).collect::<Vec<_>>()),
        ),
        ("hostile_opset_huge.onnx", identity_at_opset(1 << 62)),
    ]
}

fn seed_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("rumus/fuzz/seeds/onnx_import")
}

#[test]
fn the_fuzz_seeds_are_these_models() {
    for (name, bytes) in hostile_seeds() {
        let committed = std::fs::read(seed_dir().join(name)).unwrap();
        assert!(
            committed == bytes,
            "{name} differs: run write_hostile_seeds"
        );
    }
}

#[test]
#[ignore = "rewrites the hostile seeds under rumus/fuzz/seeds/onnx_import/"]
fn write_hostile_seeds() {
    for (name, bytes) in hostile_seeds() {
        std::fs::write(seed_dir().join(name), bytes).unwrap();
    }
}
