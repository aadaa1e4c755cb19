//! A residual block generic over the image size: "same" convolutions pass `H` and `W`
//! through, a strided one gives sizes computed at run time, checked against the declared
//! result when the function runs.
use rumus::nn::BatchNorm2d;
use rumus::prelude::*;

#[model]
struct Residual {
    #[conv(padding = 1)]
    conv1: Conv2d<16, 16, 3>,
    bn1: BatchNorm2d<16>,
    #[conv(padding = 2, dilation = 2)]
    conv2: Conv2d<16, 16, 3>,
    #[conv(stride = 2, padding = 1)]
    down: Conv2d<16, 32, 3>,
}

#[model]
impl Residual {
    tensor_fn! {
        fn forward(&self, x: [B, 16, H, W]) -> [B, 16, H, W] {
            let h = self.bn1(self.conv1(x)).relu();
            relu(self.conv2(h) + x)
        }

        fn downsample(&self, x: [B, 16, H, W]) -> [B, 32, 4, 4] {
            self.down(x).max_pool2d(2)
        }
    }
}

fn main() -> rumus::Result<()> {
    let block = Residual::new()?;
    let x = Tensor::<(Dyn, D<16>, Dyn, Dyn)>::randn_with_dims(&[2, 16, 9, 11])?;
    assert_eq!(block.forward(&x)?.dims(), &[2, 16, 9, 11]);
    let x = Tensor::<(Dyn, D<16>, Dyn, Dyn)>::randn_with_dims(&[1, 16, 16, 16])?;
    assert_eq!(block.downsample(&x)?.dims(), &[1, 32, 4, 4]);
    // The computed size is checked when the function runs.
    let x = Tensor::<(Dyn, D<16>, Dyn, Dyn)>::randn_with_dims(&[1, 16, 12, 12])?;
    let error = block.downsample(&x).err().expect("12 -> 6 -> 3, not 4");
    assert!(error.to_string().contains("[1, 32, 3, 3]"), "{error}");
    Ok(())
}
