//! Reading and writing files: model weights (safetensors).

mod safetensors;

pub use self::safetensors::{load_safetensors, read_state, save_safetensors, write_state};
