//! Fixtures, all beside this file:
//!
//! * `pmc_*.txt`: real answers of `pmc -u -b 0 -s SOCKET` to [`PMC_QUERIES`] (and, for
//!   `pmc_slave_brief.txt`, to `'GET TIME_STATUS_NP' 'GET PORT_DATA_SET'` only), captured
//!   on this project's machine by `tests/timesync_capture.sh` from linuxptp 3.1.1: a
//!   grandmaster with two ports and a slave over veth pairs, software timestamping, PTP over
//!   Ethernet. `pmc_listening.txt` is the slave's ptp4l 1 s after start,
//!   `pmc_uncalibrated.txt` when its port had chosen the master but its servo had not
//!   locked, `pmc_no_answer.txt` pmc against a socket nobody listens on (it prints only its
//!   `sending:` lines and exits 0).
//! * `chronyc_no_daemon.txt`: real `chronyc -c -n tracking` (chrony 4.3) with no chronyd
//!   running.
//! * `chrony_tracking_manpage.txt`: the example of `tracking` in chronyc(1) (chrony 4.3's
//!   man page, "tracking"; also on chrony-project.org's chronyc documentation), which shows
//!   the human form. No chronyd was started here (it would discipline the machine's clock),
//!   so `chrony_tracking_manpage.csv` is that same example in the form `chronyc -c` prints
//!   it, written out by chronyc's `print_report` rules for CSV: no DNS (the name is the
//!   address, CB00710F = 203.0.113.15), times as seconds since the epoch with 9 decimals,
//!   offsets signed ("0.000006523 seconds slow" is 0.000006523; "3.225 ppm slow" is
//!   -3.225), no units.

use std::cell::RefCell;
use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

const SLAVE: &str = include_str!("pmc_slave.txt");
const SLAVE_BRIEF: &str = include_str!("pmc_slave_brief.txt");
const GRANDMASTER: &str = include_str!("pmc_grandmaster.txt");
const UNCALIBRATED: &str = include_str!("pmc_uncalibrated.txt");
const LISTENING: &str = include_str!("pmc_listening.txt");
const NO_ANSWER: &str = include_str!("pmc_no_answer.txt");
const CHRONY_CSV: &str = include_str!("chrony_tracking_manpage.csv");
const CHRONY_HUMAN: &str = include_str!("chrony_tracking_manpage.txt");
const CHRONYC_NO_DAEMON: &str = include_str!("chronyc_no_daemon.txt");

const NOW: u64 = 1_795_885_565_500_000_000;

fn ptp_fields(sync: &ClockSync) -> (&str, i64, i64, &str, bool, u32, &str) {
    match &sync.source {
        SyncSource::Ptp {
            port_state,
            offset_from_master_ns,
            mean_path_delay_ns,
            gm_identity,
            gm_present,
            steps_removed,
            stamping_clock,
        } => (
            port_state,
            *offset_from_master_ns,
            *mean_path_delay_ns,
            gm_identity,
            *gm_present,
            *steps_removed,
            stamping_clock,
        ),
        other => panic!("not a PTP source: {other:?}"),
    }
}

#[test]
fn pmc_slave_answer_parses_every_data_set() {
    let state = parse_pmc(SLAVE).unwrap();
    assert_eq!(state.clock_identity.as_deref(), Some("76ef85.fffe.0d509d"));
    assert_eq!(state.master_offset_ns, Some(-1389));
    assert_eq!(state.ingress_time_ns, Some(1_795_885_565_414_634_789));
    assert_eq!(state.gm_present, Some(true));
    assert_eq!(state.gm_identity.as_deref(), Some("7ea2dc.fffe.2e8f3f"));
    assert_eq!(state.steps_removed, Some(1));
    assert_eq!(state.offset_from_master_ns, Some(-1389));
    assert_eq!(state.mean_path_delay_ns, Some(2342));
    assert_eq!(state.current_utc_offset_s, Some(37));
    assert_eq!(state.ptp_timescale, Some(false));
    assert_eq!(
        state.ports,
        vec![PtpPort {
            identity: "76ef85.fffe.0d509d-1".into(),
            state: "SLAVE".into(),
            delay_mechanism: Some(1),
            peer_mean_path_delay_ns: Some(0),
            timestamping: Some("SOFTWARE".into()),
            interface: Some("tsync17546b0".into()),
        }]
    );
}

#[test]
fn a_slave_with_software_stamps_is_bounded_by_offset_plus_path_delay() {
    let sync = ptp_sync(&parse_pmc(SLAVE).unwrap(), &Stamping::Software, NOW);
    let (state, offset, delay, gm, gm_present, steps, stamping) = ptp_fields(&sync);
    assert_eq!(
        (state, offset, delay, gm, gm_present, steps),
        ("SLAVE", -1389, 2342, "7ea2dc.fffe.2e8f3f", true, 1)
    );
    assert_eq!(stamping, "CLOCK_REALTIME (ptp4l software timestamping)");
    // |−1389| + 2342: the unknown asymmetry may put all of the round trip on one side.
    assert_eq!(sync.error_bound_ns, Some(1389 + 2342));
    assert_eq!(sync.checked_unix_ns, NOW);
    assert!(sync.detail.contains("SLAVE"), "{}", sync.detail);
    assert!(!sync.detail.contains('\n'));
}

#[test]
fn the_two_query_answer_has_no_path_delay_so_no_bound() {
    let state = parse_pmc(SLAVE_BRIEF).unwrap();
    assert_eq!(state.ports.len(), 1);
    assert_eq!(state.ports[0].state, "SLAVE");
    assert_eq!(state.ports[0].timestamping, None);
    assert_eq!(state.mean_path_delay_ns, None);
    // End-to-end delay mechanism: peerMeanPathDelay 0 says nothing about the path.
    let sync = ptp_sync(&state, &Stamping::Software, NOW);
    assert_eq!(ptp_fields(&sync).1, -1389, "offset from TIME_STATUS_NP");
    assert_eq!(sync.error_bound_ns, None);
    assert!(
        sync.detail.contains("no mean path delay"),
        "{}",
        sync.detail
    );
    // The same answer with the peer-to-peer mechanism carries the delay per port.
    let p2p = SLAVE_BRIEF
        .replace("delayMechanism          1", "delayMechanism          2")
        .replace("peerMeanPathDelay       0", "peerMeanPathDelay       1500");
    let sync = ptp_sync(&parse_pmc(&p2p).unwrap(), &Stamping::Software, NOW);
    assert_eq!(sync.error_bound_ns, Some(1389 + 1500));
}

#[test]
fn the_grandmaster_is_its_own_reference() {
    let state = parse_pmc(GRANDMASTER).unwrap();
    assert_eq!(state.clock_identity.as_deref(), Some("7ea2dc.fffe.2e8f3f"));
    assert_eq!(
        state
            .ports
            .iter()
            .map(|p| (
                p.identity.as_str(),
                p.state.as_str(),
                p.interface.as_deref()
            ))
            .collect::<Vec<_>>(),
        vec![
            ("7ea2dc.fffe.2e8f3f-1", "MASTER", Some("tsync17546a0")),
            ("7ea2dc.fffe.2e8f3f-2", "MASTER", Some("tsync17546a1")),
        ]
    );
    let sync = ptp_sync(&state, &Stamping::Software, NOW);
    let (port_state, offset, delay, gm, gm_present, steps, _) = ptp_fields(&sync);
    assert_eq!(
        (port_state, offset, delay, gm, gm_present, steps),
        ("MASTER", 0, 0, "7ea2dc.fffe.2e8f3f", false, 0)
    );
    assert_eq!(sync.error_bound_ns, Some(0));
    assert!(sync.detail.contains("grandmaster"), "{}", sync.detail);
}

#[test]
fn a_master_port_that_follows_another_grandmaster_is_not_bounded() {
    // A boundary clock whose upstream port lost its master (constructed from the real
    // answer): gmPresent true, only MASTER ports.
    let text = GRANDMASTER
        .replace(
            "gmPresent                  false",
            "gmPresent                  true",
        )
        .replace(
            "gmIdentity                 7ea2dc.fffe.2e8f3f",
            "gmIdentity                 aaaaaa.fffe.bbbbbb",
        );
    let sync = ptp_sync(&parse_pmc(&text).unwrap(), &Stamping::Software, NOW);
    assert_eq!(ptp_fields(&sync).0, "MASTER");
    assert_eq!(sync.error_bound_ns, None);
}

#[test]
fn ports_not_following_a_master_have_no_bound() {
    for (text, want) in [(UNCALIBRATED, "UNCALIBRATED"), (LISTENING, "LISTENING")] {
        let sync = ptp_sync(&parse_pmc(text).unwrap(), &Stamping::Software, NOW);
        assert_eq!(ptp_fields(&sync).0, want);
        assert_eq!(sync.error_bound_ns, None, "{want}");
        assert!(sync.detail.contains(want), "{}", sync.detail);
    }
    // A LISTENING clock is its own grandmaster too (gmPresent false), but serves nobody.
    let state = parse_pmc(LISTENING).unwrap();
    assert_eq!(state.gm_identity, state.clock_identity);
    for faulty in [
        "FAULTY",
        "PASSIVE",
        "DISABLED",
        "INITIALIZING",
        "PRE_MASTER",
    ] {
        let text = SLAVE.replace("SLAVE", faulty);
        let sync = ptp_sync(&parse_pmc(&text).unwrap(), &Stamping::Software, NOW);
        assert_eq!(ptp_fields(&sync).0, faulty);
        assert_eq!(sync.error_bound_ns, None, "{faulty}");
    }
}

#[test]
fn pmc_without_an_answer_is_an_error() {
    assert_eq!(parse_pmc(NO_ANSWER).unwrap_err(), "ptp4l did not answer");
    assert_eq!(parse_pmc("").unwrap_err(), "ptp4l did not answer");
    let err = parse_pmc("failed to open transport\n").unwrap_err();
    assert!(err.contains("failed to open transport"), "{err}");
    // Management errors are skipped, not taken for data.
    let err = parse_pmc(
        "sending: GET PORT_DATA_SET\n\t76ef85.fffe.0d509d-1 seq 0 RESPONSE MANAGEMENT_ERROR_STATUS PORT_DATA_SET\n\t\tERROR: NOT_SUPPORTED\n",
    )
    .unwrap_err();
    assert!(err.contains("no port state"), "{err}");
}

#[test]
fn stamping_clocks_are_named_and_phc2sys_adds_its_offset() {
    let state = parse_pmc(SLAVE).unwrap();
    let ptp = 1389 + 2342;
    let phc = Stamping::Phc(Some("/dev/ptp3".into()));
    let sync = ptp_sync(&state, &phc, NOW);
    assert_eq!(ptp_fields(&sync).6, "PHC /dev/ptp3");
    assert_eq!(sync.error_bound_ns, Some(ptp));

    let unknown = ptp_sync(&state, &Stamping::Unknown, NOW);
    assert_eq!(unknown.error_bound_ns, None);

    // A domain on the PTP timescale: the PHC runs TAI, phc2sys keeps CLOCK_REALTIME 37 s
    // behind it; what remains is phc2sys's error.
    let mut tai = state.clone();
    tai.ptp_timescale = Some(true);
    let phc2sys = |diff: i128, uncertainty: u64| Stamping::Phc2sys {
        phc: Some("/dev/ptp3".into()),
        realtime_minus_phc: Ok((diff, uncertainty)),
    };
    let sync = ptp_sync(&tai, &phc2sys(-37_000_000_000 + 120, 30), NOW);
    assert_eq!(ptp_fields(&sync).6, "CLOCK_REALTIME disciplined by phc2sys");
    assert_eq!(sync.error_bound_ns, Some(ptp + 120 + 30));
    // Without the PTP timescale phc2sys copies the PHC as it is.
    let sync = ptp_sync(&state, &phc2sys(-75, 30), NOW);
    assert_eq!(sync.error_bound_ns, Some(ptp + 75 + 30));
    // Seconds apart: phc2sys is not doing its job.
    let sync = ptp_sync(&state, &phc2sys(-37_000_000_000, 30), NOW);
    assert_eq!(sync.error_bound_ns, None);
    assert!(
        sync.detail.contains("not keeping them together"),
        "{}",
        sync.detail
    );
    let unreadable = Stamping::Phc2sys {
        phc: None,
        realtime_minus_phc: Err("the port's PHC is not known".into()),
    };
    assert_eq!(ptp_sync(&state, &unreadable, NOW).error_bound_ns, None);
}

#[test]
fn chrony_manpage_example_parses_and_gives_chronys_bound() {
    let t = parse_chrony_tracking(CHRONY_CSV).unwrap();
    assert_eq!(t.reference_id, "CB00710F");
    assert_eq!(t.reference_name, "203.0.113.15");
    assert_eq!(t.stratum, 3);
    assert_eq!(t.system_time_s, 0.000006523);
    assert_eq!(t.last_offset_s, -0.000006747);
    assert_eq!(t.root_delay_s, 0.013639022);
    assert_eq!(t.root_dispersion_s, 0.001100737);
    assert_eq!(t.update_interval_s, 64.2);
    assert_eq!(t.leap_status, "Normal");
    // The CSV is the man page's human example, field by field.
    for (label, value) in [
        ("Reference ID", "CB00710F"),
        ("Stratum", "3"),
        ("System time", "0.000006523 seconds slow"),
        ("Root delay", "0.013639022"),
        ("Root dispersion", "0.001100737"),
        ("Leap status", "Normal"),
    ] {
        assert!(
            CHRONY_HUMAN
                .lines()
                .any(|l| l.starts_with(label) && l.contains(value)),
            "{label}"
        );
    }
    let sync = chrony_sync(&t, NOW);
    assert_eq!(
        sync.source,
        SyncSource::Chrony {
            reference: "CB00710F (203.0.113.15)".into(),
            stratum: 3,
            // "slow of NTP time": the system clock is behind.
            system_offset_ns: -6523,
            root_delay_ns: 13_639_022,
            root_dispersion_ns: 1_100_737,
            leap_status: "Normal".into(),
        }
    );
    // |offset| + root delay/2 + root dispersion = 6523 + 6819511 + 1100737.
    assert_eq!(sync.error_bound_ns, Some(7_926_771));
}

#[test]
fn chrony_unsynchronised_or_local_has_no_bound() {
    // What chronyc -c prints before chronyd has a source (constructed by the same rules:
    // reference ID 0, no name, leap status "Not synchronised").
    let unsynced =
        "00000000,,0,0.000000000,0.000000000,0.000000000,0.000000000,0.000,0.000,0.000,1.000000000,1.000000000,0.0,Not synchronised\n";
    let t = parse_chrony_tracking(unsynced).unwrap();
    let sync = chrony_sync(&t, NOW);
    assert_eq!(sync.error_bound_ns, None);
    assert!(sync.detail.contains("not synchronised"), "{}", sync.detail);
    let local = CHRONY_CSV.replace("CB00710F,203.0.113.15", "7F7F0101,");
    let sync = chrony_sync(&parse_chrony_tracking(&local).unwrap(), NOW);
    assert_eq!(sync.error_bound_ns, None);
    assert!(sync.detail.contains("local"), "{}", sync.detail);
}

#[test]
fn chronyc_errors_and_bad_csv_are_errors() {
    let err = parse_chrony_tracking(CHRONYC_NO_DAEMON).unwrap_err();
    assert!(err.contains("506 Cannot talk to daemon"), "{err}");
    assert!(parse_chrony_tracking("").is_err());
    assert!(parse_chrony_tracking("a,b,c")
        .unwrap_err()
        .contains("3 fields"));
    let nan = CHRONY_CSV.replace("0.013639022", "nan");
    assert!(parse_chrony_tracking(&nan)
        .unwrap_err()
        .contains("root delay"));
    let huge = CHRONY_CSV.replace("0.000006523", "1e300");
    assert!(parse_chrony_tracking(&huge).is_err());
    // The human form is not what the probe asks for.
    assert!(parse_chrony_tracking(CHRONY_HUMAN).is_err());
}

#[test]
fn kernel_state_gives_maxerror_only_when_synchronised_by_a_daemon_that_writes_it() {
    // What adjtimex read on this project's machine, where no daemon runs.
    let here = KernelTimex {
        state: TIME_ERROR,
        status: STA_UNSYNC,
        max_error_us: 16_000_000,
        est_error_us: 16_000_000,
    };
    let sync = kernel_sync(&here, &[], NOW);
    assert_eq!(
        sync.source,
        SyncSource::KernelNtp {
            synchronized: false,
            max_error_ns: 16_000_000_000,
            est_error_ns: 16_000_000_000,
        }
    );
    assert_eq!(sync.error_bound_ns, None);
    // STA_PLL | STA_NANO, TIME_OK: ntpd or chronyd.
    let synced = KernelTimex {
        state: 0,
        status: 0x2001,
        max_error_us: 1500,
        est_error_us: 20,
    };
    let sync = kernel_sync(&synced, &[], NOW);
    assert_eq!(sync.error_bound_ns, Some(1_500_000));
    let sync = kernel_sync(&synced, &["systemd-timesyn".to_string()], NOW);
    assert_eq!(sync.error_bound_ns, None);
    assert!(sync.detail.contains("systemd-timesyn"), "{}", sync.detail);
    // Nonsense from the kernel does not wrap.
    let odd = KernelTimex {
        state: 0,
        status: 0,
        max_error_us: -5,
        est_error_us: i64::MAX,
    };
    assert_eq!(kernel_sync(&odd, &[], NOW).error_bound_ns, Some(0));
}

#[test]
fn reading_this_machines_kernel_state_works() {
    let t = read_adjtimex().expect("adjtimex with modes 0 is allowed to anyone");
    assert!((0..=5).contains(&t.state), "{t:?}");
    let sync = kernel_sync(&t, &[], NOW);
    assert!(matches!(sync.source, SyncSource::KernelNtp { .. }));
}

#[test]
fn json_is_tagged_by_kind_with_snake_case_fields() {
    let sync = ptp_sync(&parse_pmc(SLAVE).unwrap(), &Stamping::Software, NOW);
    let json = serde_json::to_value(&sync).unwrap();
    assert_eq!(json["source"]["kind"], "ptp");
    assert_eq!(json["source"]["port_state"], "SLAVE");
    assert_eq!(json["source"]["offset_from_master_ns"], -1389);
    assert_eq!(json["error_bound_ns"], 3731);
    assert_eq!(json["checked_unix_ns"], NOW);
    let back: ClockSync = serde_json::from_value(json).unwrap();
    assert_eq!(back, sync);
    for (source, kind) in [
        (SyncSource::Unknown, "unknown"),
        (
            SyncSource::KernelNtp {
                synchronized: true,
                max_error_ns: 1,
                est_error_ns: 2,
            },
            "kernel_ntp",
        ),
        (
            chrony_sync(&parse_chrony_tracking(CHRONY_CSV).unwrap(), NOW).source,
            "chrony",
        ),
    ] {
        let sync = ClockSync {
            source,
            error_bound_ns: None,
            detail: "x".into(),
            checked_unix_ns: 1,
        };
        let text = serde_json::to_string(&sync).unwrap();
        assert!(text.contains(&format!("\"kind\":\"{kind}\"")), "{text}");
        assert_eq!(serde_json::from_str::<ClockSync>(&text).unwrap(), sync);
    }
    let unknown = serde_json::to_value(SyncSource::Unknown).unwrap();
    assert_eq!(unknown, serde_json::json!({"kind": "unknown"}));
}

// --- the probe over a scripted host ---

#[derive(Default)]
struct FakeHost {
    outcomes: HashMap<&'static str, CommandOutcome>,
    existing: Vec<PathBuf>,
    timex: Option<KernelTimex>,
    running: Vec<&'static str>,
    phc: Option<String>,
    realtime_minus_phc: Option<(i128, u64)>,
    calls: RefCell<Vec<String>>,
}

fn exited(stdout: &str) -> CommandOutcome {
    CommandOutcome::Exited {
        success: true,
        stdout: stdout.into(),
        stderr: String::new(),
    }
}

impl Host for FakeHost {
    fn run(&self, program: &str, args: &[&str], _timeout: Duration) -> CommandOutcome {
        self.calls
            .borrow_mut()
            .push(format!("{program} {}", args.join("|")));
        self.outcomes
            .get(program)
            .cloned()
            .unwrap_or(CommandOutcome::NotFound)
    }
    fn exists(&self, path: &Path) -> bool {
        self.existing.iter().any(|p| p == path)
    }
    fn adjtimex(&self) -> Result<KernelTimex, String> {
        self.timex
            .ok_or_else(|| "Operation not permitted".to_string())
    }
    fn process_running(&self, comm: &str) -> bool {
        self.running.contains(&comm)
    }
    fn interface_phc(&self, _netns: Option<&str>, _iface: &str) -> Option<String> {
        self.phc.clone()
    }
    fn realtime_minus_phc(&self, _phc: &str) -> Result<(i128, u64), String> {
        self.realtime_minus_phc.ok_or_else(|| "no PHC".to_string())
    }
    fn now_unix_ns(&self) -> u64 {
        NOW
    }
}

fn unsynced_kernel() -> KernelTimex {
    KernelTimex {
        state: TIME_ERROR,
        status: STA_UNSYNC,
        max_error_us: 16_000_000,
        est_error_us: 16_000_000,
    }
}

fn options(socket: &str) -> ProbeOptions {
    ProbeOptions {
        pmc_socket: Some(PathBuf::from(socket)),
        netns: None,
        timeout: Duration::from_millis(300),
    }
}

#[test]
fn probe_asks_ptp4l_first_on_its_socket() {
    let host = FakeHost {
        outcomes: HashMap::from([("pmc", exited(SLAVE)), ("chronyc", exited(CHRONY_CSV))]),
        existing: vec![PathBuf::from("/tmp/x/ptp4l-b")],
        timex: Some(unsynced_kernel()),
        ..FakeHost::default()
    };
    let sync = probe_with(&host, &options("/tmp/x/ptp4l-b"));
    assert_eq!(ptp_fields(&sync).0, "SLAVE");
    assert_eq!(sync.error_bound_ns, Some(3731));
    assert_eq!(sync.checked_unix_ns, NOW);
    assert_eq!(
        host.calls.borrow().as_slice(),
        [format!(
            "pmc -u|-b|0|-s|/tmp/x/ptp4l-b|{}",
            PMC_QUERIES.join("|")
        )]
    );
}

#[test]
fn probe_falls_through_to_chrony_then_the_kernel() {
    // No ptp4l socket: chronyc answers.
    let host = FakeHost {
        outcomes: HashMap::from([("pmc", exited(SLAVE)), ("chronyc", exited(CHRONY_CSV))]),
        timex: Some(unsynced_kernel()),
        ..FakeHost::default()
    };
    let sync = probe_with(&host, &ProbeOptions::default());
    assert!(matches!(sync.source, SyncSource::Chrony { .. }), "{sync:?}");
    assert_eq!(sync.error_bound_ns, Some(7_926_771));
    assert!(
        sync.detail.contains("no ptp4l socket at /var/run/ptp4l"),
        "{}",
        sync.detail
    );
    assert_eq!(host.calls.borrow().as_slice(), ["chronyc -c|-n|tracking"]);

    // ptp4l does not answer, chronyd is not running (chronyc exits 1), no binaries at all:
    // the kernel's state, with what was tried in the detail.
    for (pmc, chronyc, said) in [
        (
            exited(NO_ANSWER),
            exited(CHRONYC_NO_DAEMON),
            "ptp4l did not answer",
        ),
        (
            CommandOutcome::TimedOut,
            CommandOutcome::Exited {
                success: false,
                stdout: CHRONYC_NO_DAEMON.into(),
                stderr: String::new(),
            },
            "pmc did not finish",
        ),
        (
            CommandOutcome::NotFound,
            CommandOutcome::NotFound,
            "pmc is not installed",
        ),
        (
            CommandOutcome::Failed("Permission denied".into()),
            CommandOutcome::NotFound,
            "Permission denied",
        ),
    ] {
        let host = FakeHost {
            outcomes: HashMap::from([("pmc", pmc), ("chronyc", chronyc)]),
            existing: vec![PathBuf::from("/var/run/ptp4l")],
            timex: Some(unsynced_kernel()),
            ..FakeHost::default()
        };
        let sync = probe_with(&host, &ProbeOptions::default());
        assert!(
            matches!(
                sync.source,
                SyncSource::KernelNtp {
                    synchronized: false,
                    ..
                }
            ),
            "{sync:?}"
        );
        assert_eq!(sync.error_bound_ns, None);
        assert!(sync.detail.contains(said), "{said}: {}", sync.detail);
        assert!(!sync.detail.contains('\n'), "{}", sync.detail);
    }
}

#[test]
fn probe_without_any_source_is_unknown() {
    let host = FakeHost::default();
    let sync = probe_with(&host, &ProbeOptions::default());
    assert_eq!(sync.source, SyncSource::Unknown);
    assert_eq!(sync.error_bound_ns, None);
    assert!(
        sync.detail.contains("chronyc is not installed"),
        "{}",
        sync.detail
    );
    assert!(
        sync.detail.contains("adjtimex: Operation not permitted"),
        "{}",
        sync.detail
    );
    // No socket configured: ptp4l is not asked at all.
    let none = ProbeOptions {
        pmc_socket: None,
        ..ProbeOptions::default()
    };
    let host = FakeHost::default();
    probe_with(&host, &none);
    assert_eq!(host.calls.borrow().as_slice(), ["chronyc -c|-n|tracking"]);
}

#[test]
fn probe_with_a_zero_maxerror_writer_running_withholds_the_kernel_bound() {
    let synced = KernelTimex {
        state: 0,
        status: 0x2001,
        max_error_us: 40,
        est_error_us: 0,
    };
    let host = FakeHost {
        timex: Some(synced),
        running: vec!["systemd-timesyn"],
        ..FakeHost::default()
    };
    assert_eq!(
        probe_with(&host, &ProbeOptions::default()).error_bound_ns,
        None
    );
    let host = FakeHost {
        timex: Some(synced),
        ..FakeHost::default()
    };
    assert_eq!(
        probe_with(&host, &ProbeOptions::default()).error_bound_ns,
        Some(40_000)
    );
}

#[test]
fn probe_finds_the_stamping_clock_of_hardware_timestamping() {
    let hardware = SLAVE
        .replace("SOFTWARE", "HARDWARE")
        .replace("ptpTimescale          0", "ptpTimescale          1");
    let base = || FakeHost {
        outcomes: HashMap::from([("pmc", exited(&hardware))]),
        existing: vec![PathBuf::from("/var/run/ptp4l")],
        phc: Some("/dev/ptp3".into()),
        ..FakeHost::default()
    };
    let sync = probe_with(&base(), &ProbeOptions::default());
    assert_eq!(ptp_fields(&sync).6, "PHC /dev/ptp3");
    assert_eq!(sync.error_bound_ns, Some(3731));

    let host = FakeHost {
        running: vec!["phc2sys"],
        realtime_minus_phc: Some((-37_000_000_000 - 200, 25)),
        ..base()
    };
    let sync = probe_with(&host, &ProbeOptions::default());
    assert_eq!(ptp_fields(&sync).6, "CLOCK_REALTIME disciplined by phc2sys");
    assert_eq!(sync.error_bound_ns, Some(3731 + 200 + 25));

    // phc2sys runs but the PHC cannot be read: no bound rather than a guess.
    let host = FakeHost {
        running: vec!["phc2sys"],
        ..base()
    };
    let sync = probe_with(&host, &ProbeOptions::default());
    assert_eq!(sync.error_bound_ns, None);
    assert!(
        sync.detail.contains("could not be compared"),
        "{}",
        sync.detail
    );
}

// --- the real command runner ---

#[test]
fn commands_run_time_out_and_may_be_missing() {
    assert_eq!(
        run_command("strobe-no-such-program", &[], Duration::from_secs(1)),
        CommandOutcome::NotFound
    );
    assert_eq!(
        run_command("/nonexistent/pmc", &[], Duration::from_secs(1)),
        CommandOutcome::NotFound
    );
    assert_eq!(
        run_command(
            "sh",
            &["-c", "echo out; echo err >&2; exit 3"],
            Duration::from_secs(5)
        ),
        CommandOutcome::Exited {
            success: false,
            stdout: "out\n".into(),
            stderr: "err\n".into(),
        }
    );
    let started = Instant::now();
    // exec: the shell becomes sleep, so the PID killed is the sleeping process.
    let outcome = run_command("sh", &["-c", "exec sleep 30"], Duration::from_millis(200));
    assert_eq!(outcome, CommandOutcome::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // A sleeping grandchild holding the pipes open does not hold the probe up either.
    let started = Instant::now();
    let outcome = run_command(
        "sh",
        &["-c", "sleep 3 & echo quick"],
        Duration::from_secs(2),
    );
    assert!(
        matches!(&outcome, CommandOutcome::Exited { success: true, .. }),
        "{outcome:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn find_program_looks_in_the_sbin_directories_too() {
    assert!(find_program("sh").is_some());
    assert_eq!(find_program("strobe-no-such-program"), None);
}

proptest! {
    #[test]
    fn parsers_never_panic_on_any_text(text in ".{0,400}") {
        let _ = parse_pmc(&text);
        let _ = parse_chrony_tracking(&text);
    }

    #[test]
    fn parsers_never_panic_on_near_misses(
        lines in proptest::collection::vec(
            prop_oneof![
                Just("\tabc.fffe.def-0 seq 0 RESPONSE MANAGEMENT TIME_STATUS_NP".to_string()),
                Just("\tabc.fffe.def-1 seq 1 RESPONSE MANAGEMENT PORT_DATA_SET".to_string()),
                Just("\tabc-0 seq 2 RESPONSE MANAGEMENT CURRENT_DATA_SET".to_string()),
                Just("\t- seq 3 RESPONSE MANAGEMENT PORT_PROPERTIES_NP".to_string()),
                Just("RESPONSE".to_string()),
                Just("seq RESPONSE MANAGEMENT".to_string()),
                "(master_offset|ingress_time|gmPresent|gmIdentity|stepsRemoved|offsetFromMaster|meanPathDelay|portState|portIdentity|peerMeanPathDelay|delayMechanism|currentUtcOffset|ptpTimescale|timestamping|interface) (-?[0-9]{0,25}(\\.[0-9]{0,3})?|-?inf|NaN|1e400|true|SLAVE|MASTER|.{0,5})",
                "[0-9A-F]{0,8},[^,]{0,6},[0-9-]{0,12},([0-9eE.+-]{0,12},){0,12}.{0,8}",
                ".{0,30}",
            ],
            0..24,
        )
    ) {
        let text = lines.join("\n");
        if let Ok(state) = parse_pmc(&text) {
            for stamping in [Stamping::Software, Stamping::Unknown, Stamping::Phc2sys {
                phc: None,
                realtime_minus_phc: Ok((i128::MIN / 2, u64::MAX)),
            }] {
                let sync = ptp_sync(&state, &stamping, 0);
                prop_assert!(!sync.detail.contains('\n'));
            }
        }
        if let Ok(t) = parse_chrony_tracking(&text) {
            let _ = chrony_sync(&t, 0);
        }
    }

    #[test]
    fn kernel_figures_never_panic(state in any::<i32>(), status in any::<i32>(), max in any::<i64>(), est in any::<i64>()) {
        let t = KernelTimex { state, status, max_error_us: max, est_error_us: est };
        let _ = kernel_sync(&t, &[], 0);
    }
}
