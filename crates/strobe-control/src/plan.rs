//! A test plan: a scenario made ready to run, with every run option typed and checked.
//!
//! Every front end builds its scenario its own way (a scenario file, the one-flow options,
//! an OTG config) and then calls [`prepare`], which does what any run needs: `lab:` ports
//! resolved (their MACs filled in), MACs checked, pcap traces sized against their disk, the
//! options checked, and every warning collected into [`Plan::warnings`] for the front end
//! to show.

use strobe_engine::{LatePolicy, RunOptions};
use strobe_lab::Lab;
use strobe_model::Scenario;

use crate::floor_memory::{known_floors, FloorChoice, FloorMemory};
use crate::ports::{resolve_lab_ports, DEFAULT_LAB_PREFIX};
use crate::{pcap_space, ControlError};

pub use strobe_model::Pacing;

/// How to run a scenario (the command line's options, a server's settings).
#[derive(Clone, Debug)]
pub struct PlanOptions {
    /// Prefix of the lab that `lab:tx` / `lab:rx` ports refer to.
    pub lab_prefix: String,
    pub pacing: Pacing,
    /// Paced: most frames per hand-over; unpaced: frames per hand-over. None: the engine's.
    pub batch: Option<usize>,
    /// Where paced ports get their floor before the first frame (nothing is ever sent to
    /// measure it): remembered per location, learned while running, or given.
    pub floor: FloorChoice,
    pub late_policy: LatePolicy,
    pub late_tolerance_ns: u64,
    /// How long receivers keep counting after the last frame was sent.
    pub drain_ns: u64,
    /// Transmit workers per port (a port's own `cores` overrides it).
    pub tx_workers: usize,
    pub hardware_timestamps: bool,
    /// Latency from each frame's transmit stamp in AF_XDP TX metadata rather than its
    /// trailer's (see [`RunOptions::tx_metadata_stamps`]).
    pub tx_metadata_stamps: bool,
    pub rx_busy_poll: bool,
    pub run_tag: Option<u8>,
    pub seq_start: u32,
    /// False: no flow's latency is measured (frames keep their trailer for loss counting).
    pub measure_latency: bool,
    /// Keep each flow's latency per interval of this length too (interval logs).
    pub latency_interval_ns: Option<u64>,
    /// Show those intervals live ([`crate::RunHandle::latency_intervals`]) instead of
    /// keeping them in the report (a server's runs: no end to bound their number).
    pub live_latency: bool,
    /// Write every frame in the engine, even where the backend could generate the flow
    /// itself (`xdp-live`'s kernel program).
    pub engine_frames: bool,
    /// Ports counted in the kernel (`xdp-count:`) pass the frames they counted on to the
    /// stack rather than drop them (a capture on the port needs them).
    pub pass_counted: bool,
    /// Start sending when this gate is opened, at the time it is given (a multi-host run's
    /// synchronized start; see [`strobe_engine::StartGate`]).
    pub start_gate: Option<std::sync::Arc<strobe_engine::StartGate>>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        let engine = RunOptions::default();
        PlanOptions {
            lab_prefix: DEFAULT_LAB_PREFIX.to_string(),
            pacing: Pacing::Scheduled,
            batch: None,
            floor: FloorChoice::default(),
            late_policy: engine.late_policy,
            late_tolerance_ns: engine.late_tolerance_ns,
            drain_ns: engine.drain_ns,
            tx_workers: engine.tx_workers,
            hardware_timestamps: false,
            tx_metadata_stamps: false,
            rx_busy_poll: false,
            run_tag: None,
            seq_start: 0,
            measure_latency: true,
            latency_interval_ns: None,
            live_latency: false,
            engine_frames: engine.engine_frames,
            pass_counted: engine.pass_counted,
            start_gate: None,
        }
    }
}

/// A scenario ready to run, and how.
#[derive(Clone, Debug)]
pub struct Plan {
    pub scenario: Scenario,
    pub options: RunOptions,
    pub pacing: Pacing,
    /// The scenario's warnings and the plan's own, for the front end to show.
    pub warnings: Vec<strobe_model::Warning>,
    /// The lab the scenario's `lab:` ports were resolved on, if any.
    pub lab: Option<Lab>,
}

/// Makes `scenario` ready to run as `options` say, or says what is wrong with it.
pub fn prepare(mut scenario: Scenario, options: &PlanOptions) -> Result<Plan, ControlError> {
    let bad = |m: String| Err(ControlError::BadInput(m));
    if options.batch == Some(0) {
        return bad("the batch must be at least 1 frame (--batch)".into());
    }
    if options.run_tag == Some(strobe_wire::trailer::LEGACY_TAG) {
        return bad(format!(
            "run tag {} (--run-tag): that is the tag of strobe versions before run tags, whose frames must \
             read as another run's; choose any other value from 0 to 255",
            strobe_wire::trailer::LEGACY_TAG
        ));
    }
    // Locations were parsed where they were read; `lab:` ends are resolved here, so the
    // engine takes only places it opens.
    let lab = resolve_lab_ports(&mut scenario, &options.lab_prefix)?;
    let mac_warnings = strobe_model::check_macs(&scenario).map_err(ControlError::BadInput)?;
    scenario.warnings.extend(mac_warnings);
    // The options can make a run unpaced; a scenario file can ask for it too.
    let pacing = match options.pacing {
        Pacing::Scheduled => scenario.pacing,
        unpaced => unpaced,
    };
    scenario.pacing = pacing;
    let time_limit_ns = match pacing {
        Pacing::Unpaced { time_limit_ns } => time_limit_ns,
        Pacing::Scheduled => None,
    };
    if time_limit_ns.is_some()
        && scenario
            .ports
            .iter()
            .any(|p| p.location.pcap_file().is_some())
    {
        // A trace is written in scheduled time, as fast as the disk takes it: a real-time
        // limit says nothing about its size.
        return bad(
            "an unpaced run with a time limit on a pcap: port (--rate max with --duration): a \
             trace is written as fast as the disk takes it, so a time limit does not bound its \
             size; give a frame count instead (--count N)"
                .into(),
        );
    }
    pcap_space::check(&scenario)?;
    if !options.measure_latency {
        for f in &mut scenario.flows {
            f.metrics.latency = None;
        }
    }
    let mut warnings = scenario.warnings.clone();
    for f in &scenario.flows {
        if let strobe_timing::Duration::Bursts { bursts, .. } = f.schedule.duration {
            if bursts > strobe_engine::rx::MAX_TRACKED_TRAINS && !f.rx_ports.is_empty() {
                warnings.push(strobe_model::Warning::TrainsNotFollowed {
                    flow: f.name.clone(),
                    trains: bursts,
                    followed: strobe_engine::rx::MAX_TRACKED_TRAINS,
                });
            }
        }
    }
    if let Some(warning) = strobe_engine::oversubscription(&scenario, options.tx_workers) {
        warnings.push(warning);
    }
    let run_options = RunOptions {
        batch: options.batch,
        floors: known_floors(
            options.floor,
            &scenario
                .ports
                .iter()
                .map(|p| (p.name.clone(), p.location.to_string()))
                .collect::<Vec<_>>(),
            &FloorMemory::open(),
        ),
        late_policy: options.late_policy,
        late_tolerance_ns: options.late_tolerance_ns,
        unpaced: matches!(pacing, Pacing::Unpaced { .. }),
        time_limit_ns,
        drain_ns: options.drain_ns,
        tx_workers: options.tx_workers.max(1),
        hardware_timestamps: options.hardware_timestamps,
        tx_metadata_stamps: options.tx_metadata_stamps,
        rx_busy_poll: options.rx_busy_poll,
        run_tag: options.run_tag,
        seq_start: options.seq_start,
        latency_interval_ns: options.latency_interval_ns,
        live_latency_intervals: options.live_latency,
        engine_frames: options.engine_frames,
        pass_counted: options.pass_counted,
        start_gate: options.start_gate.clone(),
        ..RunOptions::default()
    };
    Ok(Plan {
        scenario,
        options: run_options,
        pacing,
        warnings,
        lab,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use strobe_model::{load_scenario, Location, NoFiles, PortLocation};

    fn scenario(location: &str) -> Scenario {
        let text = format!(
            "[[ports]]\nname = \"p\"\nlocation = \"{location}\"\n[[flows]]\nname = \"f\"\ntx = \"p\"\n\
             duration = 10\n[[flows.packet]]\nethernet = {{ src = \"02:00:00:00:00:01\", dst = \"02:00:00:00:00:02\" }}\n\
             [[flows.packet]]\nipv4 = {{ src = \"198.18.0.1\", dst = \"198.18.1.1\" }}\n"
        );
        load_scenario(&text, "t.toml", &NoFiles).unwrap()
    }

    #[test]
    fn options_become_the_engines() {
        let plan = prepare(
            scenario("null"),
            &PlanOptions {
                pacing: Pacing::Unpaced {
                    time_limit_ns: Some(5),
                },
                batch: Some(7),
                measure_latency: false,
                ..PlanOptions::default()
            },
        )
        .unwrap();
        assert!(plan.options.unpaced);
        assert_eq!(
            plan.scenario.ports[0].location,
            PortLocation::Direct(Location::Null)
        );
        assert_eq!(plan.options.time_limit_ns, Some(5));
        assert_eq!(plan.options.batch, Some(7));
        assert!(plan
            .scenario
            .flows
            .iter()
            .all(|f| f.metrics.latency.is_none()));
        assert!(plan.lab.is_none());
    }

    #[test]
    fn a_location_that_does_not_parse_is_refused_where_it_is_read() {
        let text = "[[ports]]\nname = \"p\"\nlocation = \"carrier-pigeon:coop\"\n";
        let err = load_scenario(text, "t.toml", &NoFiles)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "t.toml:3:12: ports[0].location: unknown port `carrier-pigeon:coop`: accepted forms"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_scenario_file_can_ask_for_an_unpaced_run() {
        let mut unpaced = scenario("null");
        unpaced.pacing = Pacing::Unpaced {
            time_limit_ns: Some(9),
        };
        let plan = prepare(unpaced, &PlanOptions::default()).unwrap();
        assert!(plan.options.unpaced);
        assert_eq!(plan.options.time_limit_ns, Some(9));
        assert_eq!(
            plan.pacing,
            Pacing::Unpaced {
                time_limit_ns: Some(9)
            }
        );
        // The options' unpaced choice wins over a scheduled file.
        let plan = prepare(
            scenario("null"),
            &PlanOptions {
                pacing: Pacing::Unpaced {
                    time_limit_ns: None,
                },
                ..PlanOptions::default()
            },
        )
        .unwrap();
        assert!(plan.options.unpaced);
        assert!(
            !prepare(scenario("null"), &PlanOptions::default())
                .unwrap()
                .options
                .unpaced
        );
    }

    #[test]
    fn bad_options_are_refused_with_what_to_change() {
        let refused = |options: PlanOptions, location: &str, needle: &str| match prepare(
            scenario(location),
            &options,
        ) {
            Err(ControlError::BadInput(m)) => assert!(m.contains(needle), "{m}"),
            other => panic!("{other:?}"),
        };
        refused(
            PlanOptions {
                batch: Some(0),
                ..PlanOptions::default()
            },
            "null",
            "at least 1",
        );
        refused(
            PlanOptions {
                run_tag: Some(strobe_wire::trailer::LEGACY_TAG),
                ..PlanOptions::default()
            },
            "null",
            "any other value",
        );
        refused(
            PlanOptions {
                pacing: Pacing::Unpaced {
                    time_limit_ns: Some(1),
                },
                ..PlanOptions::default()
            },
            "pcap:/tmp/never-written.pcap",
            "--count",
        );
        refused(
            PlanOptions {
                lab_prefix: "nolabhere".into(),
                ..PlanOptions::default()
            },
            "lab:tx",
            "strobe lab up --prefix nolabhere",
        );
    }
}
