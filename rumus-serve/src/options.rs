//! The command line of `rumus-serve`.

use rumus::llm::WeightFormat;

/// What `rumus-serve` serves and how much it lets requests take.
#[derive(Debug, Clone)]
pub struct Options {
    /// The GGUF file.
    pub model: String,
    /// The name clients use (`model` in requests); the file's name without `.gguf`.
    pub name: Option<String>,
    pub host: String,
    /// 0: any free port (the one taken is printed).
    pub port: u16,
    pub weights: WeightFormat,
    /// Sequences per step at most.
    pub max_batch: usize,
    /// Tokens of the key/value pool (default: the larger of the context and 16,384).
    pub kv_tokens: Option<usize>,
    /// Prompt plus answer per request (default: the model's trained context).
    pub context: Option<usize>,
    /// `max_tokens` a request may ask for, and the chat endpoint's default.
    pub max_tokens: usize,
    /// Requests in flight at once; more get 429.
    pub max_concurrent: usize,
    pub max_body_bytes: usize,
}

pub const USAGE: &str = "usage: rumus-serve --model FILE.gguf [--name NAME] [--host 127.0.0.1] \
[--port 8080] [--f32] [--max-batch 16] [--kv-tokens N] [--context N] [--max-tokens 1024] \
[--max-concurrent 256] [--max-body-bytes 1048576]";

impl Options {
    /// The options in `args` (without the program's name).
    ///
    /// # Errors
    /// An unknown flag, a missing or malformed value, or no `--model`.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
        let mut options = Options {
            model: String::new(),
            name: None,
            host: "127.0.0.1".into(),
            port: 8080,
            weights: WeightFormat::AsStored,
            max_batch: 16,
            kv_tokens: None,
            context: None,
            max_tokens: 1024,
            max_concurrent: 256,
            max_body_bytes: 1 << 20,
        };
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let mut value = || args.next().ok_or(format!("{flag} needs a value"));
            fn number<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String> {
                v.parse::<T>()
                    .map_err(|_| format!("{flag} takes a whole number, not `{v}`"))
            }
            match flag.as_str() {
                "--model" => options.model = value()?,
                "--name" => options.name = Some(value()?),
                "--host" => options.host = value()?,
                "--port" => options.port = number(&flag, value()?)?,
                "--f32" => options.weights = WeightFormat::F32,
                "--max-batch" => options.max_batch = number(&flag, value()?)?,
                "--kv-tokens" => options.kv_tokens = Some(number(&flag, value()?)?),
                "--context" => options.context = Some(number(&flag, value()?)?),
                "--max-tokens" => options.max_tokens = number(&flag, value()?)?,
                "--max-concurrent" => options.max_concurrent = number(&flag, value()?)?,
                "--max-body-bytes" => options.max_body_bytes = number(&flag, value()?)?,
                "--help" | "-h" => return Err(USAGE.into()),
                other => return Err(format!("unknown option `{other}`\n{USAGE}")),
            }
        }
        if options.model.is_empty() {
            return Err(format!("--model is required\n{USAGE}"));
        }
        if options.max_batch == 0 || options.max_tokens == 0 || options.max_concurrent == 0 {
            return Err("--max-batch, --max-tokens and --max-concurrent must be above 0".into());
        }
        Ok(options)
    }

    /// The name requests must use.
    pub fn model_id(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            let file = std::path::Path::new(&self.model)
                .file_name()
                .map_or_else(|| self.model.clone(), |f| f.to_string_lossy().into_owned());
            file.strip_suffix(".gguf").unwrap_or(&file).to_string()
        })
    }
}
