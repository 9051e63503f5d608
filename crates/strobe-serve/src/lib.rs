//! `strobe serve`: an Open Traffic Generator REST server that unmodified `snappi` scripts
//! drive. A thin front end: every run goes through strobe-control (the same plan and run
//! handle as the command line); this crate maps OTG requests onto it and its results back
//! into OTG replies.
//!
//! The data path never waits for the server: runs are on the engine's own threads, and a
//! metrics request reads the run-control watcher's copy of the counters.
#![forbid(unsafe_code)]

pub mod auth;
pub mod controller;
mod grpc;
mod history_api;
mod lease;
mod record;
mod reply;
mod scrape;
mod surface;
mod web;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use strobe_control::capture::{Capture, CaptureSettings};
use strobe_control::history::TrialHistograms;
use strobe_control::model::{warning_texts, Scenario, Warning};
use strobe_control::otg::scenario_from_otg;
use strobe_control::rfc2544::{Rfc2544Spec, TrialRun, TrialRunner};
use strobe_control::session::{start_run, Session};
use strobe_control::study::{StudySpec, StudyStop};
use strobe_control::trains::TrainsSpec;
use strobe_control::y1564::Y1564Spec;
use strobe_control::{ControlError, PlanOptions, RunHandle};
use tokio::sync::Mutex;

pub use grpc::serve_with_grpc;
pub use record::RunHistory;
use reply::{error, internal, ok_json, validation, OtgError};

/// What a handler answers: a JSON reply or an OTG error.
type Reply = Result<Response, OtgError>;

/// The OTG versions this server speaks: every 1.x client from 1.58 on (snappi reads the
/// value as a version range that its own version must fall in).
pub const API_SPEC_VERSION: &str = "^1.58.0";

/// Runs with at most this many flows show their latency per interval live (each interval
/// copies every flow's cumulative histogram, about 230 KB, on the receive path).
const LIVE_LATENCY_MAX_FLOWS: usize = 16;
/// The length of those intervals.
const LIVE_LATENCY_INTERVAL_NS: u64 = 500_000_000;

/// Largest request body taken (a config of 65 536 flows is about 50 MB of JSON).
const MAX_BODY: usize = 128 << 20;

/// How the server runs what it is sent.
#[derive(Clone, Debug, Default)]
pub struct ServeOptions {
    /// Options of every run (lab prefix, drain, cores, …).
    pub plan: PlanOptions,
    /// Port names the user prefers → port locations (`--location-map`).
    pub locations: Vec<(String, String)>,
    /// Leave strobe's `x_strobe` detail out of flow metrics for every client (it is left
    /// out for gosnappi, which refuses fields the OTG model does not name, anyway).
    pub no_extensions: bool,
    /// The token every request must carry (see [`auth`]); None: none is asked for.
    pub token: Option<String>,
    /// Where runs started through the server are recorded (None: nowhere).
    pub history: Option<RunHistory>,
    /// Agents on other hosts: given any, the server is their controller (see [`controller`]).
    pub controller: controller::ControllerOptions,
    /// How this host's clock synchronization is read (`GET /strobe/clock`).
    pub clock_probe: strobe_control::host::ClockProbe,
}

/// The server's state: the config last set and the runs started. Requests that change
/// it take `control` for their whole length, one at a time; `state` is held only to read
/// or write it, never while a run starts or drains, so metrics replies never wait for one.
struct Server {
    options: ServeOptions,
    control: Arc<Mutex<()>>,
    state: Mutex<ServerState>,
    /// Ends the methodology running (between trials, its trial cut short): set by a traffic
    /// stop request and by the server's shutdown; cleared when a methodology starts.
    method_stop: Arc<AtomicBool>,
    /// The server is shutting down: no methodology starts any more.
    shutting_down: AtomicBool,
    /// A methodology is running.
    method_running: Arc<AtomicBool>,
    /// A controller's lease on this agent's runs, and whether its watch runs.
    lease: lease::Lease,
    lease_watched: AtomicBool,
}

/// Tells a server that it is shutting down: the methodology running ends, keeping its
/// trials (its reply and its record say it was stopped), and none starts after it.
#[derive(Clone)]
pub struct ShutdownHandle(Option<Arc<Server>>);

impl ShutdownHandle {
    pub fn shut_down(&self) {
        if let Some(server) = &self.0 {
            server.shutting_down.store(true, Ordering::SeqCst);
            server.method_stop.store(true, Ordering::SeqCst);
        }
    }
}

#[derive(Default)]
struct ServerState {
    /// The config as the client sent it (`GET /config` returns it).
    config: Option<Value>,
    /// The config's scenario and the runs started from it.
    flows: Session,
    /// Ports the config may capture on, and what their captures keep.
    capture_ports: Vec<(String, CaptureSettings)>,
    /// Captures running, and the last capture of each port once stopped.
    capturing: HashMap<String, Capture>,
    captured: HashMap<String, Vec<u8>>,
    /// Port locations whose link a request set down (kept across configs: the interface
    /// stays down until a request sets it up).
    links_down: std::collections::HashSet<String>,
    /// Runs a controller started under its lease (stopped if the lease runs out), and the
    /// gates of its starts still waiting for their time (`POST /strobe/go`).
    leased: Vec<Arc<RunHandle>>,
    waiting: Vec<Arc<strobe_control::StartGate>>,
}

/// The server's routes.
pub fn router(options: ServeOptions) -> Result<Router, String> {
    router_with_shutdown(options).map(|(router, _)| router)
}

/// The server's routes, and the handle that tells it it is shutting down; an error names
/// an agent that cannot be used (its CA file, a name given twice).
pub fn router_with_shutdown(options: ServeOptions) -> Result<(Router, ShutdownHandle), String> {
    let token: Option<Arc<str>> = options.token.as_deref().map(Arc::from);
    if !options.controller.agents.is_empty() {
        let routes = with_token(controller::router(&options)?, token);
        return Ok((routes, ShutdownHandle(None)));
    }
    let server = Arc::new(Server {
        options,
        control: Arc::new(Mutex::new(())),
        state: Mutex::new(ServerState::default()),
        method_stop: Arc::new(AtomicBool::new(false)),
        shutting_down: AtomicBool::new(false),
        method_running: Arc::new(AtomicBool::new(false)),
        lease: lease::Lease::default(),
        lease_watched: AtomicBool::new(false),
    });
    let handle = ShutdownHandle(Some(server.clone()));
    let routes = Router::new()
        .route(
            "/config",
            post(set_config)
                .get(get_config)
                .patch(surface::update_config),
        )
        .route("/control/state", post(set_control_state))
        .route("/control/action", post(surface::control_action))
        .route("/monitor/states", post(surface::monitor_states))
        .route("/monitor/metrics", post(get_metrics))
        .route("/monitor/capture", post(get_capture))
        .route("/capabilities/version", get(get_version))
        .route("/metrics", get(get_prometheus))
        .route("/strobe/trains", post(run_trains))
        .route("/strobe/rfc2544", post(run_rfc2544))
        .route("/strobe/y1564", post(run_y1564))
        .route("/strobe/study", post(run_study))
        .route("/", get(web::index))
        .route("/ui/app.js", get(web::app_js))
        .route("/ui/app.css", get(web::app_css))
        .route("/ui/uPlot.iife.min.js", get(web::uplot_js))
        .route("/ui/uPlot.min.css", get(web::uplot_css))
        .route("/strobe/latency", get(live_latency))
        .route("/strobe/config-toml", post(set_config_toml))
        .route("/strobe/lease", post(renew_lease))
        .route("/strobe/go", post(open_gates))
        .route("/strobe/clock", get(clock_state))
        .route("/strobe/agent", get(agent_settings))
        .route("/strobe/runs", get(history_api::list))
        .route("/strobe/runs/compare", get(history_api::compare))
        .route(
            "/strobe/runs/{id}",
            get(history_api::show).delete(history_api::delete),
        )
        .route(
            "/strobe/runs/{id}/label",
            axum::routing::put(history_api::label),
        )
        // The fallbacks read the body too: one left unread makes the connection close, and a
        // client's next request on it (keep-alive) fail.
        .fallback(|_: Bytes| async {
            error(404, "validation", vec!["no such OTG endpoint".into()])
        })
        .method_not_allowed_fallback(|_: Bytes| async {
            error(
                405,
                "validation",
                vec!["this endpoint does not take that method".into()],
            )
        })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(server);
    Ok((with_token(routes, token), handle))
}

/// The OTG fallbacks, the body limit and the token, around `routes`.
fn with_token(routes: Router, token: Option<Arc<str>>) -> Router {
    match token {
        Some(token) => routes.layer(axum::middleware::from_fn_with_state(
            token,
            auth::require_token,
        )),
        None => routes,
    }
}

/// `shutdown`, and then the server told (a methodology running ends at once, instead of the
/// graceful shutdown waiting for its last trial).
async fn telling(
    handle: ShutdownHandle,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    shutdown.await;
    handle.shut_down();
}

/// Serves on `listener` until `shutdown` completes; a run still going is stopped first.
pub async fn serve(
    listener: tokio::net::TcpListener,
    options: ServeOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (routes, handle) = router_with_shutdown(options)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let _echo = clock_echo(listener.local_addr()?);
    axum::serve(listener, routes)
        .with_graceful_shutdown(telling(handle, shutdown))
        .await
}

/// The answer to a controller's clock offset check (UDP on the server's own address and
/// port number, see `strobe_io::clockcheck`), while the server runs; a server that cannot
/// bind it serves on, and a controller's check of it says it got no answer.
fn clock_echo(address: SocketAddr) -> Option<strobe_control::host::ClockEcho> {
    match strobe_control::host::ClockEcho::start(address) {
        Ok(echo) => Some(echo),
        Err(e) => {
            tracing::warn!("no clock offset check on udp {address}: {e}");
            None
        }
    }
}

/// Certificate and key files (PEM) for HTTPS.
#[derive(Clone, Debug)]
pub struct Tls {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

/// Serves HTTPS on `address` with `tls` until `shutdown` completes; `on_listening` is told
/// the address bound (a port of 0 picks a free one).
pub async fn serve_tls(
    address: SocketAddr,
    tls: &Tls,
    options: ServeOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    on_listening: impl FnOnce(SocketAddr) + Send + 'static,
) -> std::io::Result<()> {
    // ring: the provider that builds with a C compiler alone. Installing it twice (a
    // second server in one process) is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = axum_server::tls_rustls::RustlsConfig::from_pem_file(&tls.cert, &tls.key)
        .await
        .map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "cannot use certificate {} with key {}: {e} (give PEM files)",
                    tls.cert.display(),
                    tls.key.display()
                ),
            )
        })?;
    let (routes, server) = router_with_shutdown(options)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let _echo = (address.port() != 0).then(|| clock_echo(address)).flatten();
    let shutdown = telling(server, shutdown);
    let handle = axum_server::Handle::new();
    let watcher = handle.clone();
    tokio::spawn(async move {
        if let Some(bound) = watcher.listening().await {
            on_listening(bound);
        }
        shutdown.await;
        watcher.graceful_shutdown(Some(std::time::Duration::from_secs(5)));
    });
    axum_server::bind_rustls(address, config)
        .handle(handle)
        .serve(routes.into_make_service())
        .await
}

/// The address to listen on by default: loopback only (another must be given explicitly).
pub fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8443))
}

fn parse_body(body: &Bytes) -> Result<Value, OtgError> {
    serde_json::from_slice(body).map_err(|e| {
        validation(vec![format!(
            "the request body is not JSON: {e} (send the OTG object as JSON, Content-Type: application/json)"
        )])
    })
}

fn control_error(e: ControlError) -> OtgError {
    match e {
        ControlError::BadInput(m) => validation(vec![m]),
        ControlError::Runtime(m) => internal(vec![m]),
    }
}

/// Runs blocking run-control work (opening ports, joining threads) off the async workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, OtgError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| internal(vec![format!("a server task failed: {e}")]))
}

/// Stops `run` if it still goes and waits until it is over (its receivers' drain too),
/// holding no lock: metrics requests meanwhile see it draining.
async fn stop_and_wait(run: Arc<RunHandle>) -> Result<(), OtgError> {
    if run.is_finished() {
        return Ok(());
    }
    run.stop();
    blocking(move || run.wait_over()).await
}

async fn set_config(State(server): State<Arc<Server>>, body: Bytes) -> Reply {
    let config = parse_body(&body)?;
    let _control = server.control.lock().await;
    // Reading a config is work in proportion to its size: off the async workers.
    let (read, config) = {
        let locations = server.options.locations.clone();
        blocking(move || {
            let read = scenario_from_otg(&config, &locations);
            (read, config)
        })
        .await?
    };
    let read = read.map_err(|errors| validation(errors.0))?;
    install_config(&server, read.scenario, read.warnings, read.captures, config).await
}

/// strobe's own endpoint beside OTG's: a strobe scenario in TOML (as `strobe gen` reads
/// from a file) as the config, checked as `POST /config` checks an OTG one. `GET /config`
/// then answers `{"x_strobe_toml": TEXT}`. Files a scenario names are read relative to
/// the server's working directory.
async fn set_config_toml(State(server): State<Arc<Server>>, body: Bytes) -> Reply {
    let text = String::from_utf8(body.to_vec())
        .map_err(|_| validation(vec!["the TOML scenario is not UTF-8 text".into()]))?;
    let _control = server.control.lock().await;
    let (read, text) = blocking(move || {
        let res = strobe_control::source::FileResources::cwd();
        let read = strobe_control::model::load_scenario(&text, "scenario.toml", &res);
        (read, text)
    })
    .await?;
    let scenario = read.map_err(|e| validation(vec![e.to_string()]))?;
    let config = json!({ "x_strobe_toml": text });
    install_config(&server, scenario, Vec::new(), Vec::new(), config).await
}

/// Checks `scenario` as a run would be checked (lab ports, MACs, options) and makes it the
/// server's config, stopping what runs; the reply lists the warnings.
async fn install_config(
    server: &Arc<Server>,
    scenario: Scenario,
    mut warnings: Vec<Warning>,
    captures: Vec<(String, CaptureSettings)>,
    config: Value,
) -> Reply {
    let options = server.options.plan.clone();
    let checked_scenario = scenario.clone();
    let checked = blocking(move || {
        let plan = strobe_control::prepare(checked_scenario, &options)?;
        strobe_control::ports::check_locations(&plan.scenario)?;
        Ok(plan)
    });
    let plan = checked.await?.map_err(control_error)?;
    for w in plan.warnings {
        if !warnings.contains(&w) {
            warnings.push(w);
        }
    }
    // A new config replaces the old one: runs still going are stopped first.
    let runs = server.state.lock().await.flows.runs().to_vec();
    for run in runs {
        stop_and_wait(run).await?;
    }
    let mut state = server.state.lock().await;
    // Dropping a run joins its watcher thread (which may still be recording it), and ending
    // a capture joins its thread: both off the async workers.
    let old_flows = std::mem::replace(&mut state.flows, Session::new(scenario));
    let old_captures = std::mem::take(&mut state.capturing);
    blocking(move || drop((old_flows, old_captures))).await?;
    state.captured.clear();
    state.waiting.clear();
    state.config = Some(config);
    state.capture_ports = captures;
    // OTG's warnings are words: the structure stays in strobe's own results.
    Ok(ok_json(json!({ "warnings": warning_texts(&warnings) })))
}

/// strobe's own endpoint beside OTG's: one of the convoy-of-packet-trains experiments
/// (`strobe_control::trains::TrainsSpec` as JSON: convoy, frame-size or train-length
/// sweep), run to its end; the reply is its report, as `strobe trains --json` writes it.
async fn run_trains(State(server): State<Arc<Server>>, body: Bytes) -> Reply {
    let spec: TrainsSpec = serde_json::from_slice(&body).map_err(|e| {
        validation(vec![format!(
            "invalid trains request: {e} (fields: experiment = convoy | sizes | lengths, port, \
             rx, udp, src_mac, dst_mac, size, sizes, lengths, trains, frames, gap, link, \
             shaper, baseline)"
        )])
    })?;
    run_method(&server, "trains", &body, move |runner| {
        let request = spec.request(&runner.options.lab_prefix)?;
        let stop = runner.stop.clone();
        strobe_control::trains::run_experiment(&request, &stop, |label, scenario, pacing| {
            runner.run(TrialRun {
                what: label.to_string(),
                progress: String::new(),
                scenario,
                pacing,
                drain_ns: runner.options.drain_ns,
                learning: false,
            })
        })
    })
    .await
}

/// strobe's own endpoint beside OTG's: RFC 2544's benchmarks
/// (`strobe_control::rfc2544::Rfc2544Spec` as JSON), run to their end; the reply is their
/// report, as `strobe rfc2544 --json` writes it.
async fn run_rfc2544(State(server): State<Arc<Server>>, body: Bytes) -> Reply {
    let spec: Rfc2544Spec = serde_json::from_slice(&body).map_err(|e| {
        validation(vec![format!(
            "invalid RFC 2544 request: {e} (fields: tests = [throughput, latency, loss, \
             back_to_back, recovery], \
             port, rx, udp, src_mac, dst_mac, sizes, link, max_rate, trial, wait, settle, \
             learning, resolution_pct, pdr_pct, max_trials, search, latency_loads_pct, \
             latency_trials, loss_step_pct, b2b_searches, b2b_max, recovery_overload, \
             recovery_window, recovery_slice)"
        )])
    })?;
    run_method(&server, "rfc2544", &body, move |runner| {
        let request = spec.request(&runner.options.lab_prefix)?;
        let stop = runner.stop.clone();
        strobe_control::rfc2544::run_benchmarks(&request, &stop, runner)
    })
    .await
}

/// strobe's own endpoint beside OTG's: ITU-T Y.1564 service activation
/// (`strobe_control::y1564::Y1564Spec` as JSON), run to its end; the reply is its report,
/// as `strobe y1564 --json` writes it.
async fn run_y1564(State(server): State<Arc<Server>>, body: Bytes) -> Reply {
    let spec: Y1564Spec = serde_json::from_slice(&body).map_err(|e| {
        validation(vec![format!(
            "invalid Y.1564 request: {e} (fields: tests = [configuration, performance], port, \
             rx, src_mac, dst_mac, services = [{{name, udp, size, cir, eir, max_flr_pct, \
             max_ftd, max_fdv}}], step, steps_pct, overshoot_pct, performance, wait, settle, \
             ir_tolerance_pct)"
        )])
    })?;
    run_method(&server, "y1564", &body, move |runner| {
        let request = spec.request(&runner.options.lab_prefix)?;
        let stop = runner.stop.clone();
        strobe_control::y1564::run_y1564(&request, &stop, runner)
    })
    .await
}

/// strobe's own endpoint beside OTG's: the forwarder study
/// (`strobe_control::study::StudySpec` as JSON) on labs of its own on this host, run to its
/// end; the reply is its report, as `strobe study forwarders --json` writes it. Each run is
/// recorded in the server's history on its own, labelled with its DUT and load. A study
/// that failed before its first run is an error; one that failed later replies with the
/// runs done and the failure in `failure`.
async fn run_study(State(server): State<Arc<Server>>, body: Bytes) -> Reply {
    let spec: StudySpec = serde_json::from_slice(&body).map_err(|e| {
        validation(vec![format!(
            "invalid study request: {e} (fields: duts, loads = [constant, poisson], rates, \
             frames, size, lab)"
        )])
    })?;
    let request = spec
        .request()
        .and_then(|r| r.check().map(|()| r))
        .map_err(control_error)?;
    let history = server.options.history.clone();
    let report = alone(&server, move |stop| {
        let (mut recorder, provenance, unrecorded) = record::study(history.as_ref());
        let describe = || "stopped by a stop request or the server's shutdown".to_string();
        let stopping = StudyStop {
            stop,
            abort_drain: None,
            describe: &describe,
        };
        let mut study = strobe_control::study::run_study(
            &request,
            &provenance,
            &mut recorder,
            &stopping,
            &mut |_| {},
        )
        .map_err(control_error)?;
        study.warnings.extend(unrecorded);
        match &study.failure {
            Some(failure) if study.runs.is_empty() => Err(internal(vec![format!(
                "the study ended before its first run: {failure}"
            )])),
            _ => Ok(study.report(&request)),
        }
    })
    .await?;
    serde_json::to_value(report)
        .map(ok_json)
        .map_err(|e| internal(vec![format!("cannot encode the report: {e}")]))
}

/// Runs a methodology to its end, off the async workers; its report is the reply. Config
/// and control requests wait for it; metrics do not (there are none of it). Refused while
/// traffic runs: the method's own runs would compete with it for the ports. A traffic stop
/// request or the server's shutdown ends it early with the trials done so far.
async fn run_method<T, F>(server: &Server, kind: &str, body: &Bytes, method: F) -> Reply
where
    T: serde::Serialize + Send + 'static,
    F: FnOnce(&mut EngineRunner) -> Result<T, ControlError> + Send + 'static,
{
    let options = server.options.plan.clone();
    let history = server.options.history.clone();
    let request = serde_json::from_slice(body).unwrap_or(Value::Null);
    let kind = kind.to_owned();
    let encoded = alone(server, move |stop| {
        let mut runner = EngineRunner {
            options,
            stop: stop.clone(),
            histograms: TrialHistograms::default(),
        };
        let started = strobe_control::history::now_unix_ns();
        let outcome = method(&mut runner);
        let encoded: Result<Value, String> = match &outcome {
            Ok(report) => {
                serde_json::to_value(report).map_err(|e| format!("cannot encode the report: {e}"))
            }
            Err(e) => Err(e.to_string()),
        };
        let report = encoded.as_ref().map_err(String::as_str);
        // Recorded on the same blocking thread as the method ran, so that a request the
        // shutdown abandons still leaves its run in the history.
        record::method(
            history.as_ref(),
            &kind,
            request,
            started,
            report,
            stop.load(Ordering::SeqCst),
            &mut runner.histograms,
        );
        outcome.map_err(control_error)?;
        encoded.map_err(|m| internal(vec![m]))
    })
    .await?;
    Ok(ok_json(encoded))
}

/// Runs `work` off the async workers as the server's one methodology: refused while traffic
/// runs or the server shuts down, holding the control lock to its end (config and control
/// requests wait), with the stop flag a traffic stop request or the shutdown sets.
async fn alone<T, F>(server: &Server, work: F) -> Result<T, OtgError>
where
    T: Send + 'static,
    F: FnOnce(&Arc<AtomicBool>) -> Result<T, OtgError> + Send + 'static,
{
    // Owned: it goes with the method onto its blocking thread, so that a client that hangs
    // up (its request's future dropped) leaves the server locked until the method has ended.
    let control = server.control.clone().lock_owned().await;
    if server.shutting_down.load(Ordering::SeqCst) {
        return Err(error(
            503,
            "internal",
            vec!["the server is shutting down: no methodology starts now".into()],
        ));
    }
    if server.state.lock().await.flows.is_running() {
        return Err(error(
            409,
            "validation",
            vec!["traffic is running: stop it (control/state) before a methodology".into()],
        ));
    }
    server.method_stop.store(false, Ordering::SeqCst);
    let stop = server.method_stop.clone();
    server.method_running.store(true, Ordering::SeqCst);
    // Cleared when the method ends, however it ends.
    let running = ClearOnDrop(server.method_running.clone());
    blocking(move || {
        let _held = (control, running);
        work(&stop)
    })
    .await?
}

/// Clears its flag when dropped.
struct ClearOnDrop(Arc<AtomicBool>);

impl Drop for ClearOnDrop {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Runs a methodology's scenarios as any run of the server's: the server's options, the
/// method's pacing and drain; `stop` cuts the trial running short.
struct EngineRunner {
    options: PlanOptions,
    stop: Arc<AtomicBool>,
    /// Each trial's latency histograms, for the run history.
    histograms: TrialHistograms,
}

impl TrialRunner for EngineRunner {
    type Error = ControlError;

    fn run(
        &mut self,
        trial: TrialRun,
    ) -> Result<(Scenario, strobe_control::RunReport), ControlError> {
        let options = PlanOptions {
            pacing: trial.pacing,
            drain_ns: trial.drain_ns,
            ..self.options.clone()
        };
        let plan = strobe_control::prepare(trial.scenario, &options)?;
        let report = strobe_control::run::run_blocking(
            &plan,
            self.stop.clone(),
            1_000_000_000,
            &mut |_| {},
        )?;
        if !trial.learning {
            self.histograms.add(&trial.what, &plan.scenario, &report);
        }
        Ok((plan.scenario, report))
    }
}

/// strobe's own endpoint for a controller: renews its lease on this agent's runs
/// (`{"lease_ms": N}`); when a lease runs out, the agent stops its runs on its own.
async fn renew_lease(State(server): State<Arc<Server>>, body: Bytes) -> Reply {
    let request = parse_body(&body)?;
    let length = lease::length(&request["lease_ms"]).map_err(|e| validation(vec![e]))?;
    hold_lease(&server, length);
    Ok(ok_json(json!({ "warnings": [] })))
}

/// strobe's own endpoint: how this host's clock is synchronized (linuxptp's state, chrony's,
/// the kernel's; see `strobe_io::timesync`), the kernel's boot id (agents on one machine
/// share its clock) and the time now on the clock strobe stamps with.
async fn clock_state(State(server): State<Arc<Server>>) -> Reply {
    let probe = server.options.clock_probe.clone();
    let sync = blocking(move || strobe_control::host::probe_clock_sync(&probe)).await?;
    Ok(ok_json(json!({
        "boot_id": strobe_control::host::boot_id(),
        "realtime_ns": strobe_control::host::stamping_now_ns(),
        "sync": sync,
    })))
}

/// How far ahead of this host's clock a start time may be.
const GO_AHEAD_MAX_NS: u64 = 60_000_000_000;

/// strobe's own endpoint for a controller: the runs its last starts made ready (ports
/// open, receivers counting, senders waiting) start sending at `{"start_at_ns": T}`
/// (CLOCK_REALTIME).
async fn open_gates(State(server): State<Arc<Server>>, body: Bytes) -> Reply {
    let request = parse_body(&body)?;
    let Some(at) = request["start_at_ns"].as_u64() else {
        return Err(validation(vec![
            "start_at_ns: give the CLOCK_REALTIME time to start at, in ns since the Unix epoch"
                .into(),
        ]));
    };
    // A time far ahead of this host's clock is a clock out of step, not a plan: refused.
    let now = strobe_control::host::stamping_now_ns();
    if at > now + GO_AHEAD_MAX_NS {
        return Err(validation(vec![format!(
            "start_at_ns is {:.1} s ahead of this agent's clock (at most {} s taken): is its \
             clock behind the controller's? (see its clock check, GET /strobe/agents on the \
             controller)",
            (at - now) as f64 / 1e9,
            GO_AHEAD_MAX_NS / 1_000_000_000
        )]));
    }
    let gates = std::mem::take(&mut server.state.lock().await.waiting);
    if gates.is_empty() {
        return Err(validation(vec![
            "no start is waiting for its time: start flows with x_strobe.gate first".into(),
        ]));
    }
    for gate in &gates {
        gate.open_at(at);
    }
    Ok(ok_json(json!({ "warnings": [] })))
}

/// strobe's own endpoint for a controller: what of this server's settings a run across
/// agents must agree on — transmit workers per port (Poisson flows are split over them, and
/// a receiver elsewhere must split alike) and whether it gives strobe's detail (a
/// controller reads it to know when counts are final).
async fn agent_settings(State(server): State<Arc<Server>>) -> Response {
    ok_json(json!({
        "app_version": concat!("strobe ", env!("CARGO_PKG_VERSION")),
        "tx_workers": server.options.plan.tx_workers,
        "extensions": !server.options.no_extensions,
    }))
}

/// Holds the runs under a controller's lease for `length`, watching it from the first.
fn hold_lease(server: &Arc<Server>, length: std::time::Duration) {
    server.lease.renew(length);
    if server.lease_watched.swap(true, Ordering::SeqCst) {
        return;
    }
    let server = Arc::downgrade(server);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let Some(server) = server.upgrade() else {
                return;
            };
            if !server.lease.ran_out(std::time::Instant::now()) {
                continue;
            }
            // Only what the controller started: runs driven directly are not its.
            let runs = std::mem::take(&mut server.state.lock().await.leased);
            let running = runs.iter().filter(|r| !r.is_finished()).count();
            if running > 0 {
                tracing::warn!(
                    "the controller's lease ran out: stopping {running} run(s) it started (the \
                     controller is gone or cannot reach this agent)"
                );
                eprintln!(
                    "strobe serve: the controller's lease ran out — stopping {running} run(s) it \
                     started; their results are kept"
                );
            }
            for run in runs {
                let _ = stop_and_wait(run).await;
            }
        }
    });
}

/// strobe's own endpoint: each flow's latency per 500 ms interval (min, p50, p90, p99,
/// p99.9, max, frames) of the runs the server holds, those starting after `since`
/// (CLOCK_REALTIME ns; 0 or none: all kept), oldest first. For runs of at most 16 flows;
/// intervals appear about a second after they end (receivers may lag one).
async fn live_latency(
    State(server): State<Arc<Server>>,
    axum::extract::Query(query): axum::extract::Query<HashMap<String, String>>,
) -> Reply {
    let since = match query.get("since").map(|s| s.parse::<u64>()) {
        None => 0,
        Some(Ok(ns)) => ns,
        Some(Err(_)) => {
            return Err(validation(vec![
                "latency: since must be a time in ns since the Unix epoch (0: all)".into(),
            ]))
        }
    };
    let runs = server.state.lock().await.flows.runs().to_vec();
    let mut intervals: Vec<strobe_control::IntervalLatency> = runs
        .iter()
        .flat_map(|r| r.latency_intervals(0))
        .filter(|i| i.start_ns > since)
        .collect();
    intervals.sort_by_key(|i| i.start_ns);
    Ok(ok_json(json!({
        "interval_ns": LIVE_LATENCY_INTERVAL_NS,
        "intervals": intervals,
    })))
}

async fn get_config(State(server): State<Arc<Server>>) -> Response {
    let session = server.state.lock().await;
    ok_json(session.config.clone().unwrap_or_else(|| json!({})))
}

async fn get_version() -> Response {
    ok_json(json!({
        "api_spec_version": API_SPEC_VERSION,
        "sdk_version": "",
        "app_version": concat!("strobe ", env!("CARGO_PKG_VERSION")),
    }))
}

/// `choice` of an OTG object, or the one alternative it holds.
fn choice<'a>(object: &'a Value, alternatives: &[&'a str]) -> Option<&'a str> {
    object.get("choice").and_then(Value::as_str).or_else(|| {
        alternatives
            .iter()
            .copied()
            .find(|a| object.get(*a).is_some())
    })
}

fn names(value: Option<&Value>) -> Result<Vec<String>, OtgError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| validation(vec![format!("expected a list of names, found {v}")]))
            })
            .collect(),
        Some(other) => Err(validation(vec![format!(
            "expected a list of names, found {other}"
        )])),
    }
}

async fn set_control_state(State(server): State<Arc<Server>>, body: Bytes) -> Reply {
    let request = parse_body(&body)?;
    // A traffic stop also ends a methodology running (which holds the control lock until
    // it ends): its report keeps the trials done.
    let stops_method = request["traffic"]["flow_transmit"]["state"] == "stop"
        && server.method_running.load(Ordering::SeqCst);
    if stops_method {
        server.method_stop.store(true, Ordering::SeqCst);
    }
    let _control = server.control.lock().await;
    if stops_method && server.state.lock().await.flows.scenario().is_none() {
        return Ok(ok_json(json!({
            "warnings": ["stopped the methodology that was running; no traffic config is set"]
        })));
    }
    match choice(&request, &["traffic", "port", "protocol"]) {
        Some("traffic") => {
            let traffic = &request["traffic"];
            match choice(traffic, &["flow_transmit"]) {
                Some("flow_transmit") => flow_transmit(&server, &traffic["flow_transmit"]).await,
                other => Err(validation(vec![format!(
                    "traffic.choice: {} — strobe controls traffic with flow_transmit",
                    other.map_or("missing".to_string(), |o| format!("`{o}` is not supported"))
                )])),
            }
        }
        Some("port") => {
            let port = &request["port"];
            match choice(port, &["capture", "link"]) {
                Some("capture") => port_capture(&server, &port["capture"]).await,
                Some("link") => port_link(&server, &port["link"]).await,
                _ => Err(validation(vec![
                    "port.choice: missing or unknown — give capture".into(),
                ])),
            }
        }
        Some("protocol") => Err(validation(vec![
            "protocol: not supported — strobe emulates no protocols".into(),
        ])),
        _ => Err(validation(vec![
            "choice: missing or unknown — give traffic (flow_transmit start/stop)".into(),
        ])),
    }
}

async fn flow_transmit(server: &Arc<Server>, request: &Value) -> Reply {
    let flow_names = names(request.get("flow_names"))?;
    let state = request.get("state").and_then(Value::as_str).unwrap_or("");
    // A copy of the session: the state lock is not held while runs start or drain (the
    // control lock keeps other changes out meanwhile).
    let session = server.state.lock().await.flows.clone();
    let refused = |e: ControlError| validation(vec![format!("flow_transmit {state}: {e}")]);
    match state {
        "start" => {
            let step = session.start_step(&flow_names).map_err(refused)?;
            // A run with a flow to start again whose transmitters are all done is only
            // draining (its receivers count frames still in flight): it ends first. One whose
            // other flows still send goes on beside the new run.
            for run in step.end_first {
                stop_and_wait(run).await?;
            }
            let mut options = server.options.plan.clone();
            // A capture in the config sees the frames of a port counted in the kernel
            // (`xdp-count:`) only if the counting program passes them on.
            options.pass_counted = !server.state.lock().await.capture_ports.is_empty();
            // A multi-host run's controller names the run tag every agent's trailers carry
            // and the time its senders start at (see `controller`).
            let cluster = controller::StartExtension::read(request).map_err(refused)?;
            options.run_tag = cluster.run_tag.or(options.run_tag);
            let gate = (cluster.gated || cluster.start_at_ns.is_some())
                .then(|| Arc::new(strobe_control::StartGate::default()));
            if let (Some(gate), Some(at)) = (&gate, cluster.start_at_ns) {
                gate.open_at(at);
            }
            options.start_gate = gate.clone();
            if let Some(length) = cluster.lease {
                hold_lease(server, length);
            }
            // Latency per interval for live views (GET /strobe/latency); each interval copies
            // every flow's histogram on the receive path, so only for a few flows.
            if step.scenario.flows.len() <= LIVE_LATENCY_MAX_FLOWS {
                options.latency_interval_ns = Some(LIVE_LATENCY_INTERVAL_NS);
                options.live_latency = true;
            }
            let after = record::after_run(
                server.options.history.clone(),
                server.state.lock().await.config.clone(),
                match flow_names.is_empty() {
                    true => "POST /control/state flow_transmit start".to_owned(),
                    false => format!(
                        "POST /control/state flow_transmit start {}",
                        flow_names.join(",")
                    ),
                },
            );
            let scenario = step.scenario;
            let started = blocking(move || start_run(scenario, &options, after))
                .await?
                .map_err(control_error)?;
            let mut state = server.state.lock().await;
            state.flows.add_run(started);
            if let Some(run) = state.flows.runs().last().cloned() {
                if cluster.lease.is_some() {
                    state.leased.retain(|r| !r.is_finished());
                    state.leased.push(run);
                }
            }
            if let Some(gate) = gate.filter(|g| !g.is_open()) {
                state.waiting.push(gate);
            }
            Ok(ok_json(
                json!({ "warnings": warning_texts(&state.flows.problems()) }),
            ))
        }
        "stop" => {
            // A start made ready and stopped before its time never gets one.
            server.state.lock().await.waiting.clear();
            let step = session.stop_step(&flow_names).map_err(refused)?;
            for (run, named) in step.some {
                run.stop_flows(&named);
            }
            for run in step.whole {
                stop_and_wait(run).await?;
            }
            let state = server.state.lock().await;
            Ok(ok_json(
                json!({ "warnings": warning_texts(&state.flows.problems()) }),
            ))
        }
        "pause" | "resume" => {
            for run in session.pause_targets(&flow_names, state).map_err(refused)? {
                if state == "pause" {
                    run.pause();
                } else {
                    run.resume();
                }
            }
            let state = server.state.lock().await;
            Ok(ok_json(
                json!({ "warnings": warning_texts(&state.flows.problems()) }),
            ))
        }
        other => Err(validation(vec![format!(
            "flow_transmit.state: `{other}` — accepted: start, stop, pause, resume"
        )])),
    }
}

async fn port_capture(server: &Arc<Server>, request: &Value) -> Reply {
    let mut ports = names(request.get("port_names"))?;
    let state = request.get("state").and_then(Value::as_str).unwrap_or("");
    let mut session = server.state.lock().await;
    let Some(scenario) = session.flows.scenario().cloned() else {
        return Err(no_config());
    };
    if ports.is_empty() {
        ports = session
            .capture_ports
            .iter()
            .map(|(p, _)| p.clone())
            .collect();
    }
    for name in &ports {
        if !session.capture_ports.iter().any(|(p, _)| p == name) {
            return Err(validation(vec![format!(
                "port.capture.port_names: port `{name}` has no capture in the config — add it \
                 to a capture's port_names (config.captures)"
            )]));
        }
    }
    match state {
        "start" => {
            for name in ports {
                let Some(port) = scenario.ports.iter().find(|p| p.name == name) else {
                    continue;
                };
                let location = strobe_control::ports::resolve_port_location(
                    &port.location,
                    &server.options.plan.lab_prefix,
                )
                .map_err(control_error)?;
                // Every name was checked against capture_ports above.
                let Some(settings) = session
                    .capture_ports
                    .iter()
                    .find(|(p, _)| *p == name)
                    .map(|(_, s)| s.clone())
                else {
                    continue;
                };
                let capture = blocking(move || Capture::start(&location, settings))
                    .await?
                    .map_err(control_error)?;
                // A new capture replaces the port's last one.
                session.captured.remove(&name);
                if let Some(old) = session.capturing.insert(name, capture) {
                    blocking(move || drop(old)).await?;
                }
            }
            Ok(ok_json(json!({ "warnings": [] })))
        }
        "stop" => {
            for name in ports {
                finish_capture(&mut session, &name).await?;
            }
            Ok(ok_json(json!({ "warnings": [] })))
        }
        other => Err(validation(vec![format!(
            "port.capture.state: `{other}` — accepted: start, stop"
        )])),
    }
}

async fn port_link(server: &Arc<Server>, request: &Value) -> Reply {
    let names = names(request.get("port_names"))?;
    let up = match request.get("state").and_then(Value::as_str) {
        Some("up") => true,
        Some("down") => false,
        other => {
            return Err(validation(vec![format!(
                "port.link.state: {} — accepted: up, down",
                other.map_or("missing".to_string(), |o| format!("`{o}`"))
            )]))
        }
    };
    let mut session = server.state.lock().await;
    let scenario = session.flows.scenario().cloned().ok_or_else(no_config)?;
    let mut locations = Vec::new();
    for port in &scenario.ports {
        if names.is_empty() || names.contains(&port.name) {
            locations.push(port.location.clone());
        }
    }
    if let Some(n) = names
        .iter()
        .find(|n| !scenario.ports.iter().any(|p| &p.name == *n))
    {
        return Err(validation(vec![format!(
            "port.link.port_names: no port `{n}` in the config"
        )]));
    }
    // All or nothing: every port must be one whose link strobe sets before any is changed.
    for l in &locations {
        strobe_control::ports::lab_link_side(l).map_err(control_error)?;
    }
    let prefix = server.options.plan.lab_prefix.clone();
    let set = locations.clone();
    blocking(move || {
        set.iter()
            .try_for_each(|l| strobe_control::ports::set_port_link(l, &prefix, up))
    })
    .await?
    .map_err(control_error)?;
    for l in locations {
        if up {
            session.links_down.remove(&l.to_string());
        } else {
            session.links_down.insert(l.to_string());
        }
    }
    Ok(ok_json(json!({ "warnings": [] })))
}

/// Stops the port's capture, if one runs, and keeps its bytes for `/monitor/capture`.
async fn finish_capture(session: &mut ServerState, name: &str) -> Result<(), OtgError> {
    let Some(capture) = session.capturing.remove(name) else {
        return Ok(());
    };
    let (bytes, _missed) = blocking(move || capture.finish())
        .await?
        .map_err(control_error)?;
    session.captured.insert(name.to_string(), bytes);
    Ok(())
}

async fn get_capture(State(server): State<Arc<Server>>, body: Bytes) -> Reply {
    let request = parse_body(&body)?;
    let Some(name) = request.get("port_name").and_then(Value::as_str) else {
        return Err(validation(vec![
            "port_name: give the port whose capture to read".into(),
        ]));
    };
    let mut session = server.state.lock().await;
    // Reading a capture that still runs stops it first.
    finish_capture(&mut session, name).await?;
    match session.captured.get(name) {
        Some(bytes) => Ok(reply::octets(bytes.clone())),
        None => Err(validation(vec![format!(
            "port_name: no capture of port `{name}` — start one first (control state port \
             capture start)"
        )])),
    }
}

/// Whether a client takes fields the OTG model does not name. gosnappi decodes replies
/// strictly (an unknown field fails the call) and is recognised by Go's HTTP client; snappi
/// and others ignore them.
fn takes_extensions(headers: &HeaderMap) -> bool {
    !headers
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ua| ua.starts_with("Go-http-client"))
}

async fn get_metrics(State(server): State<Arc<Server>>, headers: HeaderMap, body: Bytes) -> Reply {
    let request = parse_body(&body)?;
    let session = server.state.lock().await;
    let scenario = session.flows.scenario().ok_or_else(no_config)?;
    let kind = choice(&request, &["port", "flow"]).unwrap_or("port");
    let columns = surface::chosen_columns(&request, kind)?;
    let reply = match kind {
        "flow" => {
            let wanted = names(request.get("flow").and_then(|f| f.get("flow_names")))?;
            reply::flow_metrics(
                scenario,
                session.flows.runs(),
                &wanted,
                !server.options.no_extensions && takes_extensions(&headers),
            )
        }
        "port" => {
            let wanted = names(request.get("port").and_then(|p| p.get("port_names")))?;
            let capturing: Vec<&str> = session.capturing.keys().map(String::as_str).collect();
            let down: Vec<&str> = session.links_down.iter().map(String::as_str).collect();
            reply::port_metrics(scenario, session.flows.runs(), &wanted, &capturing, &down)
        }
        other => Err(format!(
            "choice: `{other}` metrics are not supported — strobe reports port and flow metrics"
        )),
    };
    let mut reply = reply.map_err(|e| validation(vec![e]))?;
    surface::keep_columns(&mut reply, kind, &columns);
    if kind == "flow" {
        surface::filter_tagged(&mut reply, &request)?;
    }
    Ok(ok_json(reply))
}

/// `GET /metrics`: Prometheus' text exposition of the config's ports and flows and the runs
/// (see [`scrape`]). Works before any config (run counters only).
async fn get_prometheus(State(server): State<Arc<Server>>) -> Response {
    let text = {
        let session = server.state.lock().await;
        scrape::exposition(session.flows.scenario(), session.flows.runs())
    };
    (
        [(axum::http::header::CONTENT_TYPE, scrape::CONTENT_TYPE)],
        text,
    )
        .into_response()
}

fn no_config() -> OtgError {
    validation(vec![
        "no config: set one first (POST /config, snappi's set_config)".into(),
    ])
}
