//! The benchmarks as asked: the spec a user writes (command-line options, the server's JSON
//! body), checked and typed into the request the benchmarks run.

use serde::{Deserialize, Serialize};
use strobe_analyze::search::SearchMethod;
use strobe_timing::Rate;

use crate::methodology::spec_flow;
use crate::source::OneFlow;
use crate::ControlError;

/// RFC 2544's frame sizes for Ethernet (§9.1), FCS included.
pub const DEFAULT_SIZES: [&str; 7] = ["64", "128", "256", "512", "1024", "1280", "1518"];

/// Loads for the latency benchmark, as shares of the throughput.
pub const DEFAULT_LATENCY_LOADS_PCT: [f64; 4] = [100.0, 90.0, 50.0, 10.0];

/// Slices of the recovery window, each a flow of its own: enough for a fine resolution,
/// few enough to keep a run's flows light.
const MAX_RECOVERY_SLICES: u64 = 1000;

/// One of the benchmarks.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Benchmark {
    Throughput,
    Latency,
    Loss,
    BackToBack,
    Recovery,
}

impl Benchmark {
    pub const ALL: [Benchmark; 5] = [
        Benchmark::Throughput,
        Benchmark::Latency,
        Benchmark::Loss,
        Benchmark::BackToBack,
        Benchmark::Recovery,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Benchmark::Throughput => "throughput",
            Benchmark::Latency => "latency",
            Benchmark::Loss => "loss",
            Benchmark::BackToBack => "back_to_back",
            Benchmark::Recovery => "recovery",
        }
    }
}

/// The benchmarks as a user asks for them: the command line's options, the server's request
/// body (JSON, these names), with the same defaults and checks for both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Rfc2544Spec {
    /// Which benchmarks, in RFC order whatever the order given; empty: all of them.
    pub tests: Vec<Benchmark>,
    /// Transmit and receive port locations (`lab:tx`, `afpacket:NETNS/IFACE`, …).
    pub port: String,
    pub rx: String,
    /// The UDP flow, SRC:PORT-DST:PORT.
    pub udp: String,
    pub src_mac: Option<String>,
    pub dst_mac: Option<String>,
    /// Frame sizes, FCS included, or `imix` (empty: [`DEFAULT_SIZES`]).
    pub sizes: Vec<String>,
    /// The link's line rate (layer 1): 100 % of a size's rate.
    pub link: String,
    /// The highest rate to try, if below the line rate (`500kpps`, `2g`, …).
    pub max_rate: Option<String>,
    /// Each trial's traffic time, e.g. `10s` (the RFC asks for 60 s for the throughput).
    pub trial: String,
    /// How long the receiver keeps counting after a trial's last frame (late frames).
    pub wait: String,
    /// Pause between trials for the DUT to settle.
    pub settle: String,
    /// Learning frames sent from the receive port before each trial (0: none).
    pub learning: u64,
    /// The throughput search ends when its passing and failing rates are this close, in
    /// percent of the failing rate.
    pub resolution_pct: f64,
    /// Also find the rate with at most this loss, in percent, in the same search (the
    /// partial-drop rate, PDR); None: the no-drop rate alone.
    pub pdr_pct: Option<f64>,
    /// At most this many trials per throughput search.
    pub max_trials: usize,
    /// `aimed` (at what the DUT forwarded) or `binary` (halving, for comparison).
    pub search: SearchMethod,
    /// Latency loads, in percent of the throughput (empty: [`DEFAULT_LATENCY_LOADS_PCT`]).
    pub latency_loads_pct: Vec<f64>,
    /// Trials per latency load, aggregated.
    pub latency_trials: u32,
    /// The loss curve's step, in percent of the highest rate.
    pub loss_step_pct: f64,
    /// Back-to-back: searches for the longest burst, averaged (RFC 2544 asks for 50).
    pub b2b_searches: u32,
    /// Back-to-back: the longest burst tried, as the time it lasts at the highest rate.
    pub b2b_max: String,
    /// System recovery: how long the overload at 110 % of the throughput lasts (the RFC
    /// asks for at least 60 s).
    pub recovery_overload: String,
    /// System recovery: how long the load at 50 % is watched for loss, and in slices of
    /// what length (the recovery time's resolution).
    pub recovery_window: String,
    pub recovery_slice: String,
}

impl Default for Rfc2544Spec {
    fn default() -> Self {
        Rfc2544Spec {
            tests: Vec::new(),
            port: "lab:tx".into(),
            rx: "lab:rx".into(),
            udp: "198.18.0.1:1000-198.18.1.1:2000".into(),
            src_mac: None,
            dst_mac: None,
            sizes: Vec::new(),
            link: "10g".into(),
            max_rate: None,
            trial: "10s".into(),
            wait: "2s".into(),
            settle: "1s".into(),
            learning: 16,
            resolution_pct: 0.5,
            pdr_pct: Some(0.5),
            max_trials: 30,
            search: SearchMethod::Aimed,
            latency_loads_pct: Vec::new(),
            latency_trials: 1,
            loss_step_pct: 10.0,
            b2b_searches: 3,
            b2b_max: "2s".into(),
            recovery_overload: "10s".into(),
            recovery_window: "2s".into(),
            recovery_slice: "20ms".into(),
        }
    }
}

/// How every trial runs and how a search judges it: asked for in the request, echoed in
/// the report (flattened there: its fields are the report's own in JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrialSettings {
    /// The link's line rate (layer 1).
    pub link_bps: f64,
    pub trial_ns: u64,
    pub wait_ns: u64,
    pub settle_ns: u64,
    pub learning_frames: u64,
    pub relative_resolution: f64,
    /// Loss ratios searched for: 0 (NDR) and the PDR's.
    pub tolerances: Vec<f64>,
    pub search: SearchMethod,
}

/// The benchmarks as asked, checked and typed.
#[derive(Clone, Debug)]
pub struct Rfc2544Request {
    /// The flow: ports, addresses, the receive port; each trial sets size, rate and count.
    pub flow: OneFlow,
    pub lab_prefix: String,
    pub tests: Vec<Benchmark>,
    pub sizes: Vec<String>,
    pub settings: TrialSettings,
    pub max_rate: Option<Rate>,
    pub max_trials: usize,
    /// Shares of the throughput (0 to 1].
    pub latency_loads: Vec<f64>,
    pub latency_trials: u32,
    /// Share of the highest rate (0 to 1].
    pub loss_step: f64,
    pub b2b_searches: u32,
    pub b2b_max_ns: u64,
    pub recovery_overload_ns: u64,
    pub recovery_window_ns: u64,
    pub recovery_slice_ns: u64,
}

impl Rfc2544Spec {
    /// The request this spec makes, on the lab `lab_prefix` (for `lab:` ports).
    pub fn request(&self, lab_prefix: &str) -> Result<Rfc2544Request, ControlError> {
        let bad = |m: String| ControlError::BadInput(m);
        let duration = |what: &str, text: &str, zero_ok: bool| {
            strobe_timing::parse_duration_ns(text)
                .ok()
                .filter(|&ns| zero_ok || ns > 0)
                .ok_or_else(|| {
                    bad(format!(
                        "{what} `{text}`: give a {}duration, e.g. 2s or 500ms",
                        if zero_ok { "" } else { "positive " }
                    ))
                })
        };
        let link_bps = strobe_analyze::physics::parse_line_rate_bps(&self.link)
            .map_err(|e| bad(format!("link `{}`: {e}", self.link)))?;
        let max_rate = self
            .max_rate
            .as_deref()
            .map(|r| strobe_timing::parse_rate(r).map_err(|e| bad(format!("max rate: {e}"))))
            .transpose()?;
        let pct = |what: &str, v: f64, lo_open: bool| {
            let ok = v.is_finite() && v <= 100.0 && if lo_open { v > 0.0 } else { v >= 0.0 };
            if ok {
                Ok(v / 100.0)
            } else {
                Err(bad(format!(
                    "{what} {v}: give a percentage {} 0 and at most 100",
                    if lo_open { "above" } else { "from" }
                )))
            }
        };
        let relative_resolution = pct("resolution", self.resolution_pct, true)?;
        let mut tolerances = vec![0.0];
        if let Some(p) = self.pdr_pct {
            let t = pct("PDR loss", p, true)?;
            if t >= 1.0 {
                return Err(bad("PDR loss 100 %: every rate passes it; give less".into()));
            }
            tolerances.push(t);
        }
        let latency_loads = if self.latency_loads_pct.is_empty() {
            DEFAULT_LATENCY_LOADS_PCT.to_vec()
        } else {
            self.latency_loads_pct.clone()
        }
        .into_iter()
        .map(|l| pct("latency load", l, true))
        .collect::<Result<Vec<_>, _>>()?;
        let loss_step = pct("loss step", self.loss_step_pct, true)?;
        if self.max_trials < 2 {
            return Err(bad(format!(
                "at most {} trials per search: a search needs at least 2",
                self.max_trials
            )));
        }
        if self.latency_trials == 0 {
            return Err(bad("latency trials: give at least 1".into()));
        }
        if self.b2b_searches == 0 {
            return Err(bad("back-to-back searches: give at least 1".into()));
        }
        let recovery_window_ns = duration("recovery window", &self.recovery_window, false)?;
        let recovery_slice_ns = duration("recovery slice", &self.recovery_slice, false)?;
        if recovery_window_ns / recovery_slice_ns > MAX_RECOVERY_SLICES {
            return Err(bad(format!(
                "a recovery window of {} in slices of {} makes more than {MAX_RECOVERY_SLICES} \
                 slices: give longer slices or a shorter window",
                self.recovery_window, self.recovery_slice
            )));
        }
        let mut tests = if self.tests.is_empty() {
            Benchmark::ALL.to_vec()
        } else {
            self.tests.clone()
        };
        tests.sort();
        tests.dedup();
        let mut flow = spec_flow(&self.port, &self.rx, &self.src_mac, &self.dst_mac);
        flow.flow.udp = Some(self.udp.clone());
        // Rates are checked against the link here, not the model's default port.
        flow.flow.unbounded = true;
        Ok(Rfc2544Request {
            flow,
            lab_prefix: lab_prefix.to_string(),
            tests,
            sizes: if self.sizes.is_empty() {
                DEFAULT_SIZES.iter().map(|s| s.to_string()).collect()
            } else {
                self.sizes.clone()
            },
            settings: TrialSettings {
                link_bps,
                trial_ns: duration("trial", &self.trial, false)?,
                wait_ns: duration("wait", &self.wait, true)?,
                settle_ns: duration("settle", &self.settle, true)?,
                learning_frames: self.learning,
                relative_resolution,
                tolerances,
                search: self.search,
            },
            max_rate,
            max_trials: self.max_trials,
            latency_loads,
            latency_trials: self.latency_trials,
            loss_step,
            b2b_searches: self.b2b_searches,
            b2b_max_ns: duration("back-to-back maximum", &self.b2b_max, false)?,
            recovery_overload_ns: duration("recovery overload", &self.recovery_overload, false)?,
            recovery_window_ns,
            recovery_slice_ns,
        })
    }
}
