//! strobe's own XDP program, built instruction by instruction, and the bpf() calls that
//! create its XSKMAP, load it, and attach it through a bpf_link. The instruction encoding and
//! the loader are shared with the `xdp-live` backend.
//!
//! Written by hand rather than compiled from C or Rust: the programs are a few dozen
//! instructions, and building BPF objects would need clang or bpf-linker on every machine
//! that builds strobe; loading through libbpf would add a C library for the same few calls.
//!
//! The program is the classic AF_XDP redirect:
//! `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);`
//! Frames of queues without a socket in the map fall back to XDP_PASS (the low bits of the
//! flags argument), so the rest of the interface keeps working.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::sys::{failed, owned_fd};
use crate::IoError;

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
pub(crate) const BPF_PROG_RUN: libc::c_long = 10;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_LINK_CREATE: libc::c_long = 28;

pub(crate) const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub(crate) const BPF_MAP_TYPE_DEVMAP: u32 = 14;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
/// Map flag: the array's values can be mapped into user space.
pub(crate) const BPF_F_MMAPABLE: u32 = 1 << 10;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_ATTACH_XDP: u32 = 37;
pub(crate) const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
pub(crate) const BPF_FUNC_REDIRECT_MAP: i32 = 51;
pub(crate) const BPF_FUNC_XDP_ADJUST_TAIL: i32 = 65;
pub(crate) const BPF_FUNC_XDP_STORE_BYTES: i32 = 190;
pub(crate) const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `ld_imm64` source: the address of an array map's value (imm = map fd, the next insn's imm
/// = offset into value 0), with no lookup call.
pub(crate) const BPF_PSEUDO_MAP_VALUE: u8 = 2;
pub(crate) const BPF_FUNC_KTIME_GET_NS: i32 = 5;
pub(crate) const BPF_FUNC_GET_SMP_PROCESSOR_ID: i32 = 8;
pub(crate) const BPF_FUNC_XDP_GET_BUFF_LEN: i32 = 188;

pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
pub(crate) const XDP_DROP: i32 = 1;
pub(crate) const XDP_PASS: i32 = 2;
/// Offset of `rx_queue_index` in `struct xdp_md`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// The verifier log is only asked for after a failed load; this is plenty for 6 insns.
const VERIFIER_LOG_BYTES: usize = 64 * 1024;

/// One eBPF instruction (`struct bpf_insn`): the register nibbles are dst low, src high.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    pub(crate) const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: (src << 4) | (dst & 0x0f),
            off,
            imm,
        }
    }

    #[cfg(test)]
    pub(crate) fn code(&self) -> u8 {
        self.code
    }

    #[cfg(test)]
    pub(crate) fn off(&self) -> i16 {
        self.off
    }

    pub(crate) fn set_off(&mut self, off: i16) {
        self.off = off;
    }

    /// A jump of class BPF_JMP that depends on a comparison (not a call, exit or `ja`).
    #[cfg(test)]
    pub(crate) fn is_conditional_jump(&self) -> bool {
        self.code & 0x07 == 0x05 && !matches!(self.code & 0xf0, 0x00 | 0x80 | 0x90)
    }
}

// Opcodes, as class | size or operation | mode or source.
/// BPF_LDX (0x01) | BPF_W (0x00) | BPF_MEM (0x60).
pub(crate) const LDX_MEM_W: u8 = 0x61;
/// BPF_LDX (0x01) | BPF_DW (0x18) | BPF_MEM (0x60).
pub(crate) const LDX_MEM_DW: u8 = 0x79;
/// BPF_ST (0x02) | BPF_W (0x00) | BPF_MEM (0x60): store an immediate.
pub(crate) const ST_MEM_W: u8 = 0x62;
/// BPF_STX (0x03) | BPF_W (0x00) | BPF_MEM (0x60): store a register.
pub(crate) const STX_MEM_W: u8 = 0x63;
/// BPF_STX (0x03) | BPF_DW (0x18) | BPF_MEM (0x60).
pub(crate) const STX_MEM_DW: u8 = 0x7b;
/// BPF_LD (0x00) | BPF_DW (0x18) | BPF_IMM (0x00).
pub(crate) const LD_IMM_DW: u8 = 0x18;
/// BPF_ALU64 (0x07) | BPF_MOV (0xb0) | BPF_K (0x00).
pub(crate) const ALU64_MOV_K: u8 = 0xb7;
/// BPF_ALU64 (0x07) | BPF_MOV (0xb0) | BPF_X (0x08).
pub(crate) const ALU64_MOV_X: u8 = 0xbf;
/// BPF_ALU64 (0x07) | BPF_ADD (0x00) | BPF_K (0x00).
pub(crate) const ALU64_ADD_K: u8 = 0x07;
/// BPF_ALU64 (0x07) | BPF_AND (0x50) | BPF_K (0x00).
pub(crate) const ALU64_AND_K: u8 = 0x57;
/// BPF_JMP (0x05) | BPF_JEQ (0x10) | BPF_K (0x00).
pub(crate) const JMP_JEQ_K: u8 = 0x15;
/// BPF_JMP (0x05) | BPF_JNE (0x50) | BPF_K (0x00).
pub(crate) const JMP_JNE_K: u8 = 0x55;
/// BPF_JMP (0x05) | BPF_JNE (0x50) | BPF_X (0x08): compare two registers.
pub(crate) const JMP_JNE_X: u8 = 0x5d;
/// BPF_JMP (0x05) | BPF_JGT (0x20) | BPF_K (0x00), unsigned.
pub(crate) const JMP_JGT_K: u8 = 0x25;
/// BPF_JMP (0x05) | BPF_JLT (0xa0) | BPF_K (0x00), unsigned.
pub(crate) const JMP_JLT_K: u8 = 0xa5;
/// BPF_STX (0x03) | BPF_B (0x10) | BPF_MEM (0x60).
pub(crate) const STX_MEM_B: u8 = 0x73;
/// BPF_STX (0x03) | BPF_H (0x08) | BPF_MEM (0x60).
pub(crate) const STX_MEM_H: u8 = 0x6b;
/// BPF_ALU64 (0x07) | BPF_ADD (0x00) | BPF_X (0x08).
pub(crate) const ALU64_ADD_X: u8 = 0x0f;
/// BPF_ALU64 (0x07) | BPF_SUB (0x10) | BPF_X (0x08).
pub(crate) const ALU64_SUB_X: u8 = 0x1f;
/// BPF_ALU64 (0x07) | BPF_LSH (0x60) | BPF_K (0x00).
pub(crate) const ALU64_LSH_K: u8 = 0x67;
/// BPF_ALU64 (0x07) | BPF_RSH (0x70) | BPF_K (0x00), logical.
pub(crate) const ALU64_RSH_K: u8 = 0x77;
/// BPF_ALU64 (0x07) | BPF_AND (0x50) | BPF_X (0x08).
pub(crate) const ALU64_AND_X: u8 = 0x5f;
/// BPF_ALU64 (0x07) | BPF_XOR (0xa0) | BPF_K (0x00).
pub(crate) const ALU64_XOR_K: u8 = 0xa7;
/// BPF_ALU64 (0x07) | BPF_XOR (0xa0) | BPF_X (0x08).
pub(crate) const ALU64_XOR_X: u8 = 0xaf;
/// BPF_ALU64 (0x07) | BPF_MUL (0x20) | BPF_X (0x08): the low 64 bits of the product.
pub(crate) const ALU64_MUL_X: u8 = 0x2f;
/// BPF_ALU (0x04) | BPF_END (0xd0) | BPF_TO_BE (0x08): to big-endian, imm = 16, 32 or 64
/// bits (the upper bits are cleared).
pub(crate) const ALU_TO_BE: u8 = 0xdc;
/// BPF_JMP (0x05) | BPF_JA (0x00): jump always.
pub(crate) const JMP_JA: u8 = 0x05;
/// BPF_JMP (0x05) | BPF_JGE (0x30) | BPF_X (0x08), unsigned.
pub(crate) const JMP_JGE_X: u8 = 0x3d;
/// BPF_JMP (0x05) | BPF_JGT (0x20) | BPF_X (0x08), unsigned.
pub(crate) const JMP_JGT_X: u8 = 0x2d;
/// BPF_ALU64 (0x07) | BPF_LSH (0x60) | BPF_X (0x08).
pub(crate) const ALU64_LSH_X: u8 = 0x6f;
/// BPF_ALU64 (0x07) | BPF_RSH (0x70) | BPF_X (0x08), logical.
pub(crate) const ALU64_RSH_X: u8 = 0x7f;
/// BPF_ALU64 (0x07) | BPF_ARSH (0xc0) | BPF_K (0x00): arithmetic (sign-filling) shift.
pub(crate) const ALU64_ARSH_K: u8 = 0xc7;
/// BPF_ALU64 (0x07) | BPF_NEG (0x80).
pub(crate) const ALU64_NEG: u8 = 0x87;
/// BPF_ALU64 (0x07) | BPF_MUL (0x20) | BPF_K (0x00).
pub(crate) const ALU64_MUL_K: u8 = 0x27;
/// BPF_ALU64 (0x07) | BPF_SUB (0x10) | BPF_K (0x00).
pub(crate) const ALU64_SUB_K: u8 = 0x17;
/// BPF_ALU64 (0x07) | BPF_OR (0x40) | BPF_X (0x08).
pub(crate) const ALU64_OR_X: u8 = 0x4f;
/// BPF_LDX (0x01) | BPF_B (0x10) | BPF_MEM (0x60).
pub(crate) const LDX_MEM_B: u8 = 0x71;
/// BPF_LDX (0x01) | BPF_H (0x08) | BPF_MEM (0x60).
pub(crate) const LDX_MEM_H: u8 = 0x69;
/// BPF_STX (0x03) | BPF_ATOMIC (0xc0) | BPF_DW (0x18), imm BPF_ADD (0): `lock *(u64 *)(dst +
/// off) += src`.
pub(crate) const STX_ATOMIC_DW: u8 = 0xdb;
/// BPF_JMP (0x05) | BPF_JGE (0x30) | BPF_K (0x00), unsigned.
pub(crate) const JMP_JGE_K: u8 = 0x35;
/// BPF_JMP (0x05) | BPF_JSGE (0x70) | BPF_K (0x00), signed.
pub(crate) const JMP_JSGE_K: u8 = 0x75;
/// BPF_JMP (0x05) | BPF_JEQ (0x10) | BPF_X (0x08).
pub(crate) const JMP_JEQ_X: u8 = 0x1d;
/// BPF_JMP (0x05) | BPF_CALL (0x80).
pub(crate) const JMP_CALL: u8 = 0x85;
/// BPF_JMP (0x05) | BPF_EXIT (0x90).
pub(crate) const JMP_EXIT: u8 = 0x95;

/// r2 = ctx->rx_queue_index; r1 = &map; r3 = XDP_PASS; r0 = bpf_redirect_map(r1, r2, r3).
fn redirect_program(map_fd: i32) -> [Insn; 6] {
    [
        Insn::new(LDX_MEM_W, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        // A 64-bit immediate takes two slots; the loader swaps the map fd for the map.
        Insn::new(LD_IMM_DW, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        Insn::new(0, 0, 0, 0, 0),
        Insn::new(ALU64_MOV_K, 3, 0, 0, XDP_PASS),
        Insn::new(JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        Insn::new(JMP_EXIT, 0, 0, 0, 0),
    ]
}

/// Object names shown by `bpftool` (16 bytes, NUL-padded).
pub(crate) fn object_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (dst, src) in out.iter_mut().zip(name.bytes().take(15)) {
        *dst = src;
    }
    out
}

// The leading parts of `union bpf_attr` each command reads; the kernel treats the rest of
// the union as zero.

#[repr(C)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
struct MapUpdateAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// The `test` part of `union bpf_attr` (BPF_PROG_RUN).
#[repr(C)]
#[derive(Default)]
pub(crate) struct ProgRunAttr {
    pub(crate) prog_fd: u32,
    pub(crate) retval: u32,
    pub(crate) data_size_in: u32,
    pub(crate) data_size_out: u32,
    pub(crate) data_in: u64,
    pub(crate) data_out: u64,
    pub(crate) repeat: u32,
    pub(crate) duration: u32,
    pub(crate) ctx_size_in: u32,
    pub(crate) ctx_size_out: u32,
    pub(crate) ctx_in: u64,
    pub(crate) ctx_out: u64,
    pub(crate) flags: u32,
    pub(crate) cpu: u32,
    pub(crate) batch_size: u32,
    pub(crate) _pad: u32,
}

/// What one `BPF_PROG_RUN` in plain test mode gave: the program's verdict, the length of
/// the frame it left in `out`, and the kernel's mean time per run in ns.
pub(crate) struct TestRun {
    pub(crate) retval: u32,
    pub(crate) size_out: usize,
    pub(crate) duration_ns: u32,
}

/// Runs `prog` `repeat` times on `data` without an interface (`BPF_PROG_RUN`'s test mode,
/// on this CPU), the frame it leaves written to `out`; the caller words the error.
pub(crate) fn test_run(
    prog: &OwnedFd,
    data: &[u8],
    out: &mut [u8],
    repeat: u32,
) -> io::Result<TestRun> {
    let mut attr = ProgRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: data.len() as u32,
        data_in: data.as_ptr() as u64,
        data_size_out: out.len() as u32,
        data_out: out.as_mut_ptr() as u64,
        repeat: repeat.max(1),
        ..ProgRunAttr::default()
    };
    if bpf(BPF_PROG_RUN, &mut attr) != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TestRun {
        retval: attr.retval,
        size_out: attr.data_size_out as usize,
        duration_ns: attr.duration,
    })
}

pub(crate) fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> libc::c_long {
    // SAFETY: attr is a live, fully initialised prefix of `union bpf_attr` for `cmd`, and
    // every pointer inside it points at memory that outlives the call.
    unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut T).cast::<libc::c_void>(),
            std::mem::size_of::<T>() as libc::c_uint,
        )
    }
}

/// How the program runs on the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AttachMode {
    /// In the driver, before any socket buffer exists.
    Native,
    /// In the generic (SKB) path: works on every interface, slower.
    Generic,
}

/// strobe's XDP program attached to one interface. Dropping it closes the link, which
/// detaches the program; a crashed process detaches the same way, as the kernel closes its
/// descriptors.
pub(super) struct XdpAttachment {
    // Field order is drop order: detach first, then free the program, then the map.
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
    pub mode: AttachMode,
    /// Why native mode was not used, when it was not.
    pub note: Option<String>,
}

impl XdpAttachment {
    /// Creates the XSKMAP with each socket at the key of its queue, loads the program, and
    /// attaches it to `ifindex` natively, falling back to generic mode.
    pub(super) fn attach(
        iface: &str,
        driver: &str,
        ifindex: u32,
        sockets: &[(u32, &OwnedFd)],
        frags: bool,
    ) -> Result<XdpAttachment, IoError> {
        let highest = sockets.iter().map(|&(q, _)| q).max().unwrap_or(0);
        let map = create_xskmap(highest)?;
        for &(queue, xsk_fd) in sockets {
            update_map(&map, queue, &(xsk_fd.as_raw_fd() as u32)).map_err(|e| {
                failed(
                    format_args!(
                        "cannot put the AF_XDP socket of {iface} queue {queue} into the XSKMAP"
                    ),
                    e,
                )
            })?;
        }
        let prog = load_program(&redirect_program(map.as_raw_fd()), "strobe_xsk", frags)?;

        let (link, mode, note) = match create_link(&prog, ifindex, XDP_FLAGS_DRV_MODE) {
            Ok(link) => (link, AttachMode::Native, None),
            Err(native) if is_mode_unsupported(&native) => {
                let link = create_link(&prog, ifindex, XDP_FLAGS_SKB_MODE)
                    .map_err(|e| link_error(iface, "generic", e))?;
                let note = format!(
                    "driver {driver} of {iface} has no native XDP ({native}); using generic (SKB) mode, which costs a socket buffer per frame"
                );
                (link, AttachMode::Generic, Some(note))
            }
            Err(e) => return Err(link_error(iface, "native", e)),
        };
        Ok(XdpAttachment {
            _link: link,
            _prog: prog,
            _map: map,
            mode,
            note,
        })
    }
}

/// Creates a map; the caller words the error.
pub(crate) fn create_map(
    map_type: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type,
        key_size: 4,
        value_size,
        max_entries,
        map_flags,
        inner_map_fd: 0,
        numa_node: 0,
        map_name: object_name(name),
    };
    owned_fd(bpf(BPF_MAP_CREATE, &mut attr))
}

/// Sets `map[key] = value` for a map with 4-byte keys; the caller words the error.
pub(crate) fn update_map<V>(map: &OwnedFd, key: u32, value: &V) -> io::Result<()> {
    let mut update = MapUpdateAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: &key as *const u32 as u64,
        value: value as *const V as u64,
        flags: 0,
    };
    if bpf(BPF_MAP_UPDATE_ELEM, &mut update) != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn create_xskmap(queue: u32) -> Result<OwnedFd, IoError> {
    create_map(BPF_MAP_TYPE_XSKMAP, 4, queue + 1, 0, "strobe_xsks").map_err(|e| match e.raw_os_error() {
        Some(libc::ENOSYS) => IoError::Other(
            "this kernel has no bpf() system call (CONFIG_BPF_SYSCALL); AF_XDP receive needs it".into(),
        ),
        Some(libc::EINVAL) => IoError::Other(format!(
            "cannot create the XSKMAP: {e}: this kernel lacks XSKMAP (needs Linux >= 4.18 with CONFIG_XDP_SOCKETS)"
        )),
        _ => failed("cannot create the XSKMAP for AF_XDP receive", e),
    })
}

/// Declares an XDP program able to see frames in several buffers (Linux >= 5.18): drivers
/// then accept it on an MTU above one page.
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// Binds an XDP program to the device it is loaded for (Linux >= 6.3): it may then call
/// that driver's XDP RX metadata kfuncs, and attaches to no other device.
const BPF_F_XDP_DEV_BOUND_ONLY: u32 = 1 << 6;

/// A call of kernel function (kfunc) `imm`, a BTF id of vmlinux.
pub(crate) const BPF_PSEUDO_KFUNC_CALL: u8 = 2;

/// Loads an XDP program named `name` (`frags`: multi-buffer aware); when the kernel refuses
/// it, the error carries the verifier's log.
pub(crate) fn load_program(insns: &[Insn], name: &str, frags: bool) -> Result<OwnedFd, IoError> {
    load_program_for(insns, name, frags, None)
}

/// [`load_program`], bound to the device of `ifindex` (in the caller's network namespace)
/// when given.
pub(crate) fn load_program_for(
    insns: &[Insn],
    name: &str,
    frags: bool,
    bound_to: Option<u32>,
) -> Result<OwnedFd, IoError> {
    let license = c"Dual MIT/GPL";
    let attempt = |log: Option<&mut Vec<u8>>| {
        let (log_level, log_size, log_buf) = match log {
            Some(buf) => (1, buf.len() as u32, buf.as_mut_ptr() as u64),
            None => (0, 0, 0),
        };
        let mut attr = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level,
            log_size,
            log_buf,
            kern_version: 0,
            prog_flags: if frags { BPF_F_XDP_HAS_FRAGS } else { 0 }
                | if bound_to.is_some() {
                    BPF_F_XDP_DEV_BOUND_ONLY
                } else {
                    0
                },
            prog_name: object_name(name),
            prog_ifindex: bound_to.unwrap_or(0),
            expected_attach_type: BPF_ATTACH_XDP,
        };
        owned_fd(bpf(BPF_PROG_LOAD, &mut attr))
    };
    if let Ok(fd) = attempt(None) {
        return Ok(fd);
    }
    // Load again with the verifier log on (only now: logging slows every load), so the
    // error can say why.
    let mut log = vec![0u8; VERIFIER_LOG_BYTES];
    let err = match attempt(Some(&mut log)) {
        Ok(fd) => return Ok(fd),
        Err(e) => e,
    };
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let text = String::from_utf8_lossy(&log[..end]);
    let text = text.trim();
    let err = failed(format_args!("cannot load strobe's XDP program {name}"), err);
    Err(if text.is_empty() {
        err
    } else {
        IoError::Other(format!("{err}\nverifier log:\n{text}"))
    })
}

/// The interface an XDP bpf_link is attached to: 0 once the interface went away (the
/// kernel detaches the program and keeps the link, empty).
pub(crate) fn xdp_link_ifindex(link: &OwnedFd) -> io::Result<u32> {
    // struct bpf_link_info: type, id, prog_id, then (8-aligned) the union whose `xdp`
    // member starts with the ifindex.
    let mut info = [0u32; 16];
    let mut attr = ObjInfoAttr {
        bpf_fd: link.as_raw_fd() as u32,
        info_len: size_of_val(&info) as u32,
        info: info.as_mut_ptr() as u64,
    };
    if bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr) < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info[4])
}

#[repr(C)]
struct ObjInfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

pub(crate) fn create_link(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_ATTACH_XDP,
        flags,
    };
    owned_fd(bpf(BPF_LINK_CREATE, &mut attr))
}

/// Errors that mean "this driver has no native XDP", as opposed to a busy interface or
/// missing privileges.
pub(crate) fn is_mode_unsupported(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) | Some(524 /* ENOTSUPP */)
    )
}

pub(crate) fn link_error(iface: &str, mode: &str, err: io::Error) -> IoError {
    let step = format!("cannot attach strobe's XDP program to {iface} ({mode} mode)");
    match err.raw_os_error() {
        Some(libc::EBUSY) | Some(libc::EEXIST) => IoError::Other(format!(
            "{step}: {err}: another XDP program is already attached (see `ip link show dev {iface}`); strobe does not replace it"
        )),
        Some(libc::EINVAL) => IoError::Other(format!(
            "{step}: {err}: attaching XDP through bpf_link needs Linux >= 5.9"
        )),
        // veth (and most drivers) refuse a single-buffer XDP program while the MTU, or the
        // veth peer's, lets frames exceed one page.
        Some(libc::ERANGE) => IoError::Other(format!(
            "{step}: {err}: the MTU of {iface} (or of its veth peer) allows frames longer than \
             one XDP buffer (about 3 500 bytes on veth); strobe's AF_XDP receiver takes one \
             buffer per frame: receive jumbo frames with afpacket:, or lower the MTU"
        )),
        _ => failed(step, err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_encode_registers_and_immediates() {
        let prog = redirect_program(7);
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        // ldxw r2, [r1 + 16]
        assert_eq!(
            prog[0],
            Insn {
                code: 0x61,
                regs: 0x12,
                off: 16,
                imm: 0
            }
        );
        // lddw r1, map_fd 7 (pseudo map fd in src)
        assert_eq!(
            prog[1],
            Insn {
                code: 0x18,
                regs: 0x11,
                off: 0,
                imm: 7
            }
        );
        assert_eq!(
            prog[2],
            Insn {
                code: 0,
                regs: 0,
                off: 0,
                imm: 0
            }
        );
        // mov r3, XDP_PASS
        assert_eq!(
            prog[3],
            Insn {
                code: 0xb7,
                regs: 0x03,
                off: 0,
                imm: 2
            }
        );
        assert_eq!(
            prog[4],
            Insn {
                code: 0x85,
                regs: 0,
                off: 0,
                imm: 51
            }
        );
        assert_eq!(
            prog[5],
            Insn {
                code: 0x95,
                regs: 0,
                off: 0,
                imm: 0
            }
        );
    }

    #[test]
    fn a_refused_program_brings_the_verifier_log() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: loading BPF programs needs root");
            return;
        }
        // r0 = XDP_PASS with no exit: the verifier refuses to fall off the end.
        let broken = [Insn::new(ALU64_MOV_K, 0, 0, 0, XDP_PASS)];
        let msg = load_program(&broken, "broken", false)
            .unwrap_err()
            .to_string();
        assert!(
            msg.starts_with("cannot load strobe's XDP program broken"),
            "{msg}"
        );
        assert!(msg.contains("verifier log:\n"), "{msg}");
        // The real program loads (against a real XSKMAP).
        let map = create_xskmap(0).unwrap();
        load_program(&redirect_program(map.as_raw_fd()), "strobe_xsk", false).unwrap();
    }

    #[test]
    fn object_names_are_truncated_and_nul_terminated() {
        assert_eq!(&object_name("strobe_xsk")[..11], b"strobe_xsk\0");
        assert_eq!(object_name("a_name_longer_than_sixteen")[15], 0);
    }
}
