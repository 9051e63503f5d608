//! A small assembler for the eBPF programs strobe builds at run time: instructions as
//! plain `Insn`s, jumps to named labels resolved when the program is done (no hand-counted
//! offsets), and the few multi-instruction idioms the programs share. Written by hand: the
//! programs are generated per run from the flow (offsets, constants, the number of fields
//! and sizes), which no BPF crate here assembles without a C toolchain.

use super::bpf::{Insn, BPF_PSEUDO_MAP_FD, LD_IMM_DW};

/// A program being assembled.
pub(crate) struct Asm {
    p: Vec<Insn>,
    labels: Vec<Option<usize>>,
    jumps: Vec<(usize, usize)>,
}

/// A place in the program to jump to, bound once.
pub(crate) type Label = usize;

impl Asm {
    pub(crate) fn new() -> Asm {
        Asm {
            p: Vec::with_capacity(256),
            labels: Vec::new(),
            jumps: Vec::new(),
        }
    }
    /// A new label, to bind later.
    pub(crate) fn label(&mut self) -> Label {
        self.labels.push(None);
        self.labels.len() - 1
    }
    /// Binds `label` to the next instruction.
    pub(crate) fn bind(&mut self, label: Label) {
        self.labels[label] = Some(self.p.len());
    }
    pub(crate) fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.p.push(Insn::new(code, dst, src, off, imm));
    }
    /// A jump (conditional or not) to `label`.
    pub(crate) fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, label: Label) {
        self.jumps.push((self.p.len(), label));
        self.op(code, dst, src, 0, imm);
    }
    /// A 64-bit immediate (two instructions).
    pub(crate) fn imm64(&mut self, dst: u8, src: u8, lo: i32, hi: i32) {
        self.op(LD_IMM_DW, dst, src, 0, lo);
        self.op(0, 0, 0, 0, hi);
    }
    pub(crate) fn constant(&mut self, dst: u8, v: u64) {
        self.imm64(dst, 0, v as u32 as i32, (v >> 32) as u32 as i32);
    }
    /// dst = the map with descriptor `fd` (the loader swaps in the map).
    pub(crate) fn map(&mut self, dst: u8, fd: i32) {
        self.imm64(dst, BPF_PSEUDO_MAP_FD, fd, 0);
    }
    /// The program, every jump resolved; why not when a jump is longer than an
    /// instruction's 16-bit offset reaches, or a label was never bound (a strobe bug).
    pub(crate) fn finish(mut self) -> Result<Vec<Insn>, String> {
        for (pc, label) in self.jumps {
            let target = self.labels[label]
                .ok_or("a jump to a label never bound (a strobe bug)".to_string())?;
            let off = i16::try_from(target as isize - pc as isize - 1).map_err(|_| {
                format!(
                    "a program of {} instructions (a jump in it spans more than 32 767; fewer frame sizes or varying fields)",
                    self.p.len()
                )
            })?;
            self.p[pc].set_off(off);
        }
        Ok(self.p)
    }
}

#[cfg(test)]
mod tests {
    use super::super::bpf::{ALU64_MOV_K, JMP_EXIT, JMP_JA, JMP_JEQ_K};
    use super::*;

    #[test]
    fn jumps_land_on_their_labels_forward_and_back() {
        let mut a = Asm::new();
        let (top, end) = (a.label(), a.label());
        a.bind(top);
        a.op(ALU64_MOV_K, 0, 0, 0, 1); // 0
        a.jump(JMP_JEQ_K, 0, 0, 7, end); // 1 -> 6
        a.constant(1, u64::MAX); // 2, 3
        a.map(2, 5); // 4, 5
        a.bind(end);
        a.jump(JMP_JA, 0, 0, 0, top); // 6 -> 0
        a.op(JMP_EXIT, 0, 0, 0, 0); // 7
        let p = a.finish().unwrap();
        assert_eq!(p.len(), 8);
        let target = |pc: usize| (pc as i64 + 1 + i64::from(p[pc].off())) as usize;
        assert_eq!(target(1), 6);
        assert_eq!(target(6), 0);
        assert_eq!(p[4].code(), LD_IMM_DW);
    }

    #[test]
    fn a_jump_too_long_is_an_error_not_a_wrong_program() {
        let mut a = Asm::new();
        let end = a.label();
        a.jump(JMP_JA, 0, 0, 0, end);
        for _ in 0..40_000 {
            a.op(ALU64_MOV_K, 0, 0, 0, 0);
        }
        a.bind(end);
        a.op(JMP_EXIT, 0, 0, 0, 0);
        let why = a.finish().expect_err("too long");
        assert!(why.contains("40002 instructions"), "{why}");
    }
}
