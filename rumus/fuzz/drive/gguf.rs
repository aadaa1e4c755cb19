//! `gguf_reader`: a GGUF model file (llama.cpp's format) opened from bytes, its metadata read
//! and every tensor of a type rumus decodes decoded. What opens must decode: each such tensor
//! has exactly its dims' elements, and one of another type is refused naming its type.

use rumus::io::GgufFile;

pub fn run(bytes: &[u8]) -> rumus::Result<()> {
    let file = GgufFile::from_bytes("fuzz.gguf", bytes.to_vec())?;
    for (key, _) in file.metadata_pairs() {
        assert!(
            file.metadata(key).is_some(),
            "metadata `{key}` listed but not found"
        );
    }
    for info in file.tensor_infos() {
        let numel: usize = info.dims.iter().product();
        match info.bytes {
            Some(size) => {
                let raw = file.raw(&info.name).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(raw.len() as u64, size, "{}: raw bytes", info.name);
                let t = file
                    .tensor(&info.name)
                    .unwrap_or_else(|e| panic!("a checked tensor does not decode: {e}"));
                assert_eq!(t.numel(), numel, "{}: elements", info.name);
            }
            None => {
                let refused = file.tensor(&info.name).unwrap_err().to_string();
                assert!(refused.contains("rumus decodes"), "{refused}");
            }
        }
    }
    Ok(())
}
