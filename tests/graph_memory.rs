//! Forward passes that are never back-propagated must not grow memory. This file holds a
//! single test because it reads process-wide counters.

mod common;

use common::randn;
use rumus::autograd::{live_nodes, no_grad};
use rumus::storage::live_storage_bytes;

#[test]
fn unbackpropagated_forward_passes_and_inference_free_their_graph() {
    let w1 = randn(&[16, 32], 1).requires_grad_().unwrap();
    let w2 = randn(&[32, 4], 2).requires_grad_().unwrap();
    let x = randn(&[8, 16], 3);
    let forward = || {
        x.matmul(&w1)
            .unwrap()
            .tanh()
            .unwrap()
            .matmul(&w2)
            .unwrap()
            .log_softmax(1)
            .unwrap()
            .mean_all()
            .unwrap()
    };

    let (nodes_before, bytes_before) = (live_nodes(), live_storage_bytes());
    let mut peak_nodes = 0;
    for _ in 0..10_000 {
        let loss = forward();
        assert!(loss.requires_grad());
        peak_nodes = peak_nodes.max(live_nodes());
    }
    assert!(
        peak_nodes - nodes_before <= 8,
        "one forward pass holds at most its own records, got {}",
        peak_nodes - nodes_before
    );
    assert_eq!(live_nodes(), nodes_before, "every record was freed");
    assert_eq!(
        live_storage_bytes(),
        bytes_before,
        "every activation was freed"
    );

    // Inference records nothing at all.
    let _guard = no_grad();
    let out = forward();
    assert_eq!(live_nodes(), nodes_before);
    assert!(!out.requires_grad());
}
