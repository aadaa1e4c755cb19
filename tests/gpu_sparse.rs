//! Sparse products, message passing and the graph layers on the GPU against the CPU: values
//! and gradients (the CPU is itself checked against PyTorch Geometric and finite
//! differences). On lavapipe in CI; skipped, saying so, where no GPU opens.

mod common;

use common::gpu::{assert_close, gpu, serial, tensor};
use rumus::autograd::grad;
use rumus::nn::{GatConv, GcnConv, Module, SageConv};
use rumus::sparse::{Aggregation, CooMatrix, Graph};
use rumus::{Device, DynTensor};

/// A graph with a hub, a node without incoming edges, a repeated edge and a self-loop.
fn graph_on(device: &Device) -> Graph {
    let sources = [1, 1, 2, 4, 0, 2, 4, 0, 1, 3, 6, 0, 3, 6, 5];
    let targets = [0, 0, 0, 0, 1, 2, 2, 4, 4, 6, 3, 3, 1, 6, 0];
    Graph::from_edges(&sources, &targets, 7)
        .unwrap()
        .to(device)
        .unwrap()
}

#[test]
fn sparse_products_and_aggregations_match_the_cpu() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let (cpu, on_gpu) = (graph_on(&Device::Cpu), graph_on(&device));
    let x = tensor(&[7, 5], 1);
    let x_gpu = x.to(&device).unwrap();
    for how in [Aggregation::Sum, Aggregation::Mean, Aggregation::Max] {
        let expected = cpu
            .aggregate(&cpu.gather_sources(&x).unwrap(), how)
            .unwrap();
        let got = on_gpu
            .aggregate(&on_gpu.gather_sources(&x_gpu).unwrap(), how)
            .unwrap();
        assert_close(&format!("{how:?}"), &expected, &got);
    }
    let scores = tensor(&[cpu.edges(), 2], 2);
    assert_close(
        "softmax",
        &cpu.softmax(&scores).unwrap(),
        &on_gpu.softmax(&scores.to(&device).unwrap()).unwrap(),
    );
    // SpMM and SDDMM with a transposed (strided) dense operand.
    let values = tensor(&[6], 3);
    let a = CooMatrix::new(
        vec![2, 0, 2, 1, 0, 2],
        vec![1, 3, 1, 0, 0, 2],
        values,
        (3, 4),
    )
    .unwrap()
    .to_csr()
    .unwrap();
    let a_gpu = a.to(&device).unwrap();
    let y = tensor(&[3, 4], 4).transpose(0, 1).unwrap();
    let y_gpu = y.to(&device).unwrap();
    assert_close(
        "spmm",
        &a.matmul(&y).unwrap(),
        &a_gpu.matmul(&y_gpu).unwrap(),
    );
    let left = tensor(&[3, 6], 5);
    let right = tensor(&[4, 6], 6);
    let sampled = a.sample_products(&left, &right).unwrap();
    let sampled_gpu = a_gpu
        .sample_products(&left.to(&device).unwrap(), &right.to(&device).unwrap())
        .unwrap();
    assert_close("sddmm", sampled.values(), sampled_gpu.values());
    assert_close(
        "to_dense",
        &a.t().unwrap().to_dense().unwrap(),
        &a_gpu.t().unwrap().to_dense().unwrap(),
    );
}

/// A layer's output and the gradients of its input and parameters, on `device`.
fn run_layer(
    layer: &dyn Module,
    forward: impl Fn(&DynTensor, &Graph) -> rumus::Result<DynTensor>,
    device: &Device,
) -> Vec<DynTensor> {
    let graph = graph_on(device);
    let x = tensor(&[7, 6], 7)
        .to(device)
        .unwrap()
        .requires_grad_()
        .unwrap();
    let out = forward(&x, &graph).unwrap();
    let cotangent = tensor(out.dims(), 8).to(device).unwrap();
    let loss = out.mul(&cotangent).unwrap().sum_all().unwrap();
    let parameters = layer.parameters();
    let mut inputs: Vec<&DynTensor> = vec![&x];
    inputs.extend(parameters.iter());
    let mut results = vec![out];
    results.extend(grad(&[&loss], &inputs, false).unwrap());
    results
}

/// `to` with the weights of `from`, on `device`.
fn moved_copy(from: &dyn Module, to: &mut dyn Module, device: &Device) {
    to.load_state_dict(&from.state_dict().unwrap()).unwrap();
    to.to_device(device.clone()).unwrap();
}

#[test]
fn graph_layers_and_their_gradients_match_the_cpu() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    rumus::manual_seed(3);
    let gcn = GcnConv::<6, 4>::new().unwrap();
    let mut gcn_gpu = GcnConv::<6, 4>::new().unwrap();
    moved_copy(&gcn, &mut gcn_gpu, &device);
    let sage = SageConv::<6, 4>::new().unwrap();
    let mut sage_gpu = SageConv::<6, 4>::new().unwrap();
    moved_copy(&sage, &mut sage_gpu, &device);
    let gat = GatConv::<6, 3, 2>::new().unwrap();
    let mut gat_gpu = GatConv::<6, 3, 2>::new().unwrap();
    moved_copy(&gat, &mut gat_gpu, &device);
    let cases: [(&str, Vec<DynTensor>, Vec<DynTensor>); 3] = [
        (
            "gcn",
            run_layer(&gcn, |x, g| gcn.forward_dyn(x, g), &Device::Cpu),
            run_layer(&gcn_gpu, |x, g| gcn_gpu.forward_dyn(x, g), &device),
        ),
        (
            "sage",
            run_layer(&sage, |x, g| sage.forward_dyn(x, g), &Device::Cpu),
            run_layer(&sage_gpu, |x, g| sage_gpu.forward_dyn(x, g), &device),
        ),
        (
            "gat",
            run_layer(&gat, |x, g| gat.forward_dyn(x, g), &Device::Cpu),
            run_layer(&gat_gpu, |x, g| gat_gpu.forward_dyn(x, g), &device),
        ),
    ];
    for (name, cpu, on_gpu) in cases {
        for (i, (c, g)) in cpu.iter().zip(&on_gpu).enumerate() {
            assert_close(&format!("{name} result {i}"), c, g);
        }
    }
}
