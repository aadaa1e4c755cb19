//! The byte-level BPE tokenizer a GGUF file carries (`tokenizer.ggml.*` metadata: tokens,
//! merges, token types), built on Hugging Face's `tokenizers`, so text splits as it did when
//! the model was trained: the same pre-tokenization regex, byte-level alphabet and merges.

use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, PreTokenizerWrapper};

use crate::error::{Error, Result};
use crate::io::{GgufFile, GgufValue};

/// GGUF's token types that are special tokens (`<|im_start|>`): `CONTROL` and
/// `USER_DEFINED`, matched whole in text before the BPE splits it.
const SPECIAL_TYPES: [i64; 2] = [3, 4];

/// A language model's tokenizer: text to token ids and back.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// Ids below this are tokens (asked of `inner` once: it builds its whole vocabulary to
    /// count it).
    vocab_size: i64,
    bos: Option<u32>,
    eos: Option<u32>,
}

fn invalid(message: String) -> Error {
    Error::InvalidArgument {
        op: "Tokenizer",
        message,
    }
}

fn failed(doing: &str, e: impl std::fmt::Display) -> Error {
    invalid(format!("{doing}: {e}"))
}

impl Tokenizer {
    /// The tokenizer in `file`'s metadata: a byte-level BPE (`tokenizer.ggml.model` "gpt2")
    /// with the pre-tokenizer of GPT-2 or of SmolLM (`tokenizer.ggml.pre` "gpt2",
    /// "smollm": digits one by one first).
    ///
    /// # Errors
    /// Another tokenizer model or pre-tokenizer (named), or metadata missing or malformed.
    pub fn from_gguf(file: &GgufFile) -> Result<Tokenizer> {
        let text = |key: &str| file.metadata(key).and_then(GgufValue::as_str);
        let array = |key: &str| {
            file.metadata(key)
                .and_then(GgufValue::as_array)
                .ok_or_else(|| invalid(format!("the file has no array `{key}`")))
        };
        let model = text("tokenizer.ggml.model");
        if model != Some("gpt2") {
            return Err(invalid(format!(
                "tokenizer.ggml.model is {model:?}; rumus reads byte-level BPE tokenizers \
                 (\"gpt2\")"
            )));
        }
        let pre = text("tokenizer.ggml.pre").unwrap_or("gpt2");
        let byte_level = ByteLevel::new(false, true, true);
        let pre_tokenizer: PreTokenizerWrapper = match pre {
            "gpt2" => byte_level.into(),
            "smollm" => Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into(),
            other => {
                return Err(invalid(format!(
                    "tokenizer.ggml.pre is \"{other}\"; rumus splits text as \"gpt2\" and \
                     \"smollm\" do"
                )));
            }
        };
        let tokens = array("tokenizer.ggml.tokens")?;
        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(id, token)| match token.as_str() {
                Some(token) => Ok((token.to_string(), id as u32)),
                None => Err(invalid(format!("token {id} is not a string"))),
            })
            .collect::<Result<_>>()?;
        let merges = array("tokenizer.ggml.merges")?
            .iter()
            .map(|merge| {
                merge
                    .as_str()
                    .and_then(|m| m.split_once(' '))
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| invalid(format!("merge {merge:?} is not two tokens")))
            })
            .collect::<Result<Vec<_>>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| failed("building the BPE", e))?;
        let mut inner = tokenizers::Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(pre_tokenizer));
        inner.with_decoder(Some(ByteLevel::default()));
        let types = file
            .metadata("tokenizer.ggml.token_type")
            .and_then(GgufValue::as_array)
            .unwrap_or(&[]);
        let special: Vec<AddedToken> = tokens
            .iter()
            .zip(types)
            .filter(|(_, kind)| kind.as_i64().is_some_and(|k| SPECIAL_TYPES.contains(&k)))
            .filter_map(|(token, _)| token.as_str())
            .map(|token| AddedToken::from(token.to_string(), true))
            .collect();
        inner.add_special_tokens(&special);
        let id = |key: &str| {
            file.metadata(key)
                .and_then(GgufValue::as_u64)
                .map(|v| v as u32)
                .filter(|&v| (v as usize) < tokens.len())
        };
        Ok(Tokenizer {
            vocab_size: inner.get_vocab_size(true) as i64,
            inner,
            bos: id("tokenizer.ggml.bos_token_id"),
            eos: id("tokenizer.ggml.eos_token_id"),
        })
    }

    /// The token ids of `text` (special tokens written in it, `<|im_start|>`, are matched as
    /// such).
    ///
    /// # Errors
    /// The tokenizer's own failure, if any.
    pub fn encode(&self, text: &str) -> Result<Vec<i64>> {
        let encoding = self
            .inner
            .encode(text, false)
            .map_err(|e| failed("encoding", e))?;
        Ok(encoding.get_ids().iter().map(|&id| i64::from(id)).collect())
    }

    /// The text of `ids`, with or without the special tokens among them.
    ///
    /// # Errors
    /// An id outside the vocabulary.
    pub fn decode(&self, ids: &[i64], skip_special: bool) -> Result<String> {
        let size = self.vocab_size;
        let ids = ids
            .iter()
            .map(|&id| {
                u32::try_from(id).ok().filter(|_| id < size).ok_or_else(|| {
                    invalid(format!("token id {id} is outside the vocabulary of {size}"))
                })
            })
            .collect::<Result<Vec<u32>>>()?;
        self.inner
            .decode(&ids, skip_special)
            .map_err(|e| failed("decoding", e))
    }

    /// The id of the token that starts a text, if the model has one.
    pub fn bos(&self) -> Option<i64> {
        self.bos.map(i64::from)
    }

    /// The id of the token that ends a turn (generation stops after it), if any.
    pub fn eos(&self) -> Option<i64> {
        self.eos.map(i64::from)
    }
}

/// A conversation in ChatML (`<|im_start|>role\ncontent<|im_end|>\n` per message), the chat
/// template of SmolLM2, Qwen and others, ending with the assistant's turn opened when
/// `generation_prompt` is set.
pub fn chat_ml(messages: &[(&str, &str)], generation_prompt: bool) -> String {
    let mut text = String::new();
    for (role, content) in messages {
        text.push_str(&format!("<|im_start|>{role}\n{content}<|im_end|>\n"));
    }
    if generation_prompt {
        text.push_str("<|im_start|>assistant\n");
    }
    text
}
