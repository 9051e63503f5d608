//! Pinning workers to cores, so a transmitter and a receiver never wait for each other's
//! time slice on a shared core (on a small machine that costs a whole scheduler tick).

/// Cores this process may run on, in ascending order.
pub fn allowed_cores() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins the calling thread to `core`. Returns false when the kernel refuses (the worker
/// then runs unpinned, which is correct, only less precise).
pub fn pin_current_thread(core: usize) -> bool {
    // SAFETY: as above; pid 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Which core each worker gets: transmitters from the highest core down, receivers from
/// the lowest up (core 0 also carries the main thread, which mostly sleeps). None when
/// there are more workers than cores: sharing is then unavoidable and left to the kernel.
pub fn plan(
    cores: &[usize],
    tx_workers: usize,
    rx_workers: usize,
) -> Option<(Vec<usize>, Vec<usize>)> {
    if tx_workers + rx_workers > cores.len() || cores.is_empty() {
        return None;
    }
    let tx = cores.iter().rev().take(tx_workers).copied().collect();
    let rx = cores.iter().take(rx_workers).copied().collect();
    Some((tx, rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_distinct_cores() {
        assert_eq!(plan(&[0, 1], 1, 1), Some((vec![1], vec![0])));
        assert_eq!(plan(&[0, 1, 2, 3], 2, 1), Some((vec![3, 2], vec![0])));
        assert_eq!(plan(&[0, 1], 2, 1), None);
        assert_eq!(plan(&[4, 5], 1, 0), Some((vec![5], vec![])));
    }

    #[test]
    fn this_process_has_cores() {
        assert!(!allowed_cores().is_empty());
    }
}
