//! Tools for finding what went wrong in a model: anomaly mode names the first op that turns
//! finite values into NaN or infinity (forward: with its shapes and the `#[model]` field it
//! ran in; backward: the record whose gradient did), `graph_dot` draws the recorded graph,
//! and backward hooks see (tensor hooks: and may replace) the gradients `grad` computes.

use rumus::autograd::graph_dot;
use rumus::prelude::*;

#[model]
struct Encoder {
    fc1: Linear<2, 3>,
}

#[model]
impl Encoder {
    tensor_fn! {
        pub fn forward(&self, x: [B, 2]) -> [B, 3] {
            relu(self.fc1(x))
        }
    }
}

#[model]
struct Net {
    encoder: Encoder,
    head: Linear<3, 1>,
}

#[model]
impl Net {
    tensor_fn! {
        pub fn forward(&self, x: [B, 2]) -> [B, 1] {
            let h: [B, 3] = self.encoder(x);
            self.head(h)
        }
    }
}

/// Weights of 1e30 times inputs of 1e30: finite operands whose product overflows f32.
fn overflowing_net() -> (Net, Tensor<(Dyn, D<2>)>) {
    let net = Net::new().unwrap();
    let weight = DynTensor::full(&[3, 2], 1e30, DType::F32).unwrap();
    {
        let _no_grad = rumus::no_grad();
        net.encoder.fc1.weight.copy_(&weight).unwrap();
    }
    let x =
        Tensor::<(Dyn, D<2>)>::from_vec_with_dims(vec![1e30f32, 1e30, 1.0, 1.0], &[2, 2]).unwrap();
    (net, x)
}

#[test]
fn anomaly_mode_names_the_op_its_shapes_and_the_field_that_overflowed() {
    let (net, x) = overflowing_net();
    // Without anomaly mode the infinity flows on silently.
    let quiet = net.forward(&x).unwrap().as_dyn().to_f64_vec();
    assert!(quiet.iter().any(|v| !v.is_finite()), "{quiet:?}");

    let _anomaly = rumus::detect_anomaly();
    let message = net.forward(&x).unwrap_err().to_string();
    assert!(message.starts_with("anomaly:"), "{message}");
    assert!(message.contains("in `encoder.fc1`"), "{message}");
    assert!(
        message.contains("on [2, 2], [2, 3] and [3]") && message.contains("its [2, 3] output"),
        "{message}"
    );
    assert!(message.contains("infinite values of 6"), "{message}");
}

#[test]
fn anomaly_mode_ends_with_its_guard() {
    let (net, x) = overflowing_net();
    {
        let _anomaly = rumus::detect_anomaly();
        assert!(rumus::autograd::anomaly_enabled());
        assert!(net.forward(&x).is_err());
    }
    assert!(!rumus::autograd::anomaly_enabled());
    assert!(net.forward(&x).is_ok());
}

#[test]
fn anomaly_mode_names_the_backward_record_whose_gradient_is_not_finite() {
    // sqrt(0) = 0 is finite; its derivative 1 / (2 sqrt(0)) is not.
    let x = DynTensor::from_vec(vec![0.0f32, 4.0], &[2])
        .unwrap()
        .requires_grad_()
        .unwrap();
    let loss = x.sqrt().unwrap().sum(&[0], false).unwrap();
    let silent = loss.backward().unwrap();
    assert!(silent.get(&x).unwrap().to_f64_vec()[0].is_infinite());

    let _anomaly = rumus::detect_anomaly();
    let loss = x.sqrt().unwrap().sum(&[0], false).unwrap();
    let message = loss.backward().unwrap_err().to_string();
    // The formula's own op is named, as part of the record's backward pass.
    assert!(
        message.contains("(in the backward pass of `sqrt`)"),
        "{message}"
    );
    assert!(message.contains("1 infinite values of 2"), "{message}");
}

#[test]
fn the_graph_as_dot_shows_each_parameter_once_and_a_shared_value_once() {
    let net = Net::new().unwrap();
    let x =
        Tensor::<(Dyn, D<2>)>::from_vec_with_dims(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let h = net.forward(&x).unwrap();
    // `h` read twice: its record is one node with two arrows out.
    let loss = h
        .as_dyn()
        .add(h.as_dyn())
        .unwrap()
        .sum(&[0, 1], false)
        .unwrap();
    let dot = graph_dot(&loss, &net.named_parameters());
    assert!(dot.starts_with("digraph autograd {") && dot.trim_end().ends_with('}'));
    for name in [
        "encoder.fc1.weight",
        "encoder.fc1.bias",
        "head.weight",
        "head.bias",
    ] {
        let label = format!("label=\"{name}\"");
        assert_eq!(dot.matches(&label).count(), 1, "{name} once in\n{dot}");
    }
    // Every arrow joins two declared nodes.
    let declared: Vec<&str> = dot
        .lines()
        .filter(|l| l.contains("[label="))
        .map(|l| l.trim().split(' ').next().unwrap())
        .collect();
    let arrows: Vec<(&str, &str)> = dot
        .lines()
        .filter_map(|l| l.trim().trim_end_matches(';').split_once(" -> "))
        .collect();
    for (from, to) in &arrows {
        assert!(
            declared.contains(from) && declared.contains(to),
            "{from} -> {to} in\n{dot}"
        );
    }
    // The add reads the head's output twice: two arrows from one node into it.
    let add = declared
        .iter()
        .find(|n| dot.contains(&format!("{n} [label=\"add\"]")))
        .expect("an add node");
    let into_add: Vec<&&str> = arrows
        .iter()
        .filter(|(_, to)| to == add)
        .map(|(f, _)| f)
        .collect();
    assert_eq!(into_add.len(), 2, "{dot}");
    assert_eq!(into_add[0], into_add[1], "{dot}");
    assert_eq!(dot.matches("[label=\"relu\"]").count(), 1, "{dot}");
}

#[test]
fn a_summary_lists_each_field_outer_first_with_its_output_shape_and_parameters() {
    let net = Net::new().unwrap();
    let x = Tensor::<(Dyn, D<2>)>::zeros_with_dims(&[5, 2]).unwrap();
    let summary = rumus::nn::summarize(&net, &x).unwrap();
    let rows: Vec<(&str, &[usize], usize)> = summary
        .rows
        .iter()
        .map(|r| (r.path.as_str(), r.output.as_slice(), r.parameters))
        .collect();
    // Linear<2, 3>: 2 * 3 weights and 3 biases; Linear<3, 1>: 3 + 1.
    assert_eq!(
        rows,
        [
            ("encoder", &[5, 3][..], 9),
            ("encoder.fc1", &[5, 3][..], 9),
            ("head", &[5, 1][..], 4),
        ]
    );
    assert_eq!(
        (summary.input.as_slice(), summary.output.as_slice()),
        (&[5, 2][..], &[5, 1][..])
    );
    assert_eq!(summary.parameters, net.num_parameters());
    let text = summary.to_string();
    assert!(
        text.contains("  fc1") && text.contains("Total parameters: 13"),
        "{text}"
    );
}

#[test]
fn forward_hooks_see_inner_fields_first_and_stop_when_dropped() {
    use std::cell::RefCell;
    use std::rc::Rc;

    let net = Net::new().unwrap();
    let x = Tensor::<(Dyn, D<2>)>::zeros_with_dims(&[4, 2]).unwrap();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let log = seen.clone();
    let hook = rumus::nn::register_forward_hook(move |path, output| {
        log.borrow_mut()
            .push((path.to_string(), output.dims().to_vec()));
    });
    net.forward(&x).unwrap();
    drop(hook);
    net.forward(&x).unwrap();
    assert_eq!(
        *seen.borrow(),
        [
            ("encoder.fc1".to_string(), vec![4, 3]),
            ("encoder".to_string(), vec![4, 3]),
            ("head".to_string(), vec![4, 1]),
        ]
    );
}

/// `y = sum((3 x)^2)`: the gradient reaching `h = 3 x` is `2 h`, and `x`'s is `3 * 2 h`.
fn squared(x: &DynTensor) -> (DynTensor, DynTensor) {
    let h = x.mul_scalar(3.0).unwrap();
    let y = h.mul(&h).unwrap().sum_all().unwrap();
    (h, y)
}

#[test]
fn a_tensor_hook_sees_the_finished_gradient_and_may_replace_it() {
    let x = DynTensor::from_vec(vec![1.0f32, -2.0], &[2])
        .unwrap()
        .requires_grad_()
        .unwrap();
    let (h, y) = squared(&x);
    let expected_h = rumus::autograd::grad(&[&y], &[&h], false).unwrap()[0].to_f64_vec();
    assert_eq!(expected_h, [6.0, -12.0]);

    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let first = h
        .register_hook(move |g| {
            log.lock().unwrap().push(g.to_f64_vec());
            Ok(Some(g.mul_scalar(0.5)?))
        })
        .unwrap();
    // A second hook sees the first one's result.
    let log = seen.clone();
    let second = h
        .register_hook(move |g| {
            log.lock().unwrap().push(g.to_f64_vec());
            Ok(None)
        })
        .unwrap();
    let grads = y.backward().unwrap();
    assert_eq!(*seen.lock().unwrap(), [expected_h.clone(), vec![3.0, -6.0]]);
    // The halved gradient flowed on to `x`: 3 * (2 h) / 2.
    assert_eq!(grads.grad(&x).unwrap().to_f64_vec(), [9.0, -18.0]);

    drop((first, second));
    let grads = y.backward().unwrap();
    assert_eq!(grads.grad(&x).unwrap().to_f64_vec(), [18.0, -36.0]);
    assert_eq!(seen.lock().unwrap().len(), 2, "dropped hooks do not run");
}

#[test]
fn a_leaf_hook_changes_the_stored_gradient_and_bad_hooks_are_errors() {
    let x = DynTensor::from_vec(vec![1.0f32, -2.0], &[2])
        .unwrap()
        .requires_grad_()
        .unwrap();
    let (_, y) = squared(&x);
    let zero = x.register_hook(|g| Ok(Some(g.mul_scalar(0.0)?))).unwrap();
    assert_eq!(
        y.backward().unwrap().grad(&x).unwrap().to_f64_vec(),
        [0.0, 0.0]
    );
    drop(zero);

    let wrong = x
        .register_hook(|_| Ok(Some(DynTensor::zeros(&[3], DType::F32)?)))
        .unwrap();
    let err = y.backward().unwrap_err().to_string();
    assert!(
        err.contains("returned a [3] f32 gradient for a [2] f32 one"),
        "{err}"
    );
    drop(wrong);

    let constant = DynTensor::zeros(&[2], DType::F32).unwrap();
    let err = constant
        .register_hook(|_| Ok(None))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("does not require a gradient"), "{err}");
}

/// Every field's output gradient, head first, each equal to what `grad` computes for the
/// output a forward hook saw.
#[test]
fn module_backward_hooks_see_each_fields_output_gradient() {
    let net = Net::new().unwrap();
    let x =
        Tensor::<(Dyn, D<2>)>::from_vec_with_dims(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let outputs = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let keep = outputs.clone();
    let forward = rumus::nn::register_forward_hook(move |path, out| {
        keep.borrow_mut().push((path.to_string(), out.clone()));
    });
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let backward = rumus::nn::register_backward_hook(move |path, grad| {
        log.lock()
            .unwrap()
            .push((path.to_string(), grad.to_f64_vec()));
    });
    let out = net.forward(&x).unwrap();
    let loss = out.as_dyn().mul(out.as_dyn()).unwrap().sum_all().unwrap();
    loss.backward().unwrap();
    drop(forward);
    let calls = seen.lock().unwrap().clone();
    let paths: Vec<&str> = calls.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["head", "encoder", "encoder.fc1"]);
    for (path, grad) in &calls {
        let outputs = outputs.borrow();
        let output = &outputs.iter().find(|(p, _)| p == path).unwrap().1;
        let expected = rumus::autograd::grad(&[&loss], &[output], false).unwrap();
        assert_eq!(grad, &expected[0].to_f64_vec(), "{path}");
    }
    // Removed with its handle: the next backward calls nothing.
    drop(backward);
    let out = net.forward(&x).unwrap();
    out.as_dyn().sum_all().unwrap().backward().unwrap();
    assert_eq!(seen.lock().unwrap().len(), 3);
}
