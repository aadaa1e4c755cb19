//! The classifier of the design brief: convolutions, pooling, flatten, linear layers.
use rumus::prelude::*;

#[model]
struct Classifier {
    conv1: Conv2d<1, 32, 3>,
    conv2: Conv2d<32, 64, 3>,
    fc1: Linear<1600, 128>,
    fc2: Linear<128, 10>,
}

#[model]
impl Classifier {
    tensor_fn! {
        fn forward(&self, x: [B, 1, 28, 28]) -> [B, 10] {
            let h = self.conv1(x).relu().max_pool2d(2);
            let h = self.conv2(h).relu().max_pool2d(2);
            let h = self.fc1(h.flatten(1)).relu();
            self.fc2(h)
        }
    }
}

fn main() -> rumus::Result<()> {
    let model = Classifier::new()?;
    let x = Tensor::<(Dyn, D<1>, D<28>, D<28>)>::zeros_with_dims(&[2, 1, 28, 28])?;
    let logits = model.forward(&x)?;
    assert_eq!(logits.dims(), &[2, 10]);
    assert!(model.to_string().contains("(conv2): Conv2d(32, 64"));
    Ok(())
}
