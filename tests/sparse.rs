//! Sparse matrices and message passing: products against the dense computation, reductions
//! against plain loops, every gradient against finite differences (first and second order),
//! and hostile structures refused with an error.

mod common;

use common::{check_first_and_second_order, randn};
use rumus::sparse::{Aggregation, CooMatrix, CsrMatrix, Graph, Pattern};
use rumus::{DType, DynTensor, Result};

/// A small deterministic graph with what the kernels must handle: a node with no incoming
/// edge (3), a hub (0), a repeated edge (1 -> 0 twice) and a self-loop (2 -> 2).
fn small_graph() -> Graph {
    let sources = [1, 1, 2, 4, 0, 2, 4, 0, 1];
    let targets = [0, 0, 0, 0, 1, 2, 2, 4, 4];
    Graph::from_edges(&sources, &targets, 5).unwrap()
}

/// A pseudo-random `n x m` pattern with about `per_row` entries a row, some rows empty and
/// some entries repeated.
fn random_pattern(n: usize, m: usize, per_row: usize, seed: u64) -> (Vec<i64>, Vec<i64>) {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = |bound: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as usize) % bound.max(1)
    };
    let (mut rows, mut cols) = (Vec::new(), Vec::new());
    for i in 0..n {
        let count = if i % 7 == 3 { 0 } else { next(2 * per_row + 1) };
        for _ in 0..count {
            rows.push(i as i64);
            cols.push(next(m) as i64);
        }
    }
    (rows, cols)
}

fn values_f64(count: usize, seed: u64) -> DynTensor {
    randn(&[count], seed)
}

fn csr(n: usize, m: usize, seed: u64) -> CsrMatrix {
    let (rows, cols) = random_pattern(n, m, 3, seed);
    let values = values_f64(rows.len(), seed + 1);
    CooMatrix::new(rows, cols, values, (n, m))
        .unwrap()
        .to_csr()
        .unwrap()
}

fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "element {i}: {x} vs {y}"
        );
    }
}

#[test]
fn spmm_equals_the_dense_product() -> Result<()> {
    let a = csr(40, 30, 1);
    let x = randn(&[30, 5], 2);
    let sparse = a.matmul(&x)?.to_vec::<f64>()?;
    let dense = a.to_dense()?.matmul(&x)?.to_vec::<f64>()?;
    close(&sparse, &dense, 1e-12);
    // A transposed (non-contiguous) operand with more than one trailing axis.
    let x3 = randn(&[2, 30, 3], 3).transpose(0, 1)?;
    let sparse = a.matmul(&x3)?;
    assert_eq!(sparse.dims(), [40, 2, 3]);
    let dense = a
        .to_dense()?
        .matmul(&x3.contiguous()?.reshape(&[30, 6])?)?
        .to_vec::<f64>()?;
    close(&sparse.to_vec::<f64>()?, &dense, 1e-12);
    Ok(())
}

#[test]
fn spmm_large_enough_to_split_across_threads_equals_the_dense_product() -> Result<()> {
    // 600 rows of 64 features and about 1,800 entries: well past the parallel grain.
    let (rows, cols) = random_pattern(600, 500, 3, 9);
    let mut rows = rows;
    let mut cols = cols;
    // A hub row: one row holding a third of the entries.
    for j in 0..900 {
        rows.push(5);
        cols.push(j % 500);
    }
    let values = randn(&[rows.len()], 4).to_dtype(DType::F32)?;
    let a = CooMatrix::new(rows, cols, values, (600, 500))?.to_csr()?;
    let x = randn(&[500, 64], 5).to_dtype(DType::F32)?;
    let sparse = a.matmul(&x)?.to_dtype(DType::F64)?.to_vec::<f64>()?;
    let dense = a
        .to_dense()?
        .to_dtype(DType::F64)?
        .matmul(&x.to_dtype(DType::F64)?)?
        .to_vec::<f64>()?;
    close(&sparse, &dense, 1e-4);
    let a_rows = randn(&[600, 64], 6).to_dtype(DType::F32)?;
    let sampled = a.sample_products(&a_rows, &x)?.values().to_vec::<f32>()?;
    let full = a_rows.matmul(&x.transpose(0, 1)?)?.to_vec::<f32>()?;
    let expected = entries_of(a.pattern(), &full, 500);
    let sampled: Vec<f64> = sampled.iter().map(|&v| v as f64).collect();
    let expected: Vec<f64> = expected.iter().map(|&v| v as f64).collect();
    close(&sampled, &expected, 1e-4);
    Ok(())
}

/// The elements of a dense row-major `[rows, width]` matrix at the pattern's entries.
fn entries_of<T: Copy>(pattern: &Pattern, dense: &[T], width: usize) -> Vec<T> {
    let ptr = pattern.row_ptr();
    let cols = pattern.col_indices();
    let mut out = Vec::new();
    for i in 0..ptr.len() - 1 {
        for e in ptr[i] as usize..ptr[i + 1] as usize {
            out.push(dense[i * width + cols[e] as usize]);
        }
    }
    out
}

#[test]
fn sddmm_reads_the_dense_product_at_the_entries() -> Result<()> {
    let a = csr(12, 9, 7);
    let left = randn(&[12, 4], 8);
    let right = randn(&[9, 4], 9);
    let sampled = a.sample_products(&left, &right)?;
    let full = left.matmul(&right.transpose(0, 1)?)?.to_vec::<f64>()?;
    close(
        &sampled.values().to_vec::<f64>()?,
        &entries_of(a.pattern(), &full, 9),
        1e-12,
    );
    Ok(())
}

#[test]
fn transpose_and_coalesce_keep_the_dense_matrix() -> Result<()> {
    let rows = vec![2, 0, 2, 1, 2, 0];
    let cols = vec![1, 3, 1, 0, 0, 3];
    let values = DynTensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], &[6])?;
    let coo = CooMatrix::new(rows, cols, values, (3, 4))?;
    let dense = coo.to_dense()?.to_vec::<f64>()?;
    let expected = vec![
        0.0, 0.0, 0.0, 8.0, //
        4.0, 0.0, 0.0, 0.0, //
        5.0, 4.0, 0.0, 0.0,
    ];
    assert_eq!(dense, expected);
    let merged = coo.coalesce()?;
    assert_eq!(merged.nnz(), 4);
    assert_eq!(merged.row_indices(), [0, 1, 2, 2]);
    assert_eq!(merged.col_indices(), [3, 0, 0, 1]);
    assert_eq!(merged.to_dense()?.to_vec::<f64>()?, expected);
    let transposed = coo.to_csr()?.t()?.to_dense()?;
    let expected_t = DynTensor::from_vec(expected, &[3, 4])?.transpose(0, 1)?;
    assert_eq!(
        transposed.to_vec::<f64>()?,
        expected_t.contiguous()?.to_vec::<f64>()?
    );
    Ok(())
}

#[test]
fn aggregations_match_plain_loops_and_empty_nodes_get_zero() -> Result<()> {
    let graph = small_graph();
    let x = randn(&[5, 3], 11);
    let messages = graph.gather_sources(&x)?;
    let host = x.to_vec::<f64>()?;
    let sources = graph.sources().to_vec::<i64>()?;
    let targets = graph.targets().to_vec::<i64>()?;
    for how in [Aggregation::Sum, Aggregation::Mean, Aggregation::Max] {
        let got = graph.aggregate(&messages, how)?.to_vec::<f64>()?;
        for node in 0..5 {
            for f in 0..3 {
                let incoming: Vec<f64> = (0..sources.len())
                    .filter(|&e| targets[e] == node as i64)
                    .map(|e| host[sources[e] as usize * 3 + f])
                    .collect();
                let expected = if incoming.is_empty() {
                    0.0
                } else {
                    match how {
                        Aggregation::Sum => incoming.iter().sum(),
                        Aggregation::Mean => incoming.iter().sum::<f64>() / incoming.len() as f64,
                        Aggregation::Max => incoming.iter().cloned().fold(f64::MIN, f64::max),
                    }
                };
                let value = got[node * 3 + f];
                assert!(
                    (value - expected).abs() < 1e-12,
                    "{how:?} node {node} feature {f}: {value} vs {expected}"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn edge_softmax_sums_to_one_over_each_nodes_incoming_edges() -> Result<()> {
    let graph = small_graph();
    // Large scores: the per-node shift keeps exp finite.
    let scores = randn(&[graph.edges(), 2], 12).mul_scalar(300.0)?;
    let weights = graph.softmax(&scores)?;
    let sums = graph
        .aggregate(&weights, Aggregation::Sum)?
        .to_vec::<f64>()?;
    let degrees = graph.in_degrees();
    for (node, &degree) in degrees.iter().enumerate() {
        for head in 0..2 {
            let expected = if degree == 0 { 0.0 } else { 1.0 };
            assert!((sums[node * 2 + head] - expected).abs() < 1e-12);
        }
    }
    assert!(weights.to_vec::<f64>()?.iter().all(|w| w.is_finite()));
    Ok(())
}

#[test]
fn gcn_normalization_matches_the_dense_formula() -> Result<()> {
    let graph = small_graph();
    let gcn = graph.gcn_normalized()?.to_dense()?.to_vec::<f32>()?;
    // Dense A + I with the existing self-loop kept once and repeated edges counted twice.
    let mut a = [[0.0f64; 5]; 5];
    let sources = graph.sources().to_vec::<i64>()?;
    let targets = graph.targets().to_vec::<i64>()?;
    for (s, t) in sources.iter().zip(&targets) {
        a[*t as usize][*s as usize] += 1.0;
    }
    for (i, row) in a.iter_mut().enumerate() {
        if row[i] == 0.0 {
            row[i] = 1.0;
        }
    }
    // Degrees count entries (a repeated edge twice), as PyTorch Geometric's scatter does.
    let degree: Vec<f64> = a.iter().map(|row| row.iter().sum()).collect();
    for i in 0..5 {
        for j in 0..5 {
            let expected = a[i][j] / (degree[i].sqrt() * degree[j].sqrt());
            assert!(
                (gcn[i * 5 + j] as f64 - expected).abs() < 1e-6,
                "({i}, {j})"
            );
        }
    }
    Ok(())
}

// ---- gradients, first and second order ----

#[test]
fn spmm_gradients() {
    let a = csr(6, 5, 21);
    let pattern = a.pattern().clone();
    let nnz = a.nnz();
    check_first_and_second_order(
        "spmm",
        move |x| CsrMatrix::from_pattern(pattern.clone(), x[0].clone())?.matmul(&x[1]),
        vec![values_f64(nnz, 22), randn(&[5, 3], 23)],
    );
}

#[test]
fn sddmm_gradients() {
    let a = csr(6, 5, 24);
    check_first_and_second_order(
        "sddmm",
        move |x| Ok(a.sample_products(&x[0], &x[1])?.values().clone()),
        vec![randn(&[6, 3], 25), randn(&[5, 3], 26)],
    );
}

#[test]
fn transposed_and_dense_gradients() {
    let a = csr(6, 5, 27);
    let pattern = a.pattern().clone();
    check_first_and_second_order(
        "transpose, to_dense",
        move |x| {
            let m = CsrMatrix::from_pattern(pattern.clone(), x[0].clone())?;
            m.t()?.matmul(&x[1])?.add(
                &m.to_dense()?
                    .sum(&[1], false)?
                    .unsqueeze(1)?
                    .narrow(0, 0, 5)?,
            )
        },
        vec![values_f64(a.nnz(), 28), randn(&[6, 2], 29)],
    );
}

#[test]
fn aggregation_and_softmax_gradients() {
    for how in [Aggregation::Sum, Aggregation::Mean, Aggregation::Max] {
        let graph = small_graph();
        check_first_and_second_order(
            &format!("{how:?}"),
            move |x| graph.aggregate(&graph.gather_sources(&x[0])?, how),
            vec![randn(&[5, 3], 30)],
        );
    }
    let graph = small_graph();
    check_first_and_second_order(
        "softmax",
        move |x| graph.softmax(&x[0]),
        vec![randn(&[9, 2], 31)],
    );
}

#[test]
fn coalesced_values_gradients() {
    check_first_and_second_order(
        "coalesce",
        |x| {
            let coo = CooMatrix::new(vec![1, 0, 1], vec![2, 1, 2], x[0].clone(), (2, 3))?;
            coo.coalesce()?.to_csr()?.matmul(&x[1])
        },
        vec![randn(&[3], 32), randn(&[3, 2], 33)],
    );
}

// ---- hostile structures ----

#[test]
fn bad_structures_are_errors_that_name_the_entry() {
    let values = |n: usize| DynTensor::zeros(&[n], DType::F32).unwrap();
    let out_of_range = CooMatrix::new(vec![0, 3], vec![0, 0], values(2), (3, 3)).unwrap_err();
    assert!(out_of_range.to_string().contains("entry 1 has row index 3"));
    let negative = Graph::from_edges(&[0, -1], &[1, 1], 2).unwrap_err();
    assert!(negative.to_string().contains("index -1"), "{negative}");
    let lengths = Graph::from_edges(&[0, 1, 1], &[1, 1], 2).unwrap_err();
    assert!(
        lengths.to_string().contains("3 column indices")
            || lengths.to_string().contains("2 row indices")
    );
    let edge_index = DynTensor::from_vec(vec![0i64, 1, 2], &[3, 1]).unwrap();
    assert!(Graph::from_edge_index(&edge_index, 3).is_err());
    let float_index = DynTensor::zeros(&[2, 1], DType::F32).unwrap();
    assert!(Graph::from_edge_index(&float_index, 3).is_err());
    // Row pointers that claim 2^31 entries over two columns.
    let huge = CsrMatrix::new(vec![0, 1 << 31], vec![0, 1], values(2), (1, 2)).unwrap_err();
    assert!(huge.to_string().contains("row pointers"), "{huge}");
    let decreasing = CsrMatrix::new(vec![0, 2, 1, 2], vec![0, 1], values(2), (3, 2)).unwrap_err();
    assert!(decreasing.to_string().contains("without decreasing"));
    let wrong_values = CsrMatrix::new(vec![0, 1], vec![0], values(2), (1, 1)).unwrap_err();
    assert!(wrong_values.to_string().contains("values of shape [1]"));
    let a = CsrMatrix::new(vec![0, 1], vec![0], values(1), (1, 2)).unwrap();
    let wrong_x = a.matmul(&DynTensor::zeros(&[3, 2], DType::F32).unwrap());
    assert!(wrong_x.unwrap_err().to_string().contains("dense [2, ...]"));
    let graph = small_graph();
    let wrong_nodes = graph.gather_sources(&DynTensor::zeros(&[4, 2], DType::F32).unwrap());
    assert!(
        wrong_nodes
            .unwrap_err()
            .to_string()
            .contains("5-node graph")
    );
    let wrong_messages = graph.aggregate(
        &DynTensor::zeros(&[4, 2], DType::F32).unwrap(),
        Aggregation::Max,
    );
    assert!(
        wrong_messages
            .unwrap_err()
            .to_string()
            .contains("9 entries")
    );
}

#[test]
fn empty_graphs_and_isolated_nodes_give_zeros() -> Result<()> {
    let empty = Graph::from_edges(&[], &[], 0)?;
    let x = DynTensor::zeros(&[0, 4], DType::F32)?;
    let messages = empty.gather_sources(&x)?;
    for how in [Aggregation::Sum, Aggregation::Mean, Aggregation::Max] {
        assert_eq!(empty.aggregate(&messages, how)?.dims(), [0, 4]);
    }
    let lonely = Graph::from_edges(&[], &[], 3)?;
    let x = randn(&[3, 2], 40).requires_grad_()?;
    let messages = lonely.gather_sources(&x)?;
    for how in [Aggregation::Sum, Aggregation::Mean, Aggregation::Max] {
        let out = lonely.aggregate(&messages, how)?;
        assert_eq!(out.to_vec::<f64>()?, vec![0.0; 6]);
        let grads = rumus::autograd::grad(&[&out.sum(&[0, 1], false)?], &[&x], false)?;
        assert_eq!(grads[0].to_vec::<f64>()?, vec![0.0; 6]);
    }
    let gcn = lonely.gcn_normalized()?;
    assert_eq!(gcn.nnz(), 3, "one self-loop per node");
    Ok(())
}

// ---- neighbour sampling ----

#[test]
fn sampled_neighbourhoods_are_real_edges_drawn_without_replacement() -> Result<()> {
    use rumus::rng::Generator;
    use rumus::sparse::sample_neighbors;
    let (targets, sources) = random_pattern(300, 300, 6, 50);
    let graph = Graph::from_edges(&sources, &targets, 300)?;
    let edges: std::collections::HashSet<(i64, i64)> = sources
        .iter()
        .cloned()
        .zip(targets.iter().cloned())
        .collect();
    let seeds = [5usize, 17, 3, 250];
    let fanouts = [4, 3];
    let sampled = sample_neighbors(&graph, &seeds, &fanouts, &mut Generator::new(1))?;
    assert_eq!(sampled.seeds, 4);
    assert_eq!(&sampled.nodes[..4], &[5, 17, 3, 250]);
    let unique: std::collections::HashSet<&i64> = sampled.nodes.iter().collect();
    assert_eq!(
        unique.len(),
        sampled.nodes.len(),
        "local nodes are distinct"
    );
    let local_sources = sampled.graph.sources().to_vec::<i64>()?;
    let local_targets = sampled.graph.targets().to_vec::<i64>()?;
    for (s, t) in local_sources.iter().zip(&local_targets) {
        let edge = (sampled.nodes[*s as usize], sampled.nodes[*t as usize]);
        assert!(
            edges.contains(&edge),
            "{edge:?} is not an edge of the graph"
        );
    }
    // Each seed gets min(in-degree, 4) incoming edges at the first hop (repeated edges of
    // the full graph may be drawn both).
    let degrees = graph.in_degrees();
    let sampled_degrees = sampled.graph.in_degrees();
    for (local, &seed) in seeds.iter().enumerate() {
        assert_eq!(sampled_degrees[local], degrees[seed].min(4), "seed {seed}");
    }
    // The same seed draws the same subgraph; another seed draws another.
    let again = sample_neighbors(&graph, &seeds, &fanouts, &mut Generator::new(1))?;
    assert_eq!(again.nodes, sampled.nodes);
    let other = sample_neighbors(&graph, &seeds, &fanouts, &mut Generator::new(2))?;
    assert_ne!(other.nodes, sampled.nodes);
    // Features follow the local numbering.
    let x = DynTensor::from_vec((0..300).map(|i| i as f64).collect(), &[300, 1])?;
    let gathered = sampled.gather(&x)?.to_vec::<f64>()?;
    let expected: Vec<f64> = sampled.nodes.iter().map(|&n| n as f64).collect();
    assert_eq!(gathered, expected);
    // Bad seeds and no fanouts are errors.
    let mut g = Generator::new(3);
    assert!(sample_neighbors(&graph, &[300], &fanouts, &mut g).is_err());
    assert!(sample_neighbors(&graph, &[1, 1], &fanouts, &mut g).is_err());
    assert!(sample_neighbors(&graph, &[1], &[], &mut g).is_err());
    Ok(())
}
