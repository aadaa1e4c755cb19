//! Reductions, views, joins and slices through the shape calculator.
use rumus::prelude::*;

tensor_fn! {
    fn shuffle(x: [B, 6, 4], y: [B, 2, 4]) -> [B, 4, 2] {
        let joined = cat([x, y], 1);
        let summed = joined.reshape([B, 2, _, 4]).sum(1);
        let window = summed.slice(1, 0..2);
        let stacked = stack([window, window], 0).mean(0);
        let centred = stacked - stacked.mean_keepdim(2);
        centred.permute([0, 2, 1]).narrow(2, 0, 2)
    }
}

fn main() -> rumus::Result<()> {
    let x = Tensor::<(Dyn, D<6>, D<4>)>::randn_with_dims(&[3, 6, 4])?;
    let y = Tensor::<(Dyn, D<2>, D<4>)>::randn_with_dims(&[3, 2, 4])?;
    assert_eq!(shuffle(&x, &y)?.dims(), &[3, 4, 2]);
    Ok(())
}
