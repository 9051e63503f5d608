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

/// Keeps the calling thread off some cores until dropped, then restores its affinity: the
/// watching main thread wakes every few ms, and each wake-up on a paced transmitter's core
/// is a stall (a timer interrupt and two context switches) in the middle of its schedule.
pub struct KeepOff {
    previous: Option<libc::cpu_set_t>,
}

impl KeepOff {
    /// Moves the calling thread to the allowed cores not in `busy`; does nothing when every
    /// allowed core is busy (the thread then shares, as before).
    pub fn cores(busy: &[usize]) -> KeepOff {
        let free: Vec<usize> = allowed_cores()
            .into_iter()
            .filter(|c| !busy.contains(c))
            .collect();
        if busy.is_empty() || free.is_empty() {
            return KeepOff { previous: None };
        }
        // SAFETY: cpu_set_t is plain data; pid 0 is the calling thread.
        unsafe {
            let mut previous: libc::cpu_set_t = std::mem::zeroed();
            let size = std::mem::size_of::<libc::cpu_set_t>();
            if libc::sched_getaffinity(0, size, &mut previous) != 0 {
                return KeepOff { previous: None };
            }
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in &free {
                libc::CPU_SET(c, &mut set);
            }
            if libc::sched_setaffinity(0, size, &set) != 0 {
                return KeepOff { previous: None };
            }
            KeepOff {
                previous: Some(previous),
            }
        }
    }
}

impl Drop for KeepOff {
    fn drop(&mut self) {
        if let Some(previous) = &self.previous {
            // SAFETY: as above; restoring a mask the kernel accepted before.
            unsafe {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), previous);
            }
        }
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
    fn keep_off_moves_the_thread_and_restores_it() {
        // Runs on a fresh thread so the test harness's own affinity is never touched.
        std::thread::spawn(|| {
            let before = allowed_cores();
            {
                let _guard = KeepOff::cores(&before[..1]);
                let during = allowed_cores();
                if before.len() > 1 {
                    assert_eq!(during, before[1..]);
                } else {
                    assert_eq!(during, before, "a lone core is shared, not left");
                }
            }
            assert_eq!(allowed_cores(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn this_process_has_cores() {
        assert!(!allowed_cores().is_empty());
    }
}
