use rumus::prelude::*;

#[model]
struct Stem {
    #[conv(padding = 1)]
    conv: Conv2d<3, 16, 3>,
}

#[model]
impl Stem {
    tensor_fn! {
        fn forward(&self, images: [B, H, W, 3]) -> [B, 16, H, W] {
            self.conv(images.permute([0, 3, 1, 2]))
        }
    }
}

fn main() -> rumus::Result<()> {
    let x = Tensor::<(Dyn, Dyn, Dyn, D<3>)>::randn_with_dims(&[2, 5, 6, 3])?;
    assert_eq!(Stem::new()?.forward(&x)?.dims(), &[2, 16, 5, 6]);
    Ok(())
}
