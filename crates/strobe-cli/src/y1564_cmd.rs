//! `strobe y1564`: ITU-T Y.1564 service activation (the configuration test per service, then
//! the performance test of all services at once); the test itself is
//! `strobe_control::y1564`.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use clap::Args;
use strobe_control::text::{bps_text, duration_text};
use strobe_control::y1564::{
    run_y1564, step_label, Measured, ServiceSpec, Verdict, Y1564Report, Y1564Spec, Y1564Test,
};

use crate::failure::Failure;
use crate::methodology::{MethodOutputs, MethodPorts, Terminal};
use crate::signals;

#[derive(Args)]
pub struct Y1564Args {
    /// A service, as KEY=VALUE pairs separated by commas: name, udp (SRC:PORT-DST:PORT),
    /// size, cir, eir (bit rates, layer 1), flr (most frames lost, %), ftd (highest mean
    /// delay), fdv (highest delay variation). E.g.
    /// name=voice,udp=198.18.0.1:1000-198.18.1.1:2000,size=128,cir=10mbit,flr=0,ftd=5ms,fdv=1ms.
    /// Repeat for more services (each with its own UDP ports).
    #[arg(long = "service", value_name = "KEYS")]
    services: Vec<String>,
    /// Services from a JSON file: a list of objects with the fields name, udp, size, cir,
    /// eir, max_flr_pct, max_ftd, max_fdv.
    #[arg(long, value_name = "FILE")]
    services_file: Option<PathBuf>,
    #[command(flatten)]
    ports: MethodPorts,
    #[command(flatten)]
    history: crate::runs_cmd::HistoryArgs,
    /// Traffic time of each configuration step (Y.1564 suggests 60s).
    #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = crate::values::positive_text)]
    step: String,
    /// Configuration steps below the CIR, in percent of it.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        default_value = "25,50,75,100"
    )]
    steps: Vec<f64>,
    /// The policing step offers CIR + EIR + this share of the CIR, in percent.
    #[arg(long, default_value_t = 25.0, value_name = "PCT")]
    overshoot: f64,
    /// Traffic time of the performance test (Y.1564 suggests 15m and more).
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = crate::values::positive_text)]
    performance: String,
    /// Only the service configuration test.
    #[arg(long, conflicts_with = "performance_only")]
    configuration_only: bool,
    /// Only the service performance test.
    #[arg(long)]
    performance_only: bool,
    /// How long the receiver keeps counting after a step's last frame.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    wait: String,
    /// Pause between steps.
    #[arg(long, default_value = "500ms", value_name = "DURATION")]
    settle: String,
    /// An information rate passes when at least this close to what it should be, in %.
    #[arg(long, default_value_t = 2.0, value_name = "PCT")]
    ir_tolerance: f64,
    #[command(flatten)]
    outputs: MethodOutputs,
}

/// `name=voice,cir=10mbit,…` as a service.
fn parse_service(text: &str) -> Result<ServiceSpec, Failure> {
    let mut s = ServiceSpec::default();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(|| {
            Failure::BadInput(format!(
                "--service {text}: `{pair}` is not KEY=VALUE (keys: name, udp, size, cir, eir, \
                 flr, ftd, fdv)"
            ))
        })?;
        let value = value.trim().to_string();
        match key.trim() {
            "name" => s.name = value,
            "udp" => s.udp = value,
            "size" => s.size = value,
            "cir" => s.cir = value,
            "eir" => s.eir = value,
            "flr" => {
                s.max_flr_pct = value.trim_end_matches('%').parse().map_err(|_| {
                    Failure::BadInput(format!("--service {text}: flr `{value}` is not a number"))
                })?
            }
            "ftd" => s.max_ftd = value,
            "fdv" => s.max_fdv = value,
            other => {
                return Err(Failure::BadInput(format!(
                    "--service {text}: unknown key `{other}` (keys: name, udp, size, cir, eir, \
                     flr, ftd, fdv)"
                )))
            }
        }
    }
    Ok(s)
}

impl Y1564Args {
    fn spec(&self) -> Result<Y1564Spec, Failure> {
        let mut services = self
            .services
            .iter()
            .map(|s| parse_service(s))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(path) = &self.services_file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::BadInput(format!("--services-file {}: {e}", path.display()))
            })?;
            let more: Vec<ServiceSpec> = serde_json::from_str(&text).map_err(|e| {
                Failure::BadInput(format!("--services-file {}: {e}", path.display()))
            })?;
            services.extend(more);
        }
        Ok(Y1564Spec {
            tests: if self.configuration_only {
                vec![Y1564Test::Configuration]
            } else if self.performance_only {
                vec![Y1564Test::Performance]
            } else {
                Vec::new()
            },
            port: self.ports.port.clone(),
            rx: self.ports.rx.clone(),
            src_mac: self.ports.src_mac.clone(),
            dst_mac: self.ports.dst_mac.clone(),
            services,
            step: self.step.clone(),
            steps_pct: self.steps.clone(),
            overshoot_pct: self.overshoot,
            performance: self.performance.clone(),
            wait: self.wait.clone(),
            settle: self.settle.clone(),
            ir_tolerance_pct: self.ir_tolerance,
        })
    }
}

pub fn run(args: Y1564Args) -> Result<(), Failure> {
    args.outputs.check()?;
    let request = args.spec()?.request(&args.ports.lab)?;
    let mut recorder = args.history.recorder()?;
    let mut terminal = Terminal::new(&args.ports.lab, args.outputs.quiet);
    let signals = signals::install()?;
    let report = run_y1564(&request, &signals.stop, &mut terminal)?;
    let mut failures = args.outputs.write(
        &|| crate::outputs::document("y1564", &report),
        &|| report.csv(),
        &|| {
            strobe_control::analyze::rfc2544_plot::table_report(
                "strobe y1564",
                &report_notes(&report),
                &report_tables(&report),
            )
        },
    );
    let outcome = match crate::runs_cmd::outcome(signals.signal(), report.failure.as_slice()) {
        done if done == "completed" && report.pass => "completed: PASS".to_owned(),
        done if done == "completed" => "completed: FAIL".to_owned(),
        other => other,
    };
    terminal.record_and_print(&mut recorder, "y1564", &report, outcome, print_report);
    if let Some(f) = &report.failure {
        failures.note(Err(Failure::Runtime(format!("a step failed to run: {f}"))));
    } else if !report.pass && !signals.stop.load(Ordering::Relaxed) {
        let failed: Vec<&str> = report
            .services
            .iter()
            .filter(|s| {
                s.configuration_pass == Some(false)
                    || s.performance_verdict.as_ref().is_some_and(|v| !v.pass)
            })
            .map(|s| s.service.name.as_str())
            .collect();
        failures.note(Err(Failure::Verdict(format!(
            "Y.1564: FAIL for {}",
            failed.join(", ")
        ))));
    }
    failures.outcome(signals.outcome())
}

fn verdict_text(v: &Verdict) -> String {
    if v.pass {
        "PASS".into()
    } else {
        format!(
            "FAIL ({})",
            strobe_control::warning_texts(&v.failed).join("; ")
        )
    }
}

/// The cells of one measured row: offered, IR, FLR, FTD mean / max, FDV.
fn cells(m: &Measured) -> [String; 6] {
    let us = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1}", v / 1e3));
    [
        bps_text(m.offered_bps),
        bps_text(m.ir_bps),
        format!("{:.4} %", m.flr * 100.0),
        us(m.ftd.map(|l| l.mean_ns)),
        us(m.ftd.map(|l| l.max_ns)),
        us(m.fdv_ns),
    ]
}

const HEADER: [&str; 8] = [
    "step",
    "offered",
    "IR",
    "FLR",
    "FTD mean µs",
    "FTD max µs",
    "FDV µs",
    "verdict",
];

fn report_tables(r: &Y1564Report) -> Vec<strobe_control::analyze::rfc2544_plot::Table> {
    let mut tables = Vec::new();
    for s in &r.services {
        let mut rows: Vec<(Vec<String>, bool)> = s
            .configuration
            .iter()
            .map(|st| {
                let mut row = vec![step_label(st.step)];
                row.extend(cells(&st.measured));
                row.push(verdict_text(&st.verdict));
                (row, st.verdict.pass)
            })
            .collect();
        if let (Some(m), Some(v)) = (&s.performance, &s.performance_verdict) {
            let mut row = vec![format!("performance ({})", duration_text(r.performance_ns))];
            row.extend(cells(m));
            row.push(verdict_text(v));
            rows.push((row, v.pass));
        }
        let sv = &s.service;
        tables.push(strobe_control::analyze::rfc2544_plot::Table {
            title: format!(
                "service `{}`: {} B, CIR {}, EIR {}; accepts FLR ≤ {:.4} %, FTD ≤ {}, FDV ≤ {}",
                sv.name,
                sv.size,
                bps_text(sv.cir_bps),
                bps_text(sv.eir_bps),
                sv.max_flr * 100.0,
                duration_text(sv.max_ftd_ns),
                duration_text(sv.max_fdv_ns)
            ),
            header: HEADER.iter().map(|h| h.to_string()).collect(),
            rows,
        });
    }
    tables
}

fn report_notes(r: &Y1564Report) -> Vec<String> {
    vec![
        format!(
            "ITU-T Y.1564: {}; configuration steps of {}, performance test {}. Rates are \
             layer-1 bit rates; FTD is judged on the mean of every frame's delay, FDV is the \
             99.9th percentile of the delays less the minimum; IR tolerance {:.1} %.",
            overall_verdict(r),
            duration_text(r.step_ns),
            duration_text(r.performance_ns),
            r.ir_tolerance * 100.0
        ),
        format!("Ran for {}.", duration_text(r.elapsed_ns)),
    ]
}

fn print_report(r: &Y1564Report) {
    if let Some(d) = &r.device_under_test {
        println!("device under test: {}", d.described());
    }
    for t in report_tables(r) {
        println!("{}:", t.title);
        println!(
            "  {:<22} {:>16} {:>16} {:>10} {:>12} {:>12} {:>10}  {}",
            HEADER[0], HEADER[1], HEADER[2], HEADER[3], HEADER[4], HEADER[5], HEADER[6], HEADER[7]
        );
        for (row, _) in &t.rows {
            println!(
                "  {:<22} {:>16} {:>16} {:>10} {:>12} {:>12} {:>10}  {}",
                row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7]
            );
        }
    }
    println!("Y.1564: {}", overall_verdict(r));
}

/// The whole test's verdict, as the report's notes and its last line give it.
fn overall_verdict(r: &Y1564Report) -> &'static str {
    if r.pass {
        "PASS"
    } else if r.interrupted {
        "stopped before the end"
    } else {
        "FAIL"
    }
}
