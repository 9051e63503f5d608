//! Spreading one port's flows over several transmit workers (cores).
//!
//! A constant-rate flow stays whole on one worker: its gaps come from one clock and one
//! schedule, so they stay exact. A Poisson flow at rate λ is split into N independent
//! Poisson flows at λ/N with their own seeds: the superposition of independent Poisson
//! processes is a Poisson process at the summed rate, so the port still sends Poisson
//! traffic at λ. Each sub-flow carries its own flow id in the trailer (sequence numbers stay
//! per sub-flow, so the receiver counts loss and reordering exactly) and the results are
//! added back up under the original flow.

use strobe_model::FlowSpec;
use strobe_timing::{Duration, Pattern, Rate};

fn scaled(rate: Rate, n: u64) -> Rate {
    match rate {
        Rate::Pps(r) => Rate::Pps(r / n as f64),
        Rate::L1BitsPerSec(b) => Rate::L1BitsPerSec(b / n as f64),
    }
}

/// Splits `flows` (of one port) over `n` workers. `all_flows` is the number of flows in the
/// whole scenario; new sub-flow ids are taken from `next_id` upwards (and it is advanced).
/// Returns None when a sub-flow id would not fit in the trailer's 16 bits.
pub fn split(
    flows: &[FlowSpec],
    n: usize,
    next_id: &mut usize,
    parent: &mut Vec<u16>,
) -> Option<Vec<Vec<FlowSpec>>> {
    let n = n.max(1);
    let mut workers = vec![Vec::new(); n];
    let mut whole = 0usize;
    for f in flows {
        // A tagged flow stays whole: its tag positions follow its frame index.
        let splittable =
            n > 1 && matches!(f.schedule.pattern, Pattern::Poisson) && f.tag_ids.is_empty();
        if !splittable {
            workers[whole % n].push(f.clone());
            whole += 1;
            continue;
        }
        for (k, worker) in workers.iter_mut().enumerate() {
            let mut sub = f.clone();
            if k > 0 {
                sub.id = u16::try_from(*next_id).ok()?;
                *next_id += 1;
                parent.push(f.id);
            }
            let s = &mut sub.schedule;
            s.rate = scaled(s.rate, n as u64);
            if let Some(profile) = &mut s.profile {
                scale_profile(profile, n as u64);
            }
            // Independent processes: distinct seeds.
            s.seed = s
                .seed
                .wrapping_add((k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            if let Duration::Packets(p) = s.duration {
                let share = p / n as u64 + u64::from((k as u64) < p % n as u64);
                if share == 0 {
                    continue;
                }
                s.duration = Duration::Packets(share);
            }
            worker.push(sub);
        }
    }
    Some(workers)
}

fn scale_profile(profile: &mut strobe_timing::RateProfile, n: u64) {
    match profile {
        strobe_timing::RateProfile::Steps(steps) => {
            for step in steps {
                step.rate = scaled(step.rate, n);
            }
        }
        strobe_timing::RateProfile::Ramp { from, to, .. } => {
            *from = scaled(*from, n);
            *to = scaled(*to, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strobe_model::{load_scenario, NoFiles};

    fn flows() -> Vec<FlowSpec> {
        let flow = |name: &str, timing: &str| {
            format!(
                "[[flows]]\nname = \"{name}\"\ntx = \"p\"\nrate = \"90kpps\"\nduration = {{ fixed_packets = {{ packets = 1000 }} }}\ntiming = {{ pattern = \"{timing}\" }}\n[[flows.packet]]\nethernet = {{}}\n"
            )
        };
        let text = format!(
            "[[ports]]\nname = \"p\"\nlocation = \"null\"\n\n{}{}{}",
            flow("a", "cbr"),
            flow("b", "poisson"),
            flow("c", "cbr")
        );
        load_scenario(&text, "t.toml", &NoFiles).unwrap().flows
    }

    #[test]
    fn cbr_stays_whole_and_poisson_splits() {
        let f = flows();
        let mut next = f.len();
        let mut parent: Vec<u16> = (0..f.len() as u16).collect();
        let w = split(&f, 3, &mut next, &mut parent).unwrap();
        let names = |k: usize| {
            w[k].iter()
                .map(|x| (x.name.as_str(), x.id))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(0), vec![("a", 0), ("b", 1)]);
        assert_eq!(names(1), vec![("b", 3), ("c", 2)]);
        assert_eq!(names(2), vec![("b", 4)]);
        assert_eq!(parent, vec![0, 1, 2, 1, 1]);
        // The Poisson flow's rate and packet count are shared out exactly.
        let subs: Vec<&FlowSpec> = w.iter().flatten().filter(|x| x.name == "b").collect();
        let total: u64 = subs
            .iter()
            .map(|x| match x.schedule.duration {
                Duration::Packets(p) => p,
                _ => 0,
            })
            .sum();
        assert_eq!(total, 1000);
        for s in &subs {
            assert_eq!(s.schedule.rate, Rate::Pps(30_000.0));
        }
        let seeds: std::collections::HashSet<u64> = subs.iter().map(|x| x.schedule.seed).collect();
        assert_eq!(
            seeds.len(),
            3,
            "independent sub-processes need distinct seeds"
        );
        // CBR flows keep their full rate.
        assert_eq!(w[0][0].schedule.rate, Rate::Pps(90_000.0));
    }

    #[test]
    fn one_worker_changes_nothing() {
        let f = flows();
        let mut next = f.len();
        let mut parent: Vec<u16> = (0..f.len() as u16).collect();
        let w = split(&f, 1, &mut next, &mut parent).unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].len(), 3);
        assert_eq!(next, 3);
    }
}
