//! `rumus-serve --model FILE.gguf`: serves the model over OpenAI's HTTP API until Ctrl-C or
//! SIGTERM, then finishes the answers in flight and exits.

use rumus_serve::options::Options;

fn main() {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("rumus-serve: {message}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("rumus-serve: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let served = runtime.block_on(async {
        let address = format!("{}:{}", options.host, options.port);
        let listener = tokio::net::TcpListener::bind(&address)
            .await
            .map_err(|e| format!("cannot listen on {address}: {e}"))?;
        rumus_serve::serve(options, listener, shutdown_signal()).await
    });
    if let Err(message) = served {
        eprintln!("rumus-serve: {message}");
        std::process::exit(1);
    }
}

/// Ctrl-C, or SIGTERM where there are signals.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    eprintln!("rumus-serve: shutting down after the answers in flight");
}
