use rumus::prelude::*;

#[test]
fn builds() {
    let x = DynTensor::ones(&[2, 2], DType::F32).unwrap();
    assert_eq!(x.sum_all().unwrap().item::<f32>().unwrap(), 4.0);
}
