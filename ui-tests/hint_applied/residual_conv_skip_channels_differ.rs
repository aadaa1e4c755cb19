use rumus::nn::BatchNorm2d;
use rumus::prelude::*;

#[model]
struct Residual {
    #[conv(padding = 1)]
    conv1: Conv2d<64, 64, 3>,
    bn1: BatchNorm2d<64>,
    #[conv(padding = 1)]
    conv2: Conv2d<64, 64, 3>,
    bn2: BatchNorm2d<64>,
}

#[model]
impl Residual {
    tensor_fn! {
        fn forward(&self, x: [B, 64, H, W]) -> [B, 64, H, W] {
            let h = relu(self.bn1(self.conv1(x)));
            relu(self.bn2(self.conv2(h)) + x)
        }
    }
}

fn main() -> rumus::Result<()> {
    let x = Tensor::<(Dyn, D<64>, Dyn, Dyn)>::randn_with_dims(&[1, 64, 5, 5])?;
    assert_eq!(Residual::new()?.forward(&x)?.dims(), &[1, 64, 5, 5]);
    Ok(())
}
