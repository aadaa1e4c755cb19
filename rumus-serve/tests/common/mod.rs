//! The workspace's test helpers this crate's tests share: where the SmolLM2 model is, and
//! the skip note when it is not.

#[path = "../../../tests/common/skip.rs"]
pub mod skip;
#[path = "../../../tests/common/smollm2.rs"]
pub mod smollm2;
