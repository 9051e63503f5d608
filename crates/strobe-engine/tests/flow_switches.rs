//! Stopping some flows of a run while the others go on: a stopped flow's schedule ends, its
//! port goes on with the rest, and a run whose flows are all stopped ends by itself.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use strobe_engine::live::FlowSwitches;
use strobe_engine::{run_scenario, RunOptions, RunReport};
use strobe_model::{load_scenario, NoFiles, Scenario};

fn continuous(names: &[&str]) -> Scenario {
    let mut text = "[[ports]]\nname = \"p\"\nlocation = \"null\"\n".to_string();
    for name in names {
        text.push_str(&format!(
            "[[flows]]\nname = \"{name}\"\ntx = \"p\"\nrate = \"20kpps\"\nsize = 64\n\
             [[flows.packet]]\nethernet = {{ src = \"02:00:00:00:00:01\", dst = \"02:00:00:00:00:02\" }}\n\
             [[flows.packet]]\nipv4 = {{ src = \"198.18.0.1\", dst = \"198.18.1.1\" }}\n\
             [[flows.packet]]\nudp = {{}}\n"
        ));
    }
    load_scenario(&text, "t.toml", &NoFiles).unwrap()
}

/// Runs `scenario`, stopping its flows one by one 300 ms apart; a watchdog stops the whole
/// run after 20 s, which the test then sees as `stopped_early`.
fn run_stopping(scenario: &Scenario, order: &[&str]) -> RunReport {
    let switches = Arc::new(FlowSwitches::new(
        scenario.flows.iter().map(|f| f.name.clone()),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let order: Vec<String> = order.iter().map(|s| s.to_string()).collect();
    let flipper = {
        let switches = switches.clone();
        std::thread::spawn(move || {
            for name in order {
                std::thread::sleep(Duration::from_millis(300));
                assert!(switches.stop(&name));
            }
        })
    };
    let watchdog = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            for _ in 0..200 {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            stop.store(true, Ordering::Relaxed);
        })
    };
    let opts = RunOptions {
        flow_switches: Some(switches),
        pin: false,
        ..RunOptions::default()
    };
    let report = run_scenario(scenario, &opts, stop.clone(), u64::MAX, &mut |_| {}).unwrap();
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    watchdog.join().unwrap();
    report
}

fn sent(report: &RunReport, name: &str) -> u64 {
    report.ports[0]
        .flows
        .iter()
        .filter(|f| f.name == name)
        .map(|f| f.frames)
        .sum()
}

#[test]
fn a_stopped_flow_ends_while_the_other_goes_on() {
    let report = run_stopping(&continuous(&["a", "b"]), &["a", "b"]);
    let port = &report.ports[0];
    assert!(!port.stopped_early, "the switches ended the run: {port:?}");
    let (a, b) = (sent(&report, "a"), sent(&report, "b"));
    // a ran ~300 ms at 20 kpps (~6000 frames), b ~600 ms: generous bounds.
    assert!((1_000..12_000).contains(&a), "a sent {a}");
    assert!(b as f64 > 1.4 * a as f64, "a sent {a}, b {b}");
}

#[test]
fn a_lone_flow_stopped_ends_its_run() {
    let report = run_stopping(&continuous(&["only"]), &["only"]);
    assert!(!report.ports[0].stopped_early, "{:?}", report.ports[0]);
    let n = sent(&report, "only");
    assert!((1_000..12_000).contains(&n), "sent {n}");
}
