//! `strobe serve`: the Open Traffic Generator REST server (strobe-serve) on an address.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use clap::Args;
use strobe_control::PlanOptions;
use strobe_serve::ServeOptions;

use crate::failure::Failure;
use crate::lab_cmd::DEFAULT_PREFIX;
use crate::signals;

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on. Loopback by default; any other address must be given here.
    #[arg(long, default_value_t = strobe_serve::default_listen(), value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// Serve OTG over gRPC too, on this address (ixia-c's is 40051, e.g. 127.0.0.1:40051):
    /// snappi.api(location="ADDR", transport=snappi.Transport.GRPC). One server state for
    /// both; the token, when there is one, goes in `authorization: Bearer TOKEN` metadata.
    /// With --tls-cert, gRPC is served over TLS with the same certificate. Not with --agent.
    #[arg(long, value_name = "ADDR:PORT")]
    grpc_listen: Option<SocketAddr>,
    /// A file of port names for configs to use as locations, one `NAME = "LOCATION"` per
    /// line (TOML), e.g. `p1 = "afxdp:eth1@0"`.
    #[arg(long, value_name = "FILE")]
    location_map: Option<PathBuf>,
    /// Prefix of the lab that `lab:tx` / `lab:rx` locations refer to.
    #[arg(long, default_value = DEFAULT_PREFIX, value_name = "PREFIX")]
    lab: String,
    /// Serve HTTPS with this certificate (PEM; with --tls-key). snappi takes
    /// `https://…` locations (verify=False for a self-signed certificate).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Leave strobe's detail (`x_strobe`: percentiles, reorder, duplicates, timestamp
    /// sources) out of flow metrics for every client (snappi ignores it; for gosnappi,
    /// which refuses fields the model does not name, it is always left out).
    #[arg(long)]
    no_extensions: bool,
    #[command(flatten)]
    history: crate::runs_cmd::HistoryArgs,
    /// How long receivers keep counting after the last frame was sent, e.g. 200ms.
    #[arg(long, default_value = "500ms", value_parser = crate::values::positive_text)]
    drain: String,
    /// Require this token from every client, for the API and /metrics alike
    /// (`Authorization: Bearer TOKEN`, or in the location URL: http://strobe:TOKEN@HOST:PORT).
    /// A server listening beyond loopback always requires one: without --token it makes one
    /// up and prints it. At least 16 characters of A-Z, a-z, 0-9, `.`, `_`, `~`, `-`.
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    token: Option<String>,
    /// Read the token from this file (its first line) instead: it stays out of the process
    /// list and the log (a systemd credential, a secret mounted in a container).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Be the controller of a strobe agent on another host (`strobe serve` there): a port
    /// location `NAME/LOCATION` is LOCATION on that agent. The agent's token goes in the URL
    /// as clients give it: `hostb=https://strobe:TOKEN@198.18.250.2:8443`. Repeatable.
    #[arg(long = "agent", value_name = "NAME=URL")]
    agents: Vec<String>,
    /// Agents from a file: one TOML table per agent, `[NAME]` with `url`, and optionally
    /// `token` (or `token_file`) and `ca` (the PEM certificate to trust for its HTTPS).
    #[arg(long = "agents", value_name = "FILE")]
    agents_file: Option<PathBuf>,
    /// The certificate (PEM) to trust for every `--agent`'s HTTPS: their CA, or a
    /// self-signed certificate they share.
    #[arg(long, value_name = "FILE")]
    agent_ca: Option<PathBuf>,
    /// A controller starts its agents' senders at one time, this long after every agent is
    /// ready (ports open, receivers counting): time for its "go" to reach them, e.g. 100ms.
    #[arg(long, default_value = "100ms", value_parser = crate::values::positive_text)]
    start_lead: String,
    /// A controller shows a flow's one-way latency across hosts only when both ends' clocks
    /// are known to agree within this (their sync sources' bounds added, e.g. 10us); else it
    /// is withheld with the reason. Agents on one machine share its clock.
    #[arg(long, default_value = "10us", value_parser = crate::values::positive_text)]
    max_clock_error: String,
    /// ptp4l's management socket, where this host's clock sync is read from (`pmc`).
    #[arg(long, default_value = "/var/run/ptp4l", value_name = "PATH")]
    ptp4l_socket: PathBuf,
}

/// The agents of `--agent` and `--agents`.
fn agents(args: &ServeArgs) -> Result<Vec<strobe_serve::controller::AgentSpec>, Failure> {
    use strobe_serve::controller::AgentSpec;
    let mut agents = Vec::new();
    for flag in &args.agents {
        agents
            .push(AgentSpec::from_flag(flag, args.agent_ca.as_deref()).map_err(Failure::BadInput)?);
    }
    if let Some(path) = &args.agents_file {
        let bad = |m: String| Failure::BadInput(format!("--agents {}: {m}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        agents.extend(AgentSpec::from_file(&text, dir).map_err(bad)?);
    }
    Ok(agents)
}

/// Reads `--location-map`: a TOML table of name → location.
fn location_map(path: &PathBuf) -> Result<Vec<(String, String)>, Failure> {
    let bad = |m: String| Failure::BadInput(format!("--location-map {}: {m}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| bad(e.to_string()))?;
    table
        .into_iter()
        .map(|(name, value)| match value {
            toml::Value::String(location) => Ok((name, location)),
            other => Err(bad(format!(
                "`{name}` is {} — give each name a location string, e.g. {name} = \"afxdp:eth1@0\"",
                other.type_str()
            ))),
        })
        .collect()
}

pub fn run(mut args: ServeArgs) -> Result<(), Failure> {
    let locations = args
        .location_map
        .as_ref()
        .map(location_map)
        .transpose()?
        .unwrap_or_default();
    let drain_ns = strobe_control::timing::parse_duration_ns(&args.drain)
        .map_err(|e| Failure::BadInput(format!("--drain {}: {e}", args.drain)))?;
    let start_lead_ns = strobe_control::timing::parse_duration_ns(&args.start_lead)
        .map_err(|e| Failure::BadInput(format!("--start-lead {}: {e}", args.start_lead)))?;
    let controller = strobe_serve::controller::ControllerOptions {
        agents: agents(&args)?,
        start_lead: std::time::Duration::from_nanos(start_lead_ns),
        max_clock_error_ns: strobe_control::timing::parse_duration_ns(&args.max_clock_error)
            .map_err(|e| {
                Failure::BadInput(format!("--max-clock-error {}: {e}", args.max_clock_error))
            })?,
    };
    let clock_probe = strobe_control::host::ClockProbe {
        pmc_socket: Some(args.ptp4l_socket.clone()),
        ..strobe_control::host::ClockProbe::default()
    };
    let token_from_file = args.token_file.is_some();
    if let Some(path) = &args.token_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::BadInput(format!("--token-file {}: {e}", path.display())))?;
        let first = text.lines().next().unwrap_or_default().trim().to_string();
        if first.is_empty() {
            return Err(Failure::BadInput(format!(
                "--token-file {}: the file is empty — write the token on its first line",
                path.display()
            )));
        }
        args.token = Some(first);
    }
    if let Some(token) = args.token.as_deref() {
        // Characters that go into a header and a URL's password as they are.
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '-');
        if token.len() < 16 || !token.chars().all(plain) {
            return Err(Failure::BadInput(
                "--token: give at least 16 characters of A-Z, a-z, 0-9, `.`, `_`, `~` and `-` \
                 (e.g. the output of `openssl rand -hex 16`), or leave it out to have one made up"
                    .into(),
            ));
        }
    }
    // Beyond loopback the server is reachable by others: never without a token.
    let token = match args.token {
        Some(token) => Some(token),
        None if strobe_serve::auth::needs_token(&args.listen)
            || args
                .grpc_listen
                .is_some_and(|a| strobe_serve::auth::needs_token(&a)) =>
        {
            Some(strobe_serve::auth::new_token())
        }
        None => None,
    };
    // The page takes the token from its address's fragment (never sent over the wire).
    let dashboard_token = match &token {
        Some(_) if token_from_file => "#token=TOKEN".to_string(),
        Some(t) => format!("#token={t}"),
        None => String::new(),
    };
    let token_note = token.as_ref().map(|t| {
        // A token from a file is kept out of the log too.
        let t = if token_from_file {
            "from --token-file"
        } else {
            t.as_str()
        };
        format!(
            "; every request needs the token {t} (Authorization: Bearer TOKEN, or \
             snappi.api(location=\"SCHEME://strobe:TOKEN@ADDRESS\"))"
        )
    });
    // Opened once here so that a --db that cannot be written fails at start, not at the
    // first run's end; each recording opens it again (off the request's way).
    let history = args
        .history
        .recorder()?
        .path()
        .map(|path| strobe_serve::RunHistory {
            path: path.to_owned(),
            build: crate::runs_cmd::build(),
        });
    let options = ServeOptions {
        plan: PlanOptions {
            lab_prefix: args.lab,
            drain_ns,
            ..PlanOptions::default()
        },
        locations,
        no_extensions: args.no_extensions,
        token,
        history,
        controller,
        clock_probe,
    };
    let signals = signals::install()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("cannot start the server's runtime: {e}")))?;
    let stop = signals.stop.clone();
    let shutdown = async move {
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    let announce = move |scheme: &str, address: SocketAddr| {
        eprintln!(
            "strobe serve: Open Traffic Generator API on {scheme}://{address} (snappi: \
             snappi.api(location=\"{scheme}://{address}\")){}; Ctrl-C stops",
            token_note.as_deref().unwrap_or_default()
        );
        eprintln!("strobe serve: dashboard on {scheme}://{address}/{dashboard_token}");
    };
    let cannot_listen = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::InvalidInput && e.to_string().starts_with("agent") {
            Failure::BadInput(format!("--agent: {e}"))
        } else if e.kind() == std::io::ErrorKind::InvalidInput {
            Failure::BadInput(format!("--tls-cert/--tls-key: {e}"))
        } else {
            Failure::BadInput(format!(
                "--listen {}: cannot listen there: {e} (is another server on that port? give \
                 another with --listen 127.0.0.1:PORT)",
                args.listen
            ))
        }
    };
    let tls = args
        .tls_cert
        .zip(args.tls_key)
        .map(|(cert, key)| strobe_serve::Tls { cert, key });
    if let (Some(tls), None) = (&tls, args.grpc_listen) {
        runtime
            .block_on(strobe_serve::serve_tls(
                args.listen,
                tls,
                options,
                shutdown,
                move |address| announce("https", address),
            ))
            .map_err(cannot_listen)?;
    } else {
        let grpc_listen = args.grpc_listen;
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind(args.listen)
                .await
                .map_err(cannot_listen)?;
            let scheme = if tls.is_some() { "https" } else { "http" };
            announce(scheme, listener.local_addr().unwrap_or(args.listen));
            let Some(grpc_address) = grpc_listen else {
                return strobe_serve::serve(listener, options, shutdown)
                    .await
                    .map_err(|e| Failure::Runtime(format!("the server failed: {e}")));
            };
            let grpc = tokio::net::TcpListener::bind(grpc_address)
                .await
                .map_err(|e| {
                    Failure::BadInput(format!(
                        "--grpc-listen {grpc_address}: cannot listen there: {e} (is another \
                         server on that port? give another with --grpc-listen 127.0.0.1:PORT)"
                    ))
                })?;
            eprintln!(
                "strobe serve: Open Traffic Generator API over gRPC{} on {} (snappi: \
                 snappi.api(location=\"{1}\", transport=snappi.Transport.GRPC))",
                if tls.is_some() { " with TLS" } else { "" },
                grpc.local_addr().unwrap_or(grpc_address)
            );
            strobe_serve::serve_with_grpc(listener, grpc, tls.as_ref(), options, shutdown)
                .await
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::InvalidInput if e.to_string().starts_with("cannot use") => {
                        Failure::BadInput(format!("--tls-cert/--tls-key: {e}"))
                    }
                    std::io::ErrorKind::InvalidInput => Failure::BadInput(e.to_string()),
                    _ => Failure::Runtime(format!("the server failed: {e}")),
                })
        })?;
    }
    eprintln!("strobe serve: stopped");
    Ok(())
}
