//! Where a scenario comes from, besides an OTG config: a scenario file (with the files it
//! refers to read relative to it), or the one-flow options (`--port --udp --rate …`) — with
//! what those imply made explicit here: `--rate max` is an unpaced run (a typed [`Pacing`],
//! not a magic rate), a `lab:` port's frames go from its endpoint's MAC to its next hop, and
//! a receive port counts the flow.

use std::path::{Path, PathBuf};

use strobe_model::{quick, PortLocation, PortSpec, Resources, Scenario};

use crate::plan::Pacing;
use crate::ports::lab_up_command;
use crate::ControlError;

/// Reads files a scenario refers to, relative to the scenario's folder.
pub struct FileResources {
    base: PathBuf,
}

impl FileResources {
    /// Resolves paths against the current directory (command-line flows).
    pub fn cwd() -> Self {
        FileResources {
            base: PathBuf::from("."),
        }
    }

    fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base.join(p)
        }
    }
}

impl Resources for FileResources {
    fn read_text(&self, path: &str) -> Result<String, String> {
        let full = self.resolve(path);
        std::fs::read_to_string(&full).map_err(|e| format!("cannot read {}: {e}", full.display()))
    }

    fn read_capture_timestamps(&self, path: &str) -> Result<Vec<u64>, String> {
        let full = self.resolve(path);
        let mut ts = Vec::new();
        strobe_io::read_capture(&full.to_string_lossy(), false, |f| ts.push(f.ts_ns))
            .map_err(|e| e.to_string())?;
        Ok(ts)
    }
}

/// Reads a scenario file (TOML, YAML or JSON by its extension).
pub fn scenario_file(path: &Path) -> Result<Scenario, ControlError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ControlError::BadInput(format!("cannot read scenario {}: {e}", path.display()))
    })?;
    let res = FileResources {
        base: path.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    strobe_model::load_scenario(&text, &path.to_string_lossy(), &res)
        .map_err(|e| ControlError::BadInput(e.to_string()))
}

/// The rate an unpaced run's schedule asks for, in frames per second: far above any
/// reachable rate, so that no deadline holds a frame back.
pub(crate) const UNPACED_PPS: f64 = 1e12;

/// The lab endpoint a `lab:` port opens on (`lab:rx…` the receive side, any other the
/// transmit side), whose MACs its frames carry unless given; None for other ports.
pub(crate) fn lab_endpoint(
    port: &str,
    lab_prefix: &str,
) -> Result<Option<strobe_lab::Endpoint>, ControlError> {
    let Some(side) = port.strip_prefix("lab:") else {
        return Ok(None);
    };
    let lab = strobe_lab::status(lab_prefix)?.ok_or_else(|| {
        ControlError::BadInput(format!(
            "--port {port}: no lab `{lab_prefix}` is up: run `{}` first",
            lab_up_command(lab_prefix)
        ))
    })?;
    Ok(Some(if side.starts_with("rx") {
        lab.rx
    } else {
        lab.tx
    }))
}

/// The one-flow options: a flow as the command line describes it, and where it is received.
#[derive(Clone, Debug, Default)]
pub struct OneFlow {
    /// The flow; its rate may be `max` (unpaced).
    pub flow: quick::QuickArgs,
    /// A port that receives the flow and counts it.
    pub rx: Option<String>,
}

impl OneFlow {
    /// Whether the rate asks for an unpaced run.
    pub fn is_max_rate(&self) -> bool {
        self.flow.rate.trim().eq_ignore_ascii_case("max")
    }

    /// The scenario, and how it is paced: `unpaced` (or a `max` rate) sends as fast as the
    /// engine goes, with the flow's duration as a real-time limit.
    pub fn scenario(
        &self,
        lab_prefix: &str,
        unpaced: bool,
    ) -> Result<(Scenario, Pacing), ControlError> {
        let mut q = self.flow.clone();
        if let Some(e) = lab_endpoint(&q.port, lab_prefix)? {
            let hex = |m: [u8; 6]| {
                m.iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(":")
            };
            q.src_mac.get_or_insert_with(|| hex(e.mac));
            q.dst_mac.get_or_insert_with(|| hex(e.next_hop_mac));
        }
        let pacing = if self.is_max_rate() {
            // A schedule far above any reachable rate, deadlines ignored, and a real-time
            // limit instead of a scheduled duration.
            q.unbounded = true;
            q.rate = UNPACED_PPS.to_string();
            let time_limit_ns = q
                .duration
                .take()
                .map(|d| {
                    strobe_timing::parse_duration_ns(&d)
                        .map_err(|e| ControlError::BadInput(format!("--duration {d}: {e}")))
                })
                .transpose()?;
            Pacing::Unpaced { time_limit_ns }
        } else if unpaced {
            Pacing::Unpaced {
                time_limit_ns: None,
            }
        } else {
            Pacing::Scheduled
        };
        let mut scenario = quick::build(&q, &FileResources::cwd())
            .map_err(|e| ControlError::BadInput(e.to_string()))?;
        if let Some(rx) = &self.rx {
            let speed_bps = scenario
                .ports
                .first()
                .map_or(10_000_000_000, |p| p.speed_bps);
            let location = PortLocation::parse(rx)
                .map_err(|e| ControlError::BadInput(format!("port `rx` (--rx): {e}")))?;
            scenario.ports.push(PortSpec {
                name: "rx".into(),
                location,
                speed_bps,
                cores: None,
            });
            for f in &mut scenario.flows {
                f.rx_ports = vec!["rx".into()];
            }
        }
        Ok((scenario, pacing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(rate: &str, duration: Option<&str>) -> OneFlow {
        OneFlow {
            flow: quick::QuickArgs {
                port: "null".into(),
                udp: Some("198.18.0.1:1000-198.18.1.1:2000".into()),
                rate: rate.into(),
                duration: duration.map(Into::into),
                ..Default::default()
            },
            rx: None,
        }
    }

    #[test]
    fn max_rate_is_an_unpaced_run_limited_by_its_duration() {
        let (s, pacing) = flow("MAX", Some("2s")).scenario("strobe", false).unwrap();
        assert_eq!(
            pacing,
            Pacing::Unpaced {
                time_limit_ns: Some(2_000_000_000)
            }
        );
        assert_eq!(s.flows.len(), 1);
        let (_, pacing) = flow("10kpps", None).scenario("strobe", false).unwrap();
        assert_eq!(pacing, Pacing::Scheduled);
        let (_, pacing) = flow("10kpps", None).scenario("strobe", true).unwrap();
        assert_eq!(
            pacing,
            Pacing::Unpaced {
                time_limit_ns: None
            }
        );
        let err = flow("max", Some("soon"))
            .scenario("strobe", false)
            .unwrap_err();
        assert!(err.to_string().contains("--duration soon"), "{err}");
    }

    #[test]
    fn a_receive_port_counts_the_flow() {
        let mut f = flow("1000", None);
        f.rx = Some("null".into());
        let (s, _) = f.scenario("strobe", false).unwrap();
        assert_eq!(s.ports.len(), 2);
        assert_eq!(s.flows[0].rx_ports, vec!["rx".to_string()]);
    }

    #[test]
    fn a_missing_lab_is_named_with_the_command_that_builds_it() {
        let mut f = flow("1000", None);
        f.flow.port = "lab:tx".into();
        let err = f.scenario("stx-nolab", false).unwrap_err();
        assert!(
            err.to_string().contains("no lab `stx-nolab` is up"),
            "{err}"
        );
    }
}
