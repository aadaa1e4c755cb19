//! Convolution options from field attributes feed the shape calculator.
use rumus::prelude::*;

#[model]
struct Downsample {
    #[conv(stride = 2, padding = 1)]
    conv: Conv2d<3, 8, 3>,
    #[conv(dilation = 2, groups = 4, exact)]
    dilated: Conv2d<8, 8, 3>,
}

#[model]
impl Downsample {
    tensor_fn! {
        fn forward(&self, x: [B, 3, 32, 32]) -> [B, 8, 12, 12] {
            let h = self.conv(x).relu();
            self.dilated(h).adaptive_avg_pool2d([12, 12])
        }
    }
}

fn main() -> rumus::Result<()> {
    let model = Downsample::new()?;
    let y = model.forward(&Tensor::<(D<1>, D<3>, D<32>, D<32>)>::zeros())?;
    assert_eq!(y.dims(), &[1, 8, 12, 12]);
    assert_eq!(model.dilated.weight.dims(), &[8, 2, 3, 3], "grouped weight");
    Ok(())
}
