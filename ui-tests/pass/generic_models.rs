//! Generic `#[model]` structs: const parameters in field types and forward shapes, a model
//! generic over a layer type (built with `Construct`), a tuple struct that runs its fields in
//! order, and `_` for sizes a nested model computes.
use rumus::nn::{BatchNorm2d, Construct};
use rumus::prelude::*;

#[model]
struct Residual<const C: usize> {
    #[conv(padding = 1)]
    conv: Conv2d<C, C, 3>,
    bn: BatchNorm2d<C>,
}

#[model]
impl<const C: usize> Residual<C> {
    tensor_fn! {
        fn forward(&self, x: [B, C, H, W]) -> [B, C, H, W] {
            relu(self.bn(self.conv(x)) + x)
        }
    }
}

#[model]
struct Down<const IN: usize, const OUT: usize>(
    #[conv(stride = 2, padding = 1)] Conv2d<IN, OUT, 3>,
    Relu,
);

#[model]
struct Stage<const IN: usize, const OUT: usize>(Down<IN, OUT>, Residual<OUT>, Residual<OUT>);

#[model]
struct Net<const CLASSES: usize> {
    stage: Stage<3, 8>,
    fc: Linear<8, CLASSES>,
}

#[model]
impl<const CLASSES: usize> Net<CLASSES> {
    tensor_fn! {
        fn forward(&self, x: [B, 3, H, W]) -> [B, CLASSES] {
            let h: [B, 8, _, _] = self.stage(x);
            self.fc(h.mean(3).mean(2))
        }
    }
}

/// Generic over the layer it wraps.
#[model]
struct Twice<L> {
    first: L,
    second: L,
}

fn main() -> rumus::Result<()> {
    let net = Net::<5>::new()?;
    let x = Tensor::<(Dyn, D<3>, Dyn, Dyn)>::randn_with_dims(&[2, 3, 9, 9])?;
    assert_eq!(net.forward(&x)?.dims(), &[2, 5]);
    let names: Vec<String> = net.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert!(names.contains(&"stage.0.0.weight".to_string()), "{names:?}");
    assert!(names.contains(&"stage.2.bn.weight".to_string()), "{names:?}");

    // A tuple struct's forward is the chain of its fields.
    let down = Down::<3, 4>::new()?;
    assert_eq!(down.forward(&x)?.dims(), &[2, 4, 5, 5]);

    let twice = <Twice<Linear<4, 4>> as Construct>::construct()?;
    assert_eq!(twice.num_parameters(), 2 * (4 * 4 + 4));
    Ok(())
}
