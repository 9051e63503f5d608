//! An XDP forwarder between two interfaces: every frame that arrives on one leaves on the
//! other, redirected in the driver through a DEVMAP (`bpf_redirect_map`) before any socket
//! buffer exists: the kernel's fast path, as the lab's `xdp` DUT.
//!
//! Two five-instruction programs share one DEVMAP of two entries: the program for side 0
//! redirects to entry 0 (side 1's interface), the one for side 1 to entry 1 (side 0's). A
//! redirect that fails drops the frame (`XDP_DROP` as the lookup's fallback action), where
//! the kernel counts it (the receiving interface's XDP drop counters).
//!
//! Loading only: the caller attaches the programs (the lab does it over netlink, so they
//! stay attached after strobe exits and go with the interfaces).

use std::os::fd::{AsRawFd, OwnedFd};

use crate::afxdp::bpf::{
    create_map, load_program, update_map, Insn, ALU64_MOV_K, BPF_FUNC_REDIRECT_MAP,
    BPF_MAP_TYPE_DEVMAP, BPF_PSEUDO_MAP_FD, JMP_CALL, JMP_EXIT, LD_IMM_DW, XDP_DROP,
};
use crate::IoError;

/// The forwarder's programs for each side, and the map they share (which stays alive as
/// long as a program refers to it, attached or not).
pub struct Forwarder {
    /// `programs[i]` goes on side `i` and sends its frames out of the other side.
    pub programs: [OwnedFd; 2],
    _map: OwnedFd,
}

/// r1 = &map; r2 = `entry`; r3 = XDP_DROP; return bpf_redirect_map(r1, r2, r3).
fn program(map_fd: i32, entry: i32) -> [Insn; 6] {
    [
        // A 64-bit immediate takes two slots; the loader swaps the map fd for the map.
        Insn::new(LD_IMM_DW, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        Insn::new(0, 0, 0, 0, 0),
        Insn::new(ALU64_MOV_K, 2, 0, 0, entry),
        Insn::new(ALU64_MOV_K, 3, 0, 0, XDP_DROP),
        Insn::new(JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        Insn::new(JMP_EXIT, 0, 0, 0, 0),
    ]
}

/// Loads the forwarder between the interfaces of `ifindexes` (in the calling thread's
/// network namespace, where the DEVMAP resolves them).
pub fn load(ifindexes: [u32; 2]) -> Result<Forwarder, IoError> {
    let kernel = |what: &str, e: std::io::Error| {
        IoError::Other(format!("cannot {what} for the XDP forwarder: {e}"))
    };
    let map = create_map(BPF_MAP_TYPE_DEVMAP, 4, 2, 0, "strobe_fwd_dev")
        .map_err(|e| kernel("create the DEVMAP", e))?;
    // Entry 0: where side 0's frames go (side 1), and the other way round.
    update_map(&map, 0, &ifindexes[1]).map_err(|e| kernel("put side 1 into the DEVMAP", e))?;
    update_map(&map, 1, &ifindexes[0]).map_err(|e| kernel("put side 0 into the DEVMAP", e))?;
    let side = |entry: i32| {
        load_program(
            &program(map.as_raw_fd(), entry),
            &format!("strobe_fwd{entry}"),
            false,
        )
    };
    Ok(Forwarder {
        programs: [side(0)?, side(1)?],
        _map: map,
    })
}
