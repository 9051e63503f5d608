//! ITU-T Y.1564 service activation: per service (a flow with its committed and excess
//! information rates, CIR and EIR), the service configuration test — steps at shares of the
//! CIR, then CIR + EIR, then a policing step above CIR + EIR — each judged on its
//! information rate (IR), frame loss ratio (FLR), frame transfer delay (FTD) and frame delay
//! variation (FDV) against the service's acceptance criteria; then the service performance
//! test, every service at its CIR at once for a set time. Pass or fail per step and per
//! service.
//!
//! Rates are layer-1 bit rates (strobe's convention: what the frames occupy on the wire,
//! preamble and inter-frame gap included), offered and measured alike. FTD is judged on the
//! mean of every frame's delay (the maximum is reported too); FDV is the 99.9th percentile
//! of the delays less their minimum (MEF 10.3's definition, at that percentile).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use strobe_analyze::latency::LatencyStats;
use strobe_model::{warning_texts, Scenario, Warning};
use strobe_timing::{Duration, Rate};

use crate::methodology::{resolve_flow, sending, sleep_unless_stopped, spec_flow, unless_stopped};
use crate::plan::Pacing;
use crate::results::csv_text;
use crate::rfc2544::{NotingDut, TrialRun, TrialRunner};
use crate::source::OneFlow;
use crate::text::{bps_text, duration_text};
use crate::{ControlError, Results};

/// One service as a user describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceSpec {
    pub name: String,
    /// The service's UDP flow, SRC:PORT-DST:PORT (services must differ in it).
    pub udp: String,
    /// Frame size, FCS included, or `imix`.
    pub size: String,
    /// Committed information rate, e.g. `40mbit` (layer 1).
    pub cir: String,
    /// Excess information rate above the CIR (`0`: none).
    pub eir: String,
    /// Acceptance: the most frames lost, in percent.
    pub max_flr_pct: f64,
    /// Acceptance: the highest mean frame transfer delay, e.g. `10ms`.
    pub max_ftd: String,
    /// Acceptance: the highest frame delay variation, e.g. `5ms`.
    pub max_fdv: String,
}

impl Default for ServiceSpec {
    fn default() -> Self {
        ServiceSpec {
            name: String::new(),
            udp: "198.18.0.1:1000-198.18.1.1:2000".into(),
            size: "1518".into(),
            cir: String::new(),
            eir: "0".into(),
            max_flr_pct: 0.0,
            max_ftd: "10ms".into(),
            max_fdv: "10ms".into(),
        }
    }
}

/// What to run.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Y1564Test {
    Configuration,
    Performance,
}

/// The test as a user asks for it: the command line's options, the server's request body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Y1564Spec {
    /// Which tests (empty: both).
    pub tests: Vec<Y1564Test>,
    pub port: String,
    pub rx: String,
    pub src_mac: Option<String>,
    pub dst_mac: Option<String>,
    pub services: Vec<ServiceSpec>,
    /// Traffic time of each configuration step (Y.1564 suggests 60 s).
    pub step: String,
    /// The configuration test's steps below the CIR, in percent of it.
    pub steps_pct: Vec<f64>,
    /// The policing step offers CIR + EIR + this share of the CIR, in percent.
    pub overshoot_pct: f64,
    /// Traffic time of the performance test (Y.1564 suggests 15 min and more).
    pub performance: String,
    /// How long the receiver keeps counting after a step's last frame.
    pub wait: String,
    /// Pause between steps.
    pub settle: String,
    /// An information rate passes when it is at least this close to what it should be, in
    /// percent (the measurement's own tolerance: a step's first and last frames, a
    /// shaper's bucket).
    pub ir_tolerance_pct: f64,
}

impl Default for Y1564Spec {
    fn default() -> Self {
        Y1564Spec {
            tests: Vec::new(),
            port: "lab:tx".into(),
            rx: "lab:rx".into(),
            src_mac: None,
            dst_mac: None,
            services: Vec::new(),
            step: "5s".into(),
            steps_pct: vec![25.0, 50.0, 75.0, 100.0],
            overshoot_pct: 25.0,
            performance: "60s".into(),
            wait: "1s".into(),
            settle: "500ms".into(),
            ir_tolerance_pct: 2.0,
        }
    }
}

/// A service, checked and typed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Service {
    pub name: String,
    pub udp: String,
    pub size: String,
    pub cir_bps: f64,
    pub eir_bps: f64,
    /// Loss ratio (0 to 1).
    pub max_flr: f64,
    pub max_ftd_ns: u64,
    pub max_fdv_ns: u64,
}

/// The test as asked, checked and typed.
#[derive(Clone, Debug)]
pub struct Y1564Request {
    pub flow: OneFlow,
    pub lab_prefix: String,
    pub tests: Vec<Y1564Test>,
    pub services: Vec<Service>,
    pub step_ns: u64,
    /// Shares of the CIR (0 to 1].
    pub steps: Vec<f64>,
    pub overshoot: f64,
    pub performance_ns: u64,
    pub wait_ns: u64,
    pub settle_ns: u64,
    pub ir_tolerance: f64,
}

fn bad(m: String) -> ControlError {
    ControlError::BadInput(m)
}

fn duration(what: &str, text: &str) -> Result<u64, ControlError> {
    strobe_timing::parse_duration_ns(text).map_err(|_| {
        bad(format!(
            "{what} `{text}`: give a duration, e.g. 5s or 500ms"
        ))
    })
}

fn bit_rate(what: &str, text: &str, zero_ok: bool) -> Result<f64, ControlError> {
    if zero_ok && text.trim().trim_end_matches(|c: char| c.is_alphabetic()) == "0" {
        return Ok(0.0);
    }
    strobe_analyze::physics::parse_line_rate_bps(text)
        .map_err(|e| bad(format!("{what} `{text}`: {e} (a bit rate such as 40mbit)")))
}

impl ServiceSpec {
    fn service(&self, index: usize) -> Result<Service, ControlError> {
        let name = if self.name.is_empty() {
            format!("service{}", index + 1)
        } else {
            self.name.clone()
        };
        let what = |field: &str| format!("service `{name}`: {field}");
        if self.cir.is_empty() {
            return Err(bad(format!(
                "{}: give the committed information rate, e.g. cir=40mbit",
                what("cir")
            )));
        }
        let pct = self.max_flr_pct;
        if !(pct.is_finite() && (0.0..=100.0).contains(&pct)) {
            return Err(bad(format!(
                "{} {pct}: give a percentage from 0 to 100",
                what("max FLR")
            )));
        }
        Ok(Service {
            cir_bps: bit_rate(&what("cir"), &self.cir, false)?,
            eir_bps: bit_rate(&what("eir"), &self.eir, true)?,
            max_flr: pct / 100.0,
            max_ftd_ns: duration(&what("max FTD"), &self.max_ftd)?,
            max_fdv_ns: duration(&what("max FDV"), &self.max_fdv)?,
            udp: self.udp.clone(),
            size: self.size.clone(),
            name,
        })
    }
}

impl Y1564Spec {
    /// The request this spec makes, on the lab `lab_prefix` (for `lab:` ports).
    pub fn request(&self, lab_prefix: &str) -> Result<Y1564Request, ControlError> {
        if self.services.is_empty() {
            return Err(bad(
                "give at least one service, e.g. --service name=data,cir=40mbit,eir=10mbit".into(),
            ));
        }
        let services = self
            .services
            .iter()
            .enumerate()
            .map(|(i, s)| s.service(i))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, a) in services.iter().enumerate() {
            if let Some(b) = services[..i].iter().find(|b| b.name == a.name) {
                return Err(bad(format!("two services are named `{}`", b.name)));
            }
            if let Some(b) = services[..i].iter().find(|b| b.udp == a.udp) {
                return Err(bad(format!(
                    "services `{}` and `{}` share the UDP flow {}: give each its own ports",
                    b.name, a.name, a.udp
                )));
            }
        }
        let steps = self
            .steps_pct
            .iter()
            .map(|&p| {
                if p.is_finite() && p > 0.0 && p <= 100.0 {
                    Ok(p / 100.0)
                } else {
                    Err(bad(format!(
                        "step {p} %: give steps above 0 and at most 100 % of the CIR"
                    )))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let positive = |what: &str, text: &str| {
            duration(what, text).and_then(|ns| {
                if ns > 0 {
                    Ok(ns)
                } else {
                    Err(bad(format!("{what} `{text}`: give a positive duration")))
                }
            })
        };
        let pct_ok = |what: &str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(v / 100.0)
            } else {
                Err(bad(format!("{what} {v}: give a percentage of 0 or more")))
            }
        };
        let mut tests = if self.tests.is_empty() {
            vec![Y1564Test::Configuration, Y1564Test::Performance]
        } else {
            self.tests.clone()
        };
        tests.sort();
        tests.dedup();
        // Each step sets its service's UDP flow.
        let mut flow = spec_flow(&self.port, &self.rx, &self.src_mac, &self.dst_mac);
        flow.flow.unbounded = true;
        Ok(Y1564Request {
            flow,
            lab_prefix: lab_prefix.to_string(),
            tests,
            services,
            step_ns: positive("step", &self.step)?,
            steps,
            overshoot: pct_ok("overshoot", self.overshoot_pct)?,
            performance_ns: positive("performance", &self.performance)?,
            wait_ns: duration("wait", &self.wait)?,
            settle_ns: duration("settle", &self.settle)?,
            ir_tolerance: pct_ok("IR tolerance", self.ir_tolerance_pct)?,
        })
    }
}

/// Which step of the configuration test.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind", content = "pct")]
pub enum StepKind {
    /// A share of the CIR, in percent: every criterion applies.
    Cir(f64),
    /// CIR + EIR: at least the CIR must come through.
    CirEir,
    /// Above CIR + EIR: the network must police it to at most CIR + EIR (and still pass
    /// the CIR).
    Policing,
}

/// What one service showed in a step or in the performance test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Measured {
    pub offered_bps: f64,
    /// What the generator sent (layer 1, first to last hand-over): below `offered_bps` when
    /// it fell behind its schedule (a busy machine), and then what the IR is judged against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_bps: Option<f64>,
    /// Information rate at the receiver (layer 1).
    pub ir_bps: f64,
    pub frames_tx: u64,
    pub frames_lost: u64,
    pub flr: f64,
    /// Every frame's delay.
    pub ftd: Option<LatencyStats>,
    /// p99.9 − min of the delays.
    pub fdv_ns: Option<f64>,
}

/// A step or a performance test, judged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    pub pass: bool,
    /// Each criterion that failed, with its figures.
    pub failed: Vec<Warning>,
}

/// One configuration step of one service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepResult {
    pub step: StepKind,
    pub measured: Measured,
    pub verdict: Verdict,
    pub warnings: Vec<Warning>,
}

/// One service's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServiceResult {
    pub service: Service,
    pub configuration: Vec<StepResult>,
    /// Every configuration step passed (None: the test did not run or was stopped).
    pub configuration_pass: Option<bool>,
    pub performance: Option<Measured>,
    pub performance_verdict: Option<Verdict>,
}

/// Everything the test measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Y1564Report {
    pub tests: Vec<Y1564Test>,
    pub step_ns: u64,
    pub performance_ns: u64,
    pub ir_tolerance: f64,
    pub services: Vec<ServiceResult>,
    /// Every service passed every test that ran.
    pub pass: bool,
    pub elapsed_ns: u64,
    pub interrupted: bool,
    pub failure: Option<String>,
    /// The lab's device under test the trials went through (its kind, software and
    /// version, cores); absent off a lab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_under_test: Option<strobe_model::DeviceUnderTest>,
}

/// Each service's flow, resolved into the model the first time a step sends it (its UDP flow
/// and frame size, text the user gave, parsed and checked there, once); every step then sets
/// its rate and length on it as numbers.
struct ServiceFlows<'a> {
    request: &'a Y1564Request,
    resolved: Vec<Option<Scenario>>,
}

impl<'a> ServiceFlows<'a> {
    fn new(request: &'a Y1564Request) -> Self {
        ServiceFlows {
            request,
            resolved: vec![None; request.services.len()],
        }
    }

    /// Service `k`'s flow, resolved.
    fn resolved(&mut self, k: usize) -> Result<&Scenario, ControlError> {
        let request = self.request;
        let slot = &mut self.resolved[k];
        let scenario = match slot.take() {
            Some(scenario) => scenario,
            None => service_flow(request, &request.services[k])?,
        };
        Ok(slot.insert(scenario))
    }

    /// Service `k`'s flow at `bps` (layer 1), sending for `ns`.
    fn step(&mut self, k: usize, bps: f64, ns: u64) -> Result<(Scenario, Pacing), ControlError> {
        service_step(self.resolved(k)?, bps, ns)
    }
}

/// The flow of `service`, resolved into the model (its rate and length a placeholder).
fn service_flow(request: &Y1564Request, service: &Service) -> Result<Scenario, ControlError> {
    let mut flow = request.flow.clone();
    flow.flow.udp = Some(service.udp.clone());
    flow.flow.size = service.size.clone();
    resolve_flow(&flow, &request.lab_prefix)
}

/// A service's resolved flow at `bps` (layer 1), sending for `ns`, paced.
fn service_step(
    resolved: &Scenario,
    bps: f64,
    ns: u64,
) -> Result<(Scenario, Pacing), ControlError> {
    let scenario = sending(
        resolved,
        Rate::L1BitsPerSec(bps),
        Duration::Seconds(ns as f64 / 1e9),
    )?;
    Ok((scenario, Pacing::Scheduled))
}

/// One scenario sending every service's flow at once (the performance test).
fn all_services(flows: &mut ServiceFlows) -> Result<Scenario, ControlError> {
    let request = flows.request;
    let mut merged: Option<Scenario> = None;
    for (k, s) in request.services.iter().enumerate() {
        let (scenario, _) = flows.step(k, s.cir_bps, request.performance_ns)?;
        match &mut merged {
            None => {
                let mut scenario = scenario;
                if let Some(f) = scenario.flows.first_mut() {
                    f.name = s.name.clone();
                }
                merged = Some(scenario);
            }
            Some(m) => {
                let mut flow = scenario.flows.into_iter().next().ok_or_else(|| {
                    ControlError::Runtime(format!("service `{}` made no flow", s.name))
                })?;
                flow.name = s.name.clone();
                flow.id = u16::try_from(k).map_err(|_| bad("too many services".into()))?;
                m.flows.push(flow);
            }
        }
    }
    merged.ok_or_else(|| bad("no service".into()))
}

/// What `flow` of a run showed.
fn measured(results: &Results, flow: usize, offered_bps: f64, mean_bytes: f64) -> Measured {
    let f = results.flows.get(flow);
    let get = |v: Option<u64>| v.unwrap_or(0);
    let frames_tx = f.map_or(0, |f| get(f.frames_tx));
    let frames_rx = f.map_or(0, |f| get(f.frames_rx_unique));
    let frames_lost = f.map_or(0, |f| get(f.loss));
    let bits = (mean_bytes + 20.0) * 8.0;
    let ir_bps = match f.and_then(|f| Some((f.first_rx_ns?, f.last_rx_ns?))) {
        Some((a, b)) if b > a && frames_rx >= 2 => {
            (frames_rx - 1) as f64 * bits * 1e9 / (b - a) as f64
        }
        _ => 0.0,
    };
    let sent_bps = match f.and_then(|f| Some((f.first_tx_ns?, f.last_tx_ns?))) {
        Some((a, b)) if b > a && frames_tx >= 2 => {
            Some((frames_tx - 1) as f64 * bits * 1e9 / (b - a) as f64)
        }
        _ => None,
    };
    let ftd = f.and_then(|f| f.latency.as_ref()).map(|l| l.raw);
    Measured {
        offered_bps,
        sent_bps,
        ir_bps,
        frames_tx,
        frames_lost,
        flr: if frames_tx > 0 {
            frames_lost as f64 / frames_tx as f64
        } else {
            0.0
        },
        fdv_ns: ftd.map(|l| l.p99_9_ns - l.min_ns),
        ftd,
    }
}

/// Judges `m` as `step` (None: the performance test) of `s`.
fn judge(s: &Service, step: Option<StepKind>, m: &Measured, tolerance: f64) -> Verdict {
    let mut failed = Vec::new();
    let ir_at_least = |want: f64, what: &str, failed: &mut Vec<Warning>| {
        if m.ir_bps < want * (1.0 - tolerance) {
            failed.push(Warning::RateBelow {
                ir_bps: m.ir_bps,
                against: what.to_string(),
                want_bps: want,
            });
        }
    };
    let delay_and_loss = |failed: &mut Vec<Warning>| {
        if m.flr > s.max_flr {
            failed.push(Warning::LossAbove {
                flr: m.flr,
                max_flr: s.max_flr,
            });
        }
        match m.ftd {
            Some(ftd) if ftd.mean_ns > s.max_ftd_ns as f64 => failed.push(Warning::DelayAbove {
                ftd_ns: ftd.mean_ns as u64,
                max_ns: s.max_ftd_ns,
            }),
            None => failed.push(Warning::NoDelayMeasured),
            _ => {}
        }
        if let Some(fdv) = m.fdv_ns {
            if fdv > s.max_fdv_ns as f64 {
                failed.push(Warning::DelayVariationAbove {
                    fdv_ns: fdv as u64,
                    max_ns: s.max_fdv_ns,
                });
            }
        }
    };
    match step {
        Some(StepKind::Cir(_)) | None => {
            // A generator that fell behind offered less than asked: the device is judged on
            // what reached it (the run's warnings say the generator fell short).
            match m.sent_bps {
                Some(sent) if sent < m.offered_bps * (1.0 - tolerance) => {
                    ir_at_least(sent, "what the generator sent", &mut failed)
                }
                _ => ir_at_least(m.offered_bps, "the offered", &mut failed),
            }
            delay_and_loss(&mut failed);
        }
        Some(StepKind::CirEir) => ir_at_least(s.cir_bps, "the CIR", &mut failed),
        Some(StepKind::Policing) => {
            ir_at_least(s.cir_bps, "the CIR", &mut failed);
            let most = s.cir_bps + s.eir_bps;
            if m.ir_bps > most * (1.0 + tolerance) {
                failed.push(Warning::NotPoliced {
                    ir_bps: m.ir_bps,
                    most_bps: most,
                });
            }
        }
    }
    Verdict {
        pass: failed.is_empty(),
        failed,
    }
}

/// The steps of the configuration test for `s`, with the rate each offers.
pub fn steps_of(request: &Y1564Request, s: &Service) -> Vec<(StepKind, f64)> {
    let mut steps: Vec<(StepKind, f64)> = request
        .steps
        .iter()
        .map(|&share| (StepKind::Cir(share * 100.0), s.cir_bps * share))
        .collect();
    if s.eir_bps > 0.0 {
        steps.push((StepKind::CirEir, s.cir_bps + s.eir_bps));
    }
    steps.push((
        StepKind::Policing,
        s.cir_bps + s.eir_bps + request.overshoot * s.cir_bps,
    ));
    steps
}

fn step_name(step: StepKind) -> String {
    match step {
        StepKind::Cir(pct) => format!("{pct:.0} % of CIR"),
        StepKind::CirEir => "CIR + EIR".into(),
        StepKind::Policing => "policing".into(),
    }
}

/// Runs `request` through `runner` until it ends or `stop` is set.
pub fn run_y1564<R: TrialRunner>(
    request: &Y1564Request,
    stop: &AtomicBool,
    runner: &mut R,
) -> Result<Y1564Report, R::Error> {
    let started = Instant::now();
    let mut report = Y1564Report {
        tests: request.tests.clone(),
        step_ns: request.step_ns,
        performance_ns: request.performance_ns,
        ir_tolerance: request.ir_tolerance,
        services: request
            .services
            .iter()
            .map(|s| ServiceResult {
                service: s.clone(),
                configuration: Vec::new(),
                configuration_pass: None,
                performance: None,
                performance_verdict: None,
            })
            .collect(),
        pass: false,
        elapsed_ns: 0,
        interrupted: false,
        failure: None,
        device_under_test: None,
    };
    let runner = &mut NotingDut::new(runner);
    let stopped = || stop.load(Ordering::Relaxed);
    let total: usize = request
        .services
        .iter()
        .map(|s| steps_of(request, s).len())
        .sum();
    let mut done = 0;
    let mut flows = ServiceFlows::new(request);
    if request.tests.contains(&Y1564Test::Configuration) {
        'services: for (k, s) in request.services.iter().enumerate() {
            let steps = steps_of(request, s);
            for (step, bps) in steps {
                if stopped() {
                    break 'services;
                }
                done += 1;
                let label = format!(
                    "configuration: service `{}`, {} ({}), step {done} of {total}",
                    s.name,
                    step_name(step),
                    bps_text(bps)
                );
                let (scenario, pacing) = flows.step(k, bps, request.step_ns)?;
                let mean_bytes = scenario.flows.first().map_or(0.0, |f| f.size.mean());
                let ran = runner.run(TrialRun {
                    what: label,
                    progress: String::new(),
                    scenario,
                    pacing,
                    drain_ns: request.wait_ns,
                    learning: false,
                });
                let Some((scenario, run)) = unless_stopped(ran, stopped)? else {
                    break 'services;
                };
                if stopped() {
                    break 'services;
                }
                let results = Results::new(&scenario, &run, None);
                if !results.failures.is_empty() {
                    report.failure = Some(warning_texts(&results.failures).join("; "));
                    break 'services;
                }
                let m = measured(&results, 0, bps, mean_bytes);
                let verdict = judge(s, Some(step), &m, request.ir_tolerance);
                report.services[k].configuration.push(StepResult {
                    step,
                    measured: m,
                    verdict,
                    warnings: results.warnings.clone(),
                });
                sleep_unless_stopped(request.settle_ns, stop);
            }
            let r = &mut report.services[k];
            r.configuration_pass = Some(r.configuration.iter().all(|s| s.verdict.pass));
        }
    }
    if request.tests.contains(&Y1564Test::Performance) && !stopped() && report.failure.is_none() {
        let scenario = all_services(&mut flows)?;
        let means: Vec<f64> = scenario.flows.iter().map(|f| f.size.mean()).collect();
        let label = format!(
            "performance: {} services at their CIR for {}",
            request.services.len(),
            duration_text(request.performance_ns)
        );
        let ran = runner.run(TrialRun {
            what: label,
            progress: String::new(),
            scenario,
            pacing: Pacing::Scheduled,
            drain_ns: request.wait_ns,
            learning: false,
        });
        if let Some((scenario, run)) = unless_stopped(ran, stopped)?.filter(|_| !stopped()) {
            let results = Results::new(&scenario, &run, None);
            if results.failures.is_empty() {
                for (k, s) in request.services.iter().enumerate() {
                    let m = measured(&results, k, s.cir_bps, means[k]);
                    report.services[k].performance_verdict =
                        Some(judge(s, None, &m, request.ir_tolerance));
                    report.services[k].performance = Some(m);
                }
            } else {
                report.failure = Some(warning_texts(&results.failures).join("; "));
            }
        }
    }
    report.interrupted = stopped();
    report.pass = !report.interrupted
        && report.failure.is_none()
        && report.services.iter().all(|s| {
            (!request.tests.contains(&Y1564Test::Configuration)
                || s.configuration_pass == Some(true))
                && (!request.tests.contains(&Y1564Test::Performance)
                    || s.performance_verdict.as_ref().is_some_and(|v| v.pass))
        });
    report.elapsed_ns = started.elapsed().as_nanos() as u64;
    report.device_under_test = runner.device_under_test.take();
    Ok(report)
}

impl Y1564Report {
    /// Every step and performance result as CSV, one row each.
    pub fn csv(&self) -> String {
        const HEADER: [&str; 14] = [
            "service",
            "test",
            "step",
            "offered_bps",
            "ir_bps",
            "frames_tx",
            "frames_lost",
            "flr_pct",
            "ftd_min_ns",
            "ftd_mean_ns",
            "ftd_max_ns",
            "fdv_ns",
            "pass",
            "failed",
        ];
        let mut rows: Vec<[String; 14]> = Vec::new();
        let mut row = |service: &str, test: &str, step: &str, m: &Measured, v: &Verdict| {
            let f = |x: Option<f64>| x.map(|v| format!("{v:.1}")).unwrap_or_default();
            rows.push([
                service.to_string(),
                test.to_string(),
                step.to_string(),
                format!("{:.0}", m.offered_bps),
                format!("{:.0}", m.ir_bps),
                m.frames_tx.to_string(),
                m.frames_lost.to_string(),
                format!("{:.6}", m.flr * 100.0),
                f(m.ftd.map(|l| l.min_ns)),
                f(m.ftd.map(|l| l.mean_ns)),
                f(m.ftd.map(|l| l.max_ns)),
                f(m.fdv_ns),
                v.pass.to_string(),
                warning_texts(&v.failed).join("; "),
            ]);
        };
        for s in &self.services {
            for st in &s.configuration {
                row(
                    &s.service.name,
                    "configuration",
                    &step_name(st.step),
                    &st.measured,
                    &st.verdict,
                );
            }
            if let (Some(m), Some(v)) = (&s.performance, &s.performance_verdict) {
                row(&s.service.name, "performance", "CIR", m, v);
            }
        }
        csv_text(&HEADER, rows)
    }
}

/// A step's name, for tables.
pub fn step_label(step: StepKind) -> String {
    step_name(step)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> Service {
        Service {
            name: "data".into(),
            udp: "198.18.0.1:1000-198.18.1.1:2000".into(),
            size: "1518".into(),
            cir_bps: 40e6,
            eir_bps: 20e6,
            max_flr: 0.0,
            max_ftd_ns: 10_000_000,
            max_fdv_ns: 5_000_000,
        }
    }

    fn stats(mean: f64, min: f64, p999: f64) -> LatencyStats {
        LatencyStats {
            count: 100,
            min_ns: min,
            mean_ns: mean,
            stddev_ns: 1.0,
            p50_ns: mean,
            p90_ns: mean,
            p99_ns: mean,
            p99_9_ns: p999,
            p99_99_ns: p999,
            p99_999_ns: p999,
            p99_9999_ns: p999,
            max_ns: p999,
        }
    }

    fn m(offered: f64, ir: f64, lost: u64, ftd: LatencyStats) -> Measured {
        Measured {
            offered_bps: offered,
            sent_bps: None,
            ir_bps: ir,
            frames_tx: 10_000,
            frames_lost: lost,
            flr: lost as f64 / 10_000.0,
            fdv_ns: Some(ftd.p99_9_ns - ftd.min_ns),
            ftd: Some(ftd),
        }
    }

    #[test]
    fn cir_steps_are_judged_on_every_criterion() {
        let s = service();
        let good = stats(1e6, 5e5, 2e6);
        let v = judge(
            &s,
            Some(StepKind::Cir(100.0)),
            &m(40e6, 39.9e6, 0, good),
            0.02,
        );
        assert!(v.pass, "{v:?}");
        let v = judge(
            &s,
            Some(StepKind::Cir(100.0)),
            &m(40e6, 35e6, 3, good),
            0.02,
        );
        assert!(!v.pass);
        assert!(
            v.failed.iter().any(|f| f.to_string().starts_with("IR")),
            "{v:?}"
        );
        assert!(
            v.failed.iter().any(|f| f.to_string().starts_with("FLR")),
            "{v:?}"
        );
        // A generator that fell 3 % behind (a busy machine): the device forwarded all it
        // was given, which is what it is judged on.
        let behind = Measured {
            sent_bps: Some(38.8e6),
            ..m(40e6, 38.8e6, 0, good)
        };
        let v = judge(&s, Some(StepKind::Cir(100.0)), &behind, 0.02);
        assert!(v.pass, "{v:?}");
        let short = Measured {
            ir_bps: 30e6,
            ..behind
        };
        let v = judge(&s, Some(StepKind::Cir(100.0)), &short, 0.02);
        assert!(
            v.failed[0]
                .to_string()
                .contains("below what the generator sent 38.800 Mbit/s"),
            "{v:?}"
        );
        let slow = stats(20e6, 5e5, 8e6);
        let v = judge(&s, None, &m(40e6, 40e6, 0, slow), 0.02);
        assert_eq!(v.failed.len(), 2, "{v:?}");
        assert!(
            v.failed[0]
                .to_string()
                .starts_with("FTD 20.000 ms above 10.000 ms"),
            "{v:?}"
        );
        assert!(v.failed[1].to_string().starts_with("FDV"), "{v:?}");
    }

    #[test]
    fn above_the_cir_only_the_rates_count() {
        let s = service();
        let lossy = stats(9e6, 5e5, 9.9e6);
        // CIR + EIR offered, 50 Mbit/s through, many frames lost: passes (at least the CIR).
        let v = judge(
            &s,
            Some(StepKind::CirEir),
            &m(60e6, 50e6, 1000, lossy),
            0.02,
        );
        assert!(v.pass, "{v:?}");
        // Policing: 75 Mbit/s offered, 50 through: policed below CIR + EIR.
        let v = judge(
            &s,
            Some(StepKind::Policing),
            &m(75e6, 50e6, 3000, lossy),
            0.02,
        );
        assert!(v.pass, "{v:?}");
        // Not policed: everything came through.
        let v = judge(&s, Some(StepKind::Policing), &m(75e6, 75e6, 0, lossy), 0.02);
        assert!(
            !v.pass && v.failed[0].to_string().contains("not policed"),
            "{v:?}"
        );
        // Below the CIR.
        let v = judge(&s, Some(StepKind::CirEir), &m(60e6, 30e6, 0, lossy), 0.02);
        assert!(
            !v.pass && v.failed[0].to_string().contains("below the CIR"),
            "{v:?}"
        );
    }

    #[test]
    fn the_steps_climb_to_the_cir_then_above() {
        let r = Y1564Spec {
            services: vec![ServiceSpec {
                cir: "40mbit".into(),
                eir: "20mbit".into(),
                ..ServiceSpec::default()
            }],
            ..Y1564Spec::default()
        }
        .request("lab")
        .unwrap();
        let s = &r.services[0];
        assert_eq!(s.name, "service1");
        let rates: Vec<f64> = steps_of(&r, s).iter().map(|x| x.1).collect();
        assert_eq!(rates, [10e6, 20e6, 30e6, 40e6, 60e6, 70e6]);
        // Without an EIR there is no CIR + EIR step.
        let mut no_eir = s.clone();
        no_eir.eir_bps = 0.0;
        let kinds: Vec<StepKind> = steps_of(&r, &no_eir).iter().map(|x| x.0).collect();
        assert_eq!(kinds.last(), Some(&StepKind::Policing));
        assert!(!kinds.contains(&StepKind::CirEir));
    }

    /// Each step sets its rate and length on the service's flow, resolved once; the scenario
    /// is the one the command-line text (`--udp … --size … --rate NNNbps --duration NNNns`)
    /// made before, the performance test's too, and a service's bad text is refused as it
    /// was.
    #[test]
    fn steps_set_rate_and_length_on_the_typed_flow_as_the_text_did() {
        let spec = |services: Vec<ServiceSpec>| Y1564Spec {
            port: "null".into(),
            rx: "null".into(),
            services,
            ..Y1564Spec::default()
        };
        let r = spec(vec![
            ServiceSpec {
                name: "data".into(),
                size: "512".into(),
                cir: "40mbit".into(),
                eir: "20mbit".into(),
                ..ServiceSpec::default()
            },
            ServiceSpec {
                name: "voice".into(),
                udp: "198.18.0.1:1001-198.18.1.1:2001".into(),
                size: "imix".into(),
                cir: "5mbit".into(),
                ..ServiceSpec::default()
            },
        ])
        .request("strobe")
        .unwrap();
        let by_text = |r: &Y1564Request, s: &Service, bps: f64, ns: u64| {
            let mut flow = r.flow.clone();
            flow.flow.udp = Some(s.udp.clone());
            flow.flow.size = s.size.clone();
            flow.flow.rate = format!("{bps:.0}bps");
            flow.flow.duration = Some(format!("{ns}ns"));
            flow.scenario(&r.lab_prefix, false)
                .map(|(scenario, pacing)| (format!("{scenario:?}"), pacing))
                .map_err(|e| e.to_string())
        };
        let mut flows = ServiceFlows::new(&r);
        for (k, s) in r.services.iter().enumerate() {
            for (_, bps) in steps_of(&r, s) {
                let (scenario, pacing) = flows.step(k, bps, r.step_ns).unwrap();
                assert_eq!(
                    Ok((format!("{scenario:?}"), pacing)),
                    by_text(&r, s, bps, r.step_ns),
                    "{} at {bps}",
                    s.name
                );
            }
        }
        // The performance test: every service at its CIR, one flow each.
        let merged = all_services(&mut flows).unwrap();
        let mut by_text_merged = Vec::new();
        for (k, s) in r.services.iter().enumerate() {
            let mut flow = r.flow.clone();
            flow.flow.udp = Some(s.udp.clone());
            flow.flow.size = s.size.clone();
            flow.flow.rate = format!("{:.0}bps", s.cir_bps);
            flow.flow.duration = Some(format!("{}ns", r.performance_ns));
            let (scenario, _) = flow.scenario(&r.lab_prefix, false).unwrap();
            let mut f = scenario.flows[0].clone();
            f.name = s.name.clone();
            f.id = k as u16;
            by_text_merged.push(format!("{f:?}"));
        }
        let typed: Vec<String> = merged.flows.iter().map(|f| format!("{f:?}")).collect();
        assert_eq!(typed, by_text_merged);
        assert_eq!(merged.ports.len(), 2);
        // A service's UDP flow or frame size the model refuses: the same message.
        for bad in [
            ServiceSpec {
                udp: "198.18.0.1-198.18.1.1".into(),
                cir: "1mbit".into(),
                ..ServiceSpec::default()
            },
            ServiceSpec {
                size: "huge".into(),
                cir: "1mbit".into(),
                ..ServiceSpec::default()
            },
        ] {
            let r = spec(vec![bad]).request("strobe").unwrap();
            let typed = ServiceFlows::new(&r)
                .step(0, 1e6, r.step_ns)
                .map(|_| ())
                .map_err(|e| e.to_string());
            let text = by_text(&r, &r.services[0], 1e6, r.step_ns).map(|_| ());
            assert!(text.is_err());
            assert_eq!(typed, text);
        }
    }

    #[test]
    fn bad_specs_name_what_is_wrong() {
        let err = |spec: Y1564Spec| spec.request("lab").unwrap_err().to_string();
        assert!(err(Y1564Spec::default()).contains("at least one service"));
        let one = |s: ServiceSpec| Y1564Spec {
            services: vec![s],
            ..Y1564Spec::default()
        };
        assert!(err(one(ServiceSpec::default())).contains("committed information rate"));
        assert!(err(one(ServiceSpec {
            cir: "fast".into(),
            ..ServiceSpec::default()
        }))
        .contains("cir `fast`"));
        let twice = Y1564Spec {
            services: vec![
                ServiceSpec {
                    name: "a".into(),
                    cir: "1mbit".into(),
                    ..ServiceSpec::default()
                },
                ServiceSpec {
                    name: "b".into(),
                    cir: "1mbit".into(),
                    ..ServiceSpec::default()
                },
            ],
            ..Y1564Spec::default()
        };
        assert!(err(twice).contains("share the UDP flow"));
        let spec: Y1564Spec = serde_json::from_str(
            r#"{"services": [{"name": "v", "cir": "10mbit", "max_flr_pct": 0.1}], "step": "2s"}"#,
        )
        .unwrap();
        let r = spec.request("lab").unwrap();
        assert_eq!((r.step_ns, r.services[0].max_flr), (2_000_000_000, 0.001));
        assert!(serde_json::from_str::<Y1564Spec>(r#"{"servicez": []}"#).is_err());
    }

    #[test]
    fn the_csv_has_a_row_per_step_and_keeps_the_failed_criteria_whole() {
        let s = service();
        let measured = m(40e6, 35e6, 3, stats(1e6, 5e5, 2e6));
        let verdict = judge(&s, Some(StepKind::Cir(100.0)), &measured, 0.02);
        assert!(verdict.failed.len() >= 2, "{verdict:?}");
        let report = Y1564Report {
            tests: vec![Y1564Test::Configuration],
            step_ns: 1_000_000_000,
            performance_ns: 0,
            ir_tolerance: 0.02,
            services: vec![ServiceResult {
                service: Service {
                    name: "data, \"gold\"".into(),
                    ..s
                },
                configuration: vec![StepResult {
                    step: StepKind::Cir(100.0),
                    measured,
                    verdict: verdict.clone(),
                    warnings: Vec::new(),
                }],
                configuration_pass: Some(false),
                performance: None,
                performance_verdict: None,
            }],
            pass: false,
            elapsed_ns: 0,
            interrupted: false,
            failure: None,
            device_under_test: None,
        };
        let text = report.csv();
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        assert_eq!(reader.headers().unwrap().len(), 14);
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 1, "{text}");
        assert_eq!(&rows[0][0], "data, \"gold\"");
        assert_eq!(&rows[0][1], "configuration");
        assert_eq!(&rows[0][12], "false");
        assert_eq!(rows[0][13], warning_texts(&verdict.failed).join("; "));
    }
}
