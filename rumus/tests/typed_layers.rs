//! Typed application of layers through `Forward`: the output shape type follows the layer,
//! values equal the untyped forward, and models use such layers inside `tensor_fn!` with a
//! declared shape that the type system checks.

use rumus::nn::{
    Conv2d, Embedding, Forward, Gru, LayerNorm, Lstm, MaxPool2d, TransformerEncoderBlock,
};
use rumus::prelude::*;

#[model]
struct Tagger {
    embed: Embedding<20, 16>,
    block: TransformerEncoderBlock<16, 2, 32>,
    lstm: Lstm<16, 8>,
    head: Linear<8, 5>,
}

#[model]
impl Tagger {
    tensor_fn! {
        fn forward(&self, ids: [B, T; i64]) -> [B, T, 5] {
            let embedded: [B, T, 16] = self.embed(ids);
            let mixed: [B, T, 16] = self.block(embedded);
            let states: [B, T, 8] = self.lstm(mixed);
            self.head(states)
        }
    }
}

#[test]
fn typed_forwards_follow_the_layer_shapes() {
    manual_seed(1);
    let conv = Conv2d::<3, 8, 3>::new().unwrap();
    let x = Tensor::<(Dyn, D<3>, D<10>, D<10>)>::randn_with_dims(&[2, 3, 10, 10]).unwrap();
    let y: Tensor<(Dyn, D<8>, Dyn, Dyn)> = conv.forward_typed(&x).unwrap();
    assert_eq!(y.dims(), &[2, 8, 8, 8]);
    assert_eq!(
        y.to_vec().unwrap(),
        conv.forward_dyn(x.as_dyn())
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    );
    let pooled = MaxPool2d::new(2).forward_typed(&y).unwrap();
    assert_eq!(pooled.dims(), &[2, 8, 4, 4]);

    let norm = LayerNorm::<6>::new().unwrap();
    let seq = Tensor::<(D<2>, D<3>, D<6>)>::randn();
    let normed: Tensor<(D<2>, D<3>, D<6>)> = norm.forward_typed(&seq).unwrap();
    assert_eq!(normed.dims(), &[2, 3, 6]);
    let gru = Gru::<6, 4>::new().unwrap();
    let out: Tensor<(D<2>, D<3>, D<4>)> = gru.forward_typed(&seq).unwrap();
    assert_eq!(out.dims(), &[2, 3, 4]);
}

#[test]
fn models_use_typed_layers_with_declared_shapes() {
    manual_seed(2);
    let tagger = Tagger::new().unwrap();
    tagger.eval();
    let ids: Tensor<(Dyn, Dyn), i64> =
        DynTensor::from_vec((0..12).map(|i| i % 20).collect::<Vec<i64>>(), &[3, 4])
            .unwrap()
            .try_typed()
            .unwrap();
    let tags = tagger.forward(&ids).unwrap();
    assert_eq!(tags.dims(), &[3, 4, 5]);
    let grads = tags.sum_all().backward().unwrap();
    assert!(
        tagger.parameters().iter().all(|p| grads.get(p).is_some()),
        "every parameter gets a gradient"
    );
}

#[test]
fn a_linear_layer_fed_the_wrong_width_names_itself_and_its_input_width() {
    let layer = rumus::nn::Linear::<2, 3>::new().unwrap();
    let x = DynTensor::zeros(&[4, 3], DType::F32).unwrap();
    let message = layer.forward_dyn(&x).unwrap_err().to_string();
    assert!(
        message.contains("Linear<2, 3>")
            && message.contains("[.., 2]")
            && message.contains("[4, 3]"),
        "{message}"
    );
    // The op itself says which axis of which operand disagrees, in PyTorch's weight layout.
    let weight = DynTensor::zeros(&[3, 2], DType::F32).unwrap();
    let message = x.linear(&weight, None).unwrap_err().to_string();
    assert!(
        message.contains("[4, 3] has 3 features")
            && message.contains("[out_features, in_features]) takes 2"),
        "{message}"
    );
}
