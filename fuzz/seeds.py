#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus into fuzz/corpus/TARGET/ from the project's own
material: examples/ and SCENARIO.md for scenarios, fuzz/seeds/ for OTG configs, pcaps (examples/ and ones strobe writes)
for captures and, cut into received frames, for the receive path; kernel ring layouts built
here for the ring parsers.

usage: seeds.py ROOT STROBE_PCAP...   (STROBE_PCAP: pcaps `strobe gen` wrote for the seeds)
"""
import hashlib
import pathlib
import re
import struct
import sys

root = pathlib.Path(sys.argv[1])
strobe_pcaps = [pathlib.Path(p) for p in sys.argv[2:]]
corpus = root / "fuzz" / "corpus"


def put(target, data):
    d = corpus / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def pcap_frames(path):
    """Frames of a classic pcap (either byte order, µs or ns)."""
    raw = path.read_bytes()
    magic = raw[:4]
    endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    at, frames = 24, []
    while at + 16 <= len(raw):
        _, _, incl, _ = struct.unpack(endian + "IIII", raw[at:at + 16])
        frames.append(raw[at + 16:at + 16 + incl])
        at += 16 + incl
    return frames


# Scenarios: every example and every TOML block of the format reference.
for toml in sorted((root / "examples").glob("*.toml")):
    put("scenario", toml.read_bytes())
reference = (root / "crates" / "strobe-model" / "SCENARIO.md").read_text()
for block in re.findall(r"```toml\n(.*?)```", reference, re.S):
    put("scenario", block.encode())

# OTG configs (as snappi sends them): fuzz/seeds/*.json.
for config in sorted((root / "fuzz" / "seeds").glob("otg-*.json")):
    put("otg_config", config.read_bytes())

# Captures as files, and their frames as received-frame sequences.
pcaps = sorted((root / "examples").glob("*.pcap")) + strobe_pcaps
for pcap in pcaps:
    put("capture", pcap.read_bytes())
    for ng in [pcap.with_suffix(".pcapng")]:
        if ng.exists():
            put("capture", ng.read_bytes())
    frames = pcap_frames(pcap)[:64]
    for start in range(0, len(frames), 8):
        seq = bytes([7]) + b"".join(struct.pack(">H", len(f)) + f for f in frames[start:start + 8])
        put("rx_frames", seq)

# Ring layouts (linux/if_packet.h, x86-64): a TPACKET_V3 block with two frames, and a
# TPACKET_V2 slot with one.
frames = pcap_frames(pcaps[-1])[:2] if pcaps else [bytes(64), bytes(64)]
block = bytearray(48)
at = 48
offsets = []
for f in frames:
    offsets.append(at)
    at += (48 + 2 + len(f) + 15) // 16 * 16
block += bytes(at - 48)
struct.pack_into("<III", block, 8, 1, len(frames), 48)  # status, num_pkts, first
for i, (f, off) in enumerate(zip(frames, offsets)):
    nxt = offsets[i + 1] - off if i + 1 < len(offsets) else 0
    struct.pack_into("<IIIIIIHH", block, off, nxt, 1_700_000_000, 42, len(f), len(f) + 4, 1, 50, 64)
    block[off + 50:off + 50 + len(f)] = f
put("ring_parsers", bytes(block))
slot = bytearray(2048)
f = frames[0]
struct.pack_into("<IIIHHII", slot, 0, 1, len(f) + 4, len(f), 66, 80, 1_700_000_000, 42)
slot[66:66 + len(f)] = f
put("ring_parsers", bytes(slot))

# One-flow options: the README's examples, NUL-separated (stack, src mac, dst mac, size,
# rate, pattern, duration, vary...).
for fields in [
    [0, "198.18.0.1:1000-198.18.1.1:2000", "", "", "128", "1mpps", "poisson", "", "ip.src=inc:198.18.0.1/0.0.0.1/256"],
    [1, "[2001:2::1]:1000-[2001:2::2]:2000", "02:00:00:00:00:01", "02:00:00:00:00:02", "imix", "10gbps", "burst:32/10us", "10s"],
    [2, "198.18.0.1-198.18.1.1", "", "", "64-1518/64", "50%", "on_off:1ms/9ms", "", "ip.dst=rand:198.18.0.0-198.18.255.255/7", "ip.ttl=values:1,2,3"],
    [0x50, "198.18.0.1:1-198.18.1.1:2", "", "", "random:64-1518", "max", "cbr", "500ms", "udp.src_port=dec:2000/1/100"],
]:
    put("one_flow", bytes([fields[0]]) + "\0".join(fields[1:]).encode())
print(f"seed corpus in {corpus}: " + ", ".join(
    f"{d.name} {len(list(d.iterdir()))}" for d in sorted(corpus.iterdir())))
