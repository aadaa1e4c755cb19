//! `Debug` output: shape, dtype, graph status and the first values.

use std::fmt;

use super::DynTensor;

/// How many values `Debug` prints before eliding the rest.
const PREVIEW: usize = 8;

impl fmt::Debug for DynTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A GPU that failed (a lost device) leaves the values unreadable: say so, no panic.
        let values = match self.try_to_f64_vec() {
            Ok(values) => values,
            Err(e) => {
                return write!(
                    f,
                    "DynTensor({:?}, {}, <unreadable: {e}>)",
                    self.dims(),
                    self.dtype()
                );
            }
        };
        let preview: Vec<String> = values
            .iter()
            .take(PREVIEW)
            .map(|v| format!("{v:.4}"))
            .collect();
        let more = if values.len() > PREVIEW {
            format!(", ... ({} more)", values.len() - PREVIEW)
        } else {
            String::new()
        };
        write!(
            f,
            "DynTensor({:?}, {}, [{}{more}]",
            self.dims(),
            self.dtype(),
            preview.join(", ")
        )?;
        if let Some(id) = self.id() {
            write!(
                f,
                ", grad #{}{}",
                id.get(),
                if self.is_leaf() { " leaf" } else { "" }
            )?;
        }
        f.write_str(")")
    }
}
