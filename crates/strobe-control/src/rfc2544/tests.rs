//! The benchmarks against a model: a generator that offers at most so much, in front of a
//! DUT that forwards at most so much and drops the rest.

use std::net::Ipv6Addr;

use strobe_analyze::latency::LatencyStats;
use strobe_engine::latency::FlowLatency;
use strobe_timing::Duration;
use strobe_wire::HeaderKind;

use super::flows::tests::{field, v4};
use super::flows::SizedFlow;
use super::session::{
    run_sizes, search_trials_per_size, Label, Offer, TrialAsk, TrialOutcome, Trials,
};
use super::*;
use crate::ControlError;

/// A model generator and DUT.
struct Model {
    /// The most the generator offers unpaced, and paced.
    unpaced_pps: f64,
    paced_pps: f64,
    /// The DUT forwards up to this many frames per second…
    capacity_pps: f64,
    /// …and holds this many more in its buffer.
    buffer_frames: u64,
    /// After an overload it goes on losing frames this long.
    recovery_lag_ns: u64,
    trial_s: f64,
    /// Each frame's latency (µs) grows with the load, so loads are told apart.
    asked: Vec<(Benchmark, Option<f64>)>,
    /// What each trial was called, and the progress beside it.
    labels: Vec<(String, String)>,
    /// Stop after this many trials.
    stop_after: Option<usize>,
    stopped: bool,
}

impl Model {
    fn new(unpaced_pps: f64, paced_pps: f64, capacity_pps: f64) -> Model {
        Model {
            unpaced_pps,
            paced_pps,
            capacity_pps,
            buffer_frames: 0,
            recovery_lag_ns: 0,
            trial_s: 1.0,
            asked: Vec::new(),
            labels: Vec::new(),
            stop_after: None,
            stopped: false,
        }
    }
}

impl Trials for Model {
    type Error = ControlError;

    fn run_trial(
        &mut self,
        trial: TrialAsk<'_>,
        label: Label,
    ) -> Result<Option<TrialOutcome>, ControlError> {
        if self.stopped {
            return Ok(None);
        }
        self.labels.push((label.what, label.progress));
        let asked_pps = trial.offer.asked_pps();
        self.asked.push((trial.benchmark, asked_pps));
        let offered = asked_pps.map_or(self.unpaced_pps, |a| a.min(self.paced_pps));
        let (frames_tx, seconds) = match trial.offer {
            Offer::Burst(n) => (n, n as f64 / offered),
            _ => ((offered * self.trial_s).round() as u64, self.trial_s),
        };
        let forwarded = (self.capacity_pps * seconds).round() as u64 + self.buffer_frames;
        let frames_rx = frames_tx.min(forwarded);
        let mut latency = FlowLatency::default();
        let micros = (1.0 + 10.0 * offered / self.capacity_pps) as u64;
        for k in 0..frames_rx.min(1000) {
            latency.record(k * 1_000_000, k * 1_000_000 + micros * 1000);
        }
        if self.stop_after == Some(self.asked.len()) {
            self.stopped = true;
        }
        Ok(Some(TrialOutcome {
            result: TrialResult {
                benchmark: trial.benchmark,
                size: trial.size.size.clone(),
                asked_pps,
                offered_pps: offered,
                frames_tx,
                frames_rx,
                frames_lost: frames_tx - frames_rx,
                loss_ratio: (frames_tx - frames_rx) as f64 / frames_tx as f64,
                reordered: 0,
                duplicates: 0,
                latency: LatencyStats::from_histogram(latency.histogram()),
                timestamps: None,
                wall_ns: 1_000_000_000,
                interrupted: self.stopped,
                warnings: Vec::new(),
                failures: Vec::new(),
            },
            latency: Some(latency),
        }))
    }

    fn run_recovery(
        &mut self,
        _size: &FrameSize,
        plan: &RecoveryPlan,
        label: Label,
    ) -> Result<Option<RecoveryOutcome>, ControlError> {
        self.labels.push((label.what, label.progress));
        self.asked
            .push((Benchmark::Recovery, Some(plan.overload_pps)));
        let sent = plan.overload_frames();
        let excess = (plan.overload_pps - self.capacity_pps) * plan.overload_ns as f64 / 1e9;
        let lost = (excess.max(0.0) as u64).saturating_sub(self.buffer_frames);
        let slices = (0..plan.slices)
            .map(|k| {
                let lossy = lost > 0 && k * plan.slice_ns < self.recovery_lag_ns;
                (plan.slice_frames(), u64::from(lossy))
            })
            .collect();
        Ok(Some(RecoveryOutcome {
            overload: (sent, lost),
            slices,
            wall_ns: 1_000_000_000,
            warnings: Vec::new(),
        }))
    }

    fn stopped(&self) -> bool {
        self.stopped
    }

    fn failure(&self) -> Option<String> {
        None
    }
}

fn request(tests: &[Benchmark]) -> Rfc2544Request {
    Rfc2544Spec {
        tests: tests.to_vec(),
        port: "null".into(),
        rx: "null".into(),
        ..Rfc2544Spec::default()
    }
    .request("strobe")
    .unwrap()
}

fn size64() -> FrameSize {
    FrameSize {
        size: "64".into(),
        mean_bytes: 64.0,
        line_rate_pps: 10e9 / (84.0 * 8.0),
    }
}

fn run(tests: &[Benchmark], model: &mut Model) -> Rfc2544Report {
    run_sizes(&request(tests), &[size64()], model).unwrap()
}

#[test]
fn the_ndr_is_the_dut_s_capacity_to_the_resolution_in_a_few_trials() {
    let mut model = Model::new(1_100_000.0, 1_050_000.0, 104_166.0);
    let report = run(&[Benchmark::Throughput], &mut model);
    let t = &report.throughput[0];
    // The first trial ran unpaced, and what it offered became the highest rate.
    assert_eq!(model.asked[0], (Benchmark::Throughput, None));
    assert_eq!(
        (t.max_pps, t.max_source),
        (1_100_000.0, MaxSource::Generator)
    );
    let ndr = t.ndr().unwrap().pps;
    assert!((104_166.0 * 0.995..=104_166.0).contains(&ndr), "NDR {ndr}");
    let o = &t.outcomes[0];
    assert!(o.resolved && o.lowest_failed_pps.unwrap() - ndr <= 0.005 * 105_000.0);
    // The PDR (0.5 %) is searched in the same trials: a shaper's is just above its NDR.
    let pdr = t.outcomes[1].rate.unwrap().pps;
    assert!(pdr >= ndr && pdr <= 104_166.0 / 0.995 + 1.0, "PDR {pdr}");
    let rates: Vec<_> = t.trials.iter().map(|t| t.asked_pps).collect();
    assert!(t.trials.len() <= 7, "{} trials: {rates:?}", t.trials.len());
    assert_eq!(report.trials, t.trials.len());
    // Rates read in every unit: 104 kpps of 64-byte frames are 70 Mbit/s at layer 1.
    let f = t.ndr().unwrap();
    assert!((f.l1_bps - ndr * 84.0 * 8.0).abs() < 1.0);
    assert!((f.line_pct - 100.0 * ndr / size64().line_rate_pps).abs() < 1e-9);
}

/// The settings a report echoes are its own fields in JSON (as before they were grouped),
/// and the report reads back as it was written.
#[test]
fn a_report_keeps_its_json_fields_and_round_trips() {
    let mut model = Model::new(1_100_000.0, 1_050_000.0, 104_166.0);
    let report = run(&[Benchmark::Throughput], &mut model);
    let json = serde_json::to_value(&report).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for key in [
        "tests",
        "link_bps",
        "trial_ns",
        "wait_ns",
        "settle_ns",
        "learning_frames",
        "relative_resolution",
        "tolerances",
        "search",
        "throughput",
    ] {
        assert!(keys.contains(&key), "{key} missing: {keys:?}");
    }
    assert!(!keys.contains(&"settings"), "{keys:?}");
    let back: Rfc2544Report = serde_json::from_value(json).unwrap();
    assert_eq!(back, report);
}

#[test]
fn a_generator_faster_than_the_line_is_held_to_the_line_rate() {
    let line = size64().line_rate_pps;
    let mut model = Model::new(2.0 * line, 2.0 * line, 2.0 * line);
    let report = run(&[Benchmark::Throughput], &mut model);
    let t = &report.throughput[0];
    assert_eq!((t.max_pps, t.max_source), (line, MaxSource::LineRate));
    assert_eq!(model.asked[1], (Benchmark::Throughput, Some(line)));
    // Everything passed at the line rate: two trials, NDR = line rate.
    assert_eq!(t.trials.len(), 2);
    assert_eq!(t.ndr().unwrap().pps, line);
}

#[test]
fn a_generator_that_paces_slower_than_it_sends_lowers_the_highest_rate() {
    // Unpaced 1.1 Mpps, but paced at most 900 kpps; the DUT forwards 1 Mpps.
    let mut model = Model::new(1_100_000.0, 900_000.0, 1_000_000.0);
    let report = run(&[Benchmark::Throughput], &mut model);
    let t = &report.throughput[0];
    assert_eq!(t.max_source, MaxSource::Generator);
    assert!(t.max_pps <= 900_000.0, "{}", t.max_pps);
    // The DUT lost nothing at what the generator offered paced: that is the NDR, and the
    // report says the generator limited it.
    assert_eq!(t.ndr().unwrap().pps, t.max_pps);
    assert!(t.trials.len() <= 4, "{} trials", t.trials.len());
}

#[test]
fn latency_runs_at_shares_of_the_throughput_and_merges_its_trials() {
    let mut model = Model::new(1_100_000.0, 1_100_000.0, 200_000.0);
    let mut r = request(&[Benchmark::Latency]);
    r.latency_trials = 2;
    let report = run_sizes(&r, &[size64()], &mut model).unwrap();
    // The throughput was searched for the latency's sake, and is reported.
    assert_eq!(report.tests, [Benchmark::Throughput, Benchmark::Latency]);
    let ndr = report.throughput[0].ndr().unwrap().pps;
    let l = &report.latency[0];
    assert_eq!(l.throughput_pps, Some(ndr));
    let loads: Vec<f64> = l.points.iter().map(|p| p.load_pct).collect();
    assert_eq!(loads, [100.0, 90.0, 50.0, 10.0]);
    for p in &l.points {
        assert_eq!(p.trials.len(), 2);
        assert!((p.rate.pps - ndr * p.load_pct / 100.0).abs() < 1e-6);
        // Both trials' frames are in the merged distribution.
        let merged = p.latency.unwrap();
        assert_eq!(merged.count, 2000);
    }
    // The model's latency grows with the load: the points are told apart.
    assert!(l.points[0].latency.unwrap().p50_ns > l.points[3].latency.unwrap().p50_ns);
    let latency_trials = model
        .asked
        .iter()
        .filter(|(b, _)| *b == Benchmark::Latency)
        .count();
    assert_eq!(latency_trials, 8);
}

#[test]
fn the_loss_curve_steps_down_until_two_steps_lose_nothing_and_shares_the_first_trial() {
    let mut model = Model::new(1_000_000.0, 1_000_000.0, 650_000.0);
    let report = run(&[Benchmark::Throughput, Benchmark::Loss], &mut model);
    let c = &report.loss[0];
    let loads: Vec<f64> = c.points.iter().map(|p| p.load_pct.round()).collect();
    // 100 … 70 % lose; 60 and 50 % do not: the curve ends there.
    assert_eq!(loads, [100.0, 90.0, 80.0, 70.0, 60.0, 50.0]);
    assert!((c.points[0].loss_ratio - 0.35).abs() < 1e-6);
    assert_eq!(c.points[4].loss_ratio, 0.0);
    // The 100 % point is the throughput's first trial, not run again.
    let unpaced = model.asked.iter().filter(|(_, a)| a.is_none()).count();
    assert_eq!(unpaced, 1);
    assert_eq!(c.points[0].trial, report.throughput[0].trials[0]);
}

#[test]
fn back_to_back_finds_the_longest_burst_and_the_buffer_it_implies() {
    // Bursts at 1 Mpps into a DUT forwarding 100 kpps with 900 frames of buffer: the longest
    // burst without loss is 1000 frames (900 / (1 − 0.1)), which lasts 1 ms at 1 Mpps.
    let mut model = Model::new(1_000_000.0, 1_000_000.0, 100_000.0);
    model.buffer_frames = 900;
    let report = run(&[Benchmark::Throughput, Benchmark::BackToBack], &mut model);
    let b = &report.back_to_back[0];
    assert_eq!(b.searches.len(), 3);
    assert_eq!(b.max_frames, 2_000_000, "2 s at the highest rate");
    for s in &b.searches {
        let frames = s.frames.unwrap();
        assert!((995..=1001).contains(&frames), "{frames}: {s:?}");
        assert!(
            s.resolved && s.trials.len() <= 12,
            "{} trials",
            s.trials.len()
        );
    }
    let mean = b.mean_frames.unwrap();
    assert!((b.implied_buffer_ns.unwrap() - mean / 1e6 * 1e9).abs() < 1e-6);
    // The throughput found (the DUT's 100 kpps plus its buffer over the 1 s trials) corrects
    // it: about 900 frames held, 9 ms of queue at that rate.
    let t = b.throughput_pps.unwrap();
    assert!((100_000.0..=101_000.0).contains(&t), "{t}");
    let held = b.buffered_frames.unwrap();
    assert!((890.0..=905.0).contains(&held), "{held}");
    assert!((b.buffer_drain_ns.unwrap() - held / t * 1e9).abs() < 1.0);
}

#[test]
fn recovery_is_timed_from_the_reduction_to_the_last_lossy_slice() {
    let mut model = Model::new(1_000_000.0, 1_000_000.0, 100_000.0);
    model.recovery_lag_ns = 45_000_000;
    let report = run(&[Benchmark::Recovery], &mut model);
    // The throughput was searched for the recovery's sake.
    assert_eq!(report.tests, [Benchmark::Throughput, Benchmark::Recovery]);
    let r = &report.recovery[0];
    let plan = r.plan.unwrap();
    let t = r.throughput_pps.unwrap();
    assert!(
        (plan.overload_pps - 1.1 * t).abs() < 1e-6 && (plan.recovery_pps - 0.5 * t).abs() < 1e-6
    );
    assert_eq!((plan.slice_ns, plan.slices), (20_000_000, 100));
    // Slices 0, 1 and 2 (0-60 ms) lost frames: recovered 60 ms after the reduction.
    assert_eq!(r.recovery_ns, Some(60_000_000), "{r:?}");
    // A DUT that never stops losing within the window is said to be so.
    model.recovery_lag_ns = u64::MAX;
    let report = run(&[Benchmark::Recovery], &mut model);
    let r = &report.recovery[0];
    assert_eq!(r.recovery_ns, None);
    assert!(
        r.note.as_deref().unwrap().contains("not recovered"),
        "{r:?}"
    );
    // A DUT that forwards all the port takes cannot be overloaded from it: said so.
    model.buffer_frames = 10_000_000;
    let report = run(&[Benchmark::Recovery], &mut model);
    let r = &report.recovery[0];
    assert!(
        r.note.as_deref().unwrap().contains("cannot be overloaded"),
        "{r:?}"
    );
    assert!(r.plan.is_none() && r.recovery_ns.is_none());
}

#[test]
fn a_trial_is_named_apart_from_the_progress_beside_it() {
    // The run history names trials by what they were; the progress is for status lines.
    let mut model = Model::new(2e6, 2e6, 400_000.0);
    model.recovery_lag_ns = 100_000_000;
    let all = [
        Benchmark::Throughput,
        Benchmark::Latency,
        Benchmark::Loss,
        Benchmark::BackToBack,
        Benchmark::Recovery,
    ];
    run(&all, &mut model);
    let kinds = ["throughput", "latency", "loss", "back-to-back", "recovery"];
    for kind in kinds {
        assert!(
            model.labels.iter().any(|(what, _)| what.starts_with(kind)),
            "{kind}: {:?}",
            model.labels
        );
    }
    for (what, progress) in &model.labels {
        assert!(!what.contains("trials done"), "{what}");
        assert!(
            progress.contains("trials done, about"),
            "{what}: {progress}"
        );
    }
}

#[test]
fn a_stop_keeps_the_trials_done_and_says_so() {
    let mut model = Model::new(1_100_000.0, 1_100_000.0, 100_000.0);
    model.stop_after = Some(3);
    let r = request(&[]);
    let sizes = [size64(), size64()];
    let report = run_sizes(&r, &sizes, &mut model).unwrap();
    assert!(report.interrupted);
    assert_eq!(model.asked.len(), 3);
    let t = &report.throughput[0];
    assert_eq!(t.trials.len(), 3);
    assert!(t.trials[2].interrupted);
    assert!(!t.outcomes[0].resolved);
    assert_eq!(report.trials, 2, "the interrupted trial does not count");
    assert!(report.latency.is_empty() && report.loss.is_empty());
}

#[test]
fn a_spec_reads_as_json_with_defaults_and_names_what_is_wrong() {
    let spec: Rfc2544Spec = serde_json::from_str(
        r#"{"tests": ["loss", "throughput"], "sizes": ["64", "imix"], "trial": "2s",
            "pdr_pct": null}"#,
    )
    .unwrap();
    let r = spec.request("lab").unwrap();
    assert_eq!(r.tests, [Benchmark::Throughput, Benchmark::Loss]);
    assert_eq!(r.sizes, ["64", "imix"]);
    assert_eq!(
        (r.settings.trial_ns, r.settings.wait_ns),
        (2_000_000_000, 2_000_000_000)
    );
    assert_eq!(r.settings.tolerances, [0.0]);
    assert_eq!(r.settings.link_bps, 10e9);
    let all = Rfc2544Spec::default().request("lab").unwrap();
    assert_eq!(all.tests, Benchmark::ALL);
    assert_eq!(all.settings.tolerances, [0.0, 0.005]);
    assert_eq!(all.sizes.len(), 7);
    assert!(serde_json::from_str::<Rfc2544Spec>(r#"{"trials": 5}"#).is_err());
    let err = |spec: Rfc2544Spec| spec.request("lab").unwrap_err().to_string();
    let base = Rfc2544Spec::default;
    assert!(err(Rfc2544Spec {
        trial: "0s".into(),
        ..base()
    })
    .contains("trial `0s`"));
    assert!(err(Rfc2544Spec {
        resolution_pct: 0.0,
        ..base()
    })
    .contains("resolution 0"));
    assert!(err(Rfc2544Spec {
        link: "fast".into(),
        ..base()
    })
    .contains("link `fast`"));
    assert!(err(Rfc2544Spec {
        max_rate: Some("lots".into()),
        ..base()
    })
    .contains("max rate"));
    assert!(err(Rfc2544Spec {
        latency_loads_pct: vec![150.0],
        ..base()
    })
    .contains("latency load 150"));
}

#[test]
fn learning_frames_go_back_from_the_receive_port() {
    let mut r = request(&[]);
    r.flow.flow.src_mac = Some("02:00:00:00:00:01".into());
    r.flow.flow.dst_mac = Some("02:00:00:00:00:02".into());
    let l = SizedFlow::resolve(&r, "128").unwrap().learning.unwrap();
    assert_eq!(l.ports.len(), 1);
    assert_eq!(l.ports[0].location.to_string(), "null");
    assert_eq!(
        (
            field(&l, HeaderKind::Ipv4, "src"),
            field(&l, HeaderKind::Udp, "src_port"),
            field(&l, HeaderKind::Ipv4, "dst"),
            field(&l, HeaderKind::Udp, "dst_port")
        ),
        (v4("198.18.1.1"), 2000, v4("198.18.0.1"), 1000)
    );
    assert_eq!(field(&l, HeaderKind::Ethernet, "src"), 0x02_00_00_00_00_02);
    assert_eq!(l.flows[0].schedule.duration, Duration::Packets(16));
    assert!(l.flows[0].rx_ports.is_empty());
    // IPv6 addresses swap as well.
    r.flow.flow.udp = Some("[2001:2::1]:1-[2001:2::2]:2".into());
    let l = SizedFlow::resolve(&r, "128").unwrap().learning.unwrap();
    let v6 = |t: &str| u128::from(t.parse::<Ipv6Addr>().unwrap());
    assert_eq!(
        (
            field(&l, HeaderKind::Ipv6, "src"),
            field(&l, HeaderKind::Udp, "src_port"),
            field(&l, HeaderKind::Ipv6, "dst"),
            field(&l, HeaderKind::Udp, "dst_port")
        ),
        (v6("2001:2::2"), 2, v6("2001:2::1"), 1)
    );
    // A flow given as nonsense is refused naming it; one with no UDP to reverse, saying
    // what the learning frames need.
    r.flow.flow.udp = Some("nonsense".into());
    let err = SizedFlow::resolve(&r, "128").unwrap_err().to_string();
    assert!(err.contains("`nonsense`"), "{err}");
    r.flow.flow.udp = None;
    let err = SizedFlow::resolve(&r, "128").unwrap_err().to_string();
    assert!(
        err.contains("give it as SRC:PORT-DST:PORT (learning frames go back from DST to SRC)"),
        "{err}"
    );
    // No learning frames asked for: none built.
    r.flow.flow.udp = Some("198.18.0.1:1000-198.18.1.1:2000".into());
    r.settings.learning_frames = 0;
    assert!(SizedFlow::resolve(&r, "128").unwrap().learning.is_none());
}

#[test]
fn every_trial_is_one_csv_row() {
    let mut model = Model::new(1_000_000.0, 1_000_000.0, 650_000.0);
    let report = run(&[Benchmark::Throughput, Benchmark::Loss], &mut model);
    let csv = report.trials_csv();
    let rows = csv.lines().count() - 1;
    let trials = report.throughput[0].trials.len() + report.loss[0].points.len();
    assert_eq!(rows, trials);
    assert!(csv
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("throughput,64,,,1000000.000,"));
}

/// The CSV as it was written by hand before the `csv` crate wrote it: every trial's row
/// the same, byte for byte (no cell of a trial needs quoting).
#[test]
fn the_trials_csv_is_what_was_written_by_hand() {
    use std::fmt::Write as _;
    let mut model = Model::new(1_000_000.0, 1_000_000.0, 100_000.0);
    model.buffer_frames = 900;
    let report = run(
        &[
            Benchmark::Throughput,
            Benchmark::Latency,
            Benchmark::Loss,
            Benchmark::BackToBack,
        ],
        &mut model,
    );
    let mut out = String::from(
        "benchmark,size,load_pct,asked_pps,offered_pps,frames_tx,frames_rx,frames_lost,\
         loss_pct,reordered,duplicates,latency_min_ns,latency_mean_ns,latency_p50_ns,\
         latency_p99_ns,latency_p99_9_ns,latency_max_ns,interrupted\n",
    );
    let mut row = |t: &TrialResult, load: Option<f64>| {
        let cell = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_default();
        let [min, mean, p50, p99, p99_9, max] = latency_columns(t.latency).map(cell);
        let _ = writeln!(
            out,
            "{},{},{},{},{:.3},{},{},{},{:.6},{},{},{},{},{},{},{},{},{}",
            t.benchmark.name(),
            t.size,
            cell(load),
            t.asked_pps.map(|a| format!("{a:.3}")).unwrap_or_default(),
            t.offered_pps,
            t.frames_tx,
            t.frames_rx,
            t.frames_lost,
            t.loss_ratio * 100.0,
            t.reordered,
            t.duplicates,
            min,
            mean,
            p50,
            p99,
            p99_9,
            max,
            t.interrupted
        );
    };
    for t in report.throughput.iter().flat_map(|t| &t.trials) {
        row(t, None);
    }
    for p in report.latency.iter().flat_map(|l| &l.points) {
        for t in &p.trials {
            row(t, Some(p.load_pct));
        }
    }
    for p in report.loss.iter().flat_map(|c| &c.points) {
        row(&p.trial, Some(p.load_pct));
    }
    for t in report
        .back_to_back
        .iter()
        .flat_map(|b| b.searches.iter().flat_map(|s| &s.trials))
    {
        row(t, None);
    }
    assert!(!report.latency.is_empty() && !report.back_to_back.is_empty());
    assert_eq!(report.trials_csv(), out);
}

#[test]
fn the_time_left_counts_the_trials_a_search_takes() {
    // Before any size was searched: what searches take (a run of 3 sizes that took 9-10
    // trials each was once announced at 5 a size, 73 s for 145 s).
    assert_eq!(search_trials_per_size(&[], true), 10);
    assert_eq!(search_trials_per_size(&[], false), 6);
    // Then what the sizes searched so far took.
    assert_eq!(search_trials_per_size(&[9, 12], true), 11);
    assert_eq!(search_trials_per_size(&[3], false), 3);
    // Over a whole run (the model's searches take 5 trials a size, every trial 1 s): at the
    // start of each size after the first, the estimate is within a trial of the time that
    // really remained.
    let mut model = Model::new(1_100_000.0, 1_050_000.0, 104_166.0);
    let sizes: Vec<FrameSize> = ["64", "65", "66"]
        .iter()
        .map(|s| FrameSize {
            size: s.to_string(),
            ..size64()
        })
        .collect();
    let report = run_sizes(&request(&[Benchmark::Throughput]), &sizes, &mut model).unwrap();
    let total = model.labels.len();
    let mut k = 0;
    for t in &report.throughput {
        if k > 0 {
            let (what, progress) = &model.labels[k];
            let left = progress.split("about ").nth(1).unwrap();
            let said: f64 = left
                .strip_suffix(" s left")
                .map_or(0.0, |s| s.parse().unwrap());
            let actual = (total - k) as f64;
            assert!(
                (said - actual).abs() <= 1.0,
                "trial {k} ({what}): said {said} s, {actual} s were left"
            );
        }
        k += t.trials.len();
    }
}
