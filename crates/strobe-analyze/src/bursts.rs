//! Runs of back-to-back packets.

use serde::Serialize;

/// Bursts: maximal runs of at least two packets whose gaps are all at or
/// below `burst_gap_ns`.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct BurstStats {
    /// Threshold used: gaps at or below it count as back to back.
    pub burst_gap_ns: u64,
    /// `true` when `burst_gap_ns` came from the options rather than the default.
    pub burst_gap_from_options: bool,
    pub burst_count: u64,
    /// `None` when there are no bursts.
    pub mean_burst_len_packets: Option<f64>,
    /// 0 when there are no bursts.
    pub max_burst_len_packets: u64,
    pub packets_in_bursts: u64,
    /// `packets_in_bursts / packets`, 0..1.
    pub share_packets_in_bursts: f64,
}

impl BurstStats {
    /// Finds the bursts among `gaps` (gap `i` separates packets `i` and `i + 1`).
    pub fn find(gaps: &[u64], burst_gap_ns: u64, burst_gap_from_options: bool) -> Self {
        let mut burst_count = 0u64;
        let mut packets_in_bursts = 0u64;
        let mut max_burst_len = 0u64;
        let mut run = 1u64;
        let mut close_run = |run: u64| {
            if run >= 2 {
                burst_count += 1;
                packets_in_bursts += run;
                max_burst_len = max_burst_len.max(run);
            }
        };
        for &gap in gaps {
            if gap <= burst_gap_ns {
                run += 1;
            } else {
                close_run(run);
                run = 1;
            }
        }
        close_run(run);
        let packets = gaps.len() as u64 + 1;
        Self {
            burst_gap_ns,
            burst_gap_from_options,
            burst_count,
            mean_burst_len_packets: (burst_count > 0)
                .then(|| packets_in_bursts as f64 / burst_count as f64),
            max_burst_len_packets: max_burst_len,
            packets_in_bursts,
            share_packets_in_bursts: packets_in_bursts as f64 / packets as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_bursts_when_all_gaps_are_long() {
        let b = BurstStats::find(&[1000; 9], 100, false);
        assert_eq!(b.burst_count, 0);
        assert_eq!(b.mean_burst_len_packets, None);
        assert_eq!(b.max_burst_len_packets, 0);
        assert_eq!(b.share_packets_in_bursts, 0.0);
    }

    #[test]
    fn runs_at_the_edges_and_in_the_middle_are_found() {
        // Packets: [0 1 2] | 3 | [4 5] | [6 7 8 9]  (short gap = 10, long = 1000)
        let gaps = [10, 10, 1000, 1000, 10, 1000, 10, 10, 10];
        let b = BurstStats::find(&gaps, 10, true);
        assert_eq!(b.burst_count, 3);
        assert_eq!(b.packets_in_bursts, 9);
        assert_eq!(b.max_burst_len_packets, 4);
        assert_eq!(b.mean_burst_len_packets, Some(3.0));
        assert_eq!(b.share_packets_in_bursts, 0.9);
    }

    #[test]
    fn the_whole_capture_can_be_one_burst() {
        let b = BurstStats::find(&[0, 0, 0], 0, true);
        assert_eq!(b.burst_count, 1);
        assert_eq!(b.max_burst_len_packets, 4);
        assert_eq!(b.share_packets_in_bursts, 1.0);
    }
}
