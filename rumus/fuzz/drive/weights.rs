//! `weights_loader`: a safetensors file of model weights, read from disk (`read_state`) and
//! loaded into a small `#[model]` (`load_state_dict`). What reads writes back and reads
//! again unchanged; what loads is in the model afterwards, and the model runs.

use rumus::io::{read_state, write_state};
use rumus::nn::{BatchNorm1d, Linear, Module};
use rumus::{DType, DynTensor};

use super::same_state;
use super::scratch::Scratch;

/// The model the weights load into: names `fc.weight`, `fc.bias`, `norm.weight`,
/// `norm.bias`, `norm.running_mean` and `norm.running_var`.
#[rumus::model]
pub struct Tiny {
    pub fc: Linear<3, 2>,
    pub norm: BatchNorm1d<2>,
}

pub fn run(bytes: &[u8]) -> rumus::Result<()> {
    let scratch = Scratch::new()?;
    let path = scratch.write("fuzz.safetensors", bytes)?;
    let state = read_state(&path)?;

    let again = scratch.path("again.safetensors");
    write_state(&state, &again).unwrap_or_else(|e| panic!("a state that read does not write: {e}"));
    let reread =
        read_state(&again).unwrap_or_else(|e| panic!("a written state does not read: {e}"));
    assert!(
        same_state(&state, &reread),
        "the state changed on a round trip"
    );

    rumus::manual_seed(0);
    let model = Tiny::new()?;
    model.load_state_dict(&state)?;
    assert!(
        same_state(&model.state_dict()?, &state),
        "the model holds other values"
    );
    model.set_training(false);
    let x = DynTensor::ones(&[2, 3], DType::F32)?;
    model.norm.forward_dyn(&model.fc.forward_dyn(&x)?)?;
    Ok(())
}
