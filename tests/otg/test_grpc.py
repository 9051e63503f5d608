"""OTG over gRPC (`strobe serve --grpc-listen`) driven by unmodified snappi with its gRPC
transport on a lab veth pair: config round trip, live metrics, exact counts, latency, a
capture decoded with scapy, errors as OTG errors with gRPC status codes, and the token."""
import io
import time

import grpc
import pytest
import snappi
from scapy.all import UDP, rdpcap
from snappi import otg_pb2, otg_pb2_grpc

from conftest import Server, _free_port
from otg_helpers import (add_flow, base_config, capture, flow_metrics, otg_error, port_metrics,
                         read_capture, transmit, wait_stopped)

TOKEN = "0123456789abcdef-grpc-token"


class GrpcServer(Server):
    """strobe serve with REST on one free port and gRPC on another."""

    def __init__(self, lab, extra=()):
        self.grpc_port = _free_port()
        self.grpc_location = f"127.0.0.1:{self.grpc_port}"
        super().__init__(lab, ["--grpc-listen", self.grpc_location, *extra])
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                grpc.channel_ready_future(grpc.insecure_channel(self.grpc_location)).result(
                    timeout=0.5)
                return
            except grpc.FutureTimeoutError:
                assert self.proc.poll() is None, self.output()
        raise AssertionError("no gRPC listener: " + self.output())


@pytest.fixture(scope="module")
def grpc_server(lab):
    s = GrpcServer(lab)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def gapi(grpc_server):
    a = snappi.api(location=grpc_server.grpc_location, transport=snappi.Transport.GRPC,
                   version_check=True)
    yield a
    try:
        transmit(a, "stop")
    except Exception:
        pass
    a.close()
    assert grpc_server.proc.poll() is None, grpc_server.output()


def test_config_round_trip_and_version(gapi, lab):
    assert gapi.get_version().app_version.startswith("strobe ")
    cfg = base_config(gapi, lab)
    f = add_flow(cfg, "rt", packets=10, pps=2500)
    eth, ip, udp = f.packet.ethernet().ipv4().udp()
    ip.dst.value = "198.18.1.9"
    udp.dst_port.increment.start = 3000
    udp.dst_port.increment.step = 2
    udp.dst_port.increment.count = 4
    assert list(gapi.set_config(cfg).warnings) == []
    got = gapi.get_config()
    assert [p.name for p in got.ports] == ["tx", "rx"]
    flow = got.flows[0]
    assert flow.name == "rt" and flow.rate.pps == 2500 and flow.size.fixed == 128
    assert flow.duration.fixed_packets.packets == 10
    assert flow.packet[1].dst.value == "198.18.1.9"
    assert flow.packet[2].dst_port.increment.step == 2


def test_exact_counts_live_metrics_latency_and_a_capture(gapi, lab):
    cfg = base_config(gapi, lab)
    cap = cfg.captures.capture(name="c")[-1]
    cap.port_names = ["rx"]
    f = add_flow(cfg, "g", packets=3000, pps=2000, size=200)
    f.metrics.latency.enable = True
    f.packet.ethernet().ipv4().udp()
    gapi.set_config(cfg)

    capture(gapi, "start")

    transmit(gapi, "start", ["g"])
    # 3000 frames at 2000/s: about 1.5 s, seen while it runs.
    time.sleep(0.5)
    live = flow_metrics(gapi, ["g"])["g"]
    assert live.transmit == "started", live
    assert 0 < live.frames_tx < 3000, live
    m = wait_stopped(gapi, ["g"])
    transmit(gapi, "stop")
    m = flow_metrics(gapi, ["g"])["g"]
    assert (m.frames_tx, m.frames_rx) == (3000, 3000), m
    assert m.bytes_tx == 3000 * 200, m
    assert m.loss == 0
    lat = m.latency
    assert 0 < lat.minimum_ns <= lat.average_ns <= lat.maximum_ns < 1e9, lat
    ports = port_metrics(gapi)
    assert ports["tx"].frames_tx == 3000 and ports["rx"].frames_rx == 3000, ports

    frames = rdpcap(io.BytesIO(read_capture(gapi)))
    udp = [p for p in frames if p.haslayer(UDP)]
    assert len(udp) == 3000, len(udp)
    # strobe's captures keep each frame's FCS: the frame size OTG counts.
    assert all(len(p) == 200 for p in udp), {len(p) for p in udp}


def test_a_bad_config_is_an_otg_error_naming_the_problem(gapi):
    bad = gapi.config()
    bad.ports.port(name="x", location="nosuchif9")
    with pytest.raises(Exception) as refused:
        gapi.set_config(bad)
    err = gapi.from_exception(refused.value)
    assert err is not None, refused.value
    # The gRPC code (InvalidArgument), as OTG asks of a gRPC server.
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT.value[0], err
    assert err.kind == "validation", err
    assert any("nosuchif9" in e for e in err.errors), err
    assert "nosuchif9" in str(refused.value)


def test_update_config_over_grpc_changes_a_running_flow(gapi, lab):
    """UpdateConfig (snappi's update_config over gRPC) goes through PATCH /config's handler:
    a running flow's rate and size change without a stop, and GetConfig says so."""
    cfg = base_config(gapi, lab)
    f = add_flow(cfg, "live", pps=1000, size=128)
    f.packet.ethernet().ipv4().udp()
    gapi.set_config(cfg)
    transmit(gapi, "start", ["live"])
    time.sleep(1.0)
    upd = gapi.config_update()
    upd.flows.property_names = ["rate", "size"]
    g = upd.flows.flows.flow(name="live")[-1]
    g.tx_rx.port.tx_name = "tx"
    g.tx_rx.port.rx_names = ["rx"]
    g.rate.pps, g.size.fixed = 4000, 256
    assert list(gapi.update_config(upd).warnings) == []
    before, t1 = flow_metrics(gapi, ["live"])["live"], time.time()
    assert before.transmit == "started", before
    time.sleep(1.0)
    after, t2 = flow_metrics(gapi, ["live"])["live"], time.time()
    transmit(gapi, "stop")
    # ~4000 frames a second after the change, each of 256 bytes (generous bounds).
    rate = (after.frames_tx - before.frames_tx) / (t2 - t1)
    assert 3000 < rate < 4600, rate
    per_frame = (after.bytes_tx - before.bytes_tx) / (after.frames_tx - before.frames_tx)
    assert abs(per_frame - 256) < 2, per_frame
    got = gapi.get_config().flows[0]
    assert (got.rate.pps, got.size.fixed) == (4000, 256), got
    # A flow the config does not have is refused as an OTG error naming it.
    ghost = gapi.config_update()
    ghost.flows.property_names = ["rate"]
    h = ghost.flows.flows.flow(name="ghost")[-1]
    h.tx_rx.port.tx_name = "tx"
    h.rate.pps = 10
    err = otg_error(gapi, lambda: gapi.update_config(ghost))
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT.value[0], err
    assert any("ghost" in e for e in err.errors), err


def test_calls_strobe_does_not_serve_say_what_it_does(grpc_server):
    with grpc.insecure_channel(grpc_server.grpc_location) as channel:
        stub = otg_pb2_grpc.OpenapiStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.AppendConfig(otg_pb2.AppendConfigRequest(), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "AppendConfig is not supported" in refused.value.details()
        assert "SetConfig" in refused.value.details()
        # States and actions answer as their REST routes do: what strobe supports instead.
        for call, request in ((stub.GetStates, otg_pb2.GetStatesRequest()),
                              (stub.SetControlAction, otg_pb2.SetControlActionRequest())):
            with pytest.raises(grpc.RpcError) as refused:
                call(request, timeout=10)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "stateless traffic generator" in refused.value.details()


def test_the_token_is_required_over_grpc_too(lab):
    s = GrpcServer(lab, ["--token", TOKEN])
    try:
        # snappi's gRPC transport sends no metadata: refused, with the reason.
        without = snappi.api(location=s.grpc_location, transport=snappi.Transport.GRPC)
        with pytest.raises(Exception) as refused:
            without.get_config()
        assert "token" in str(refused.value), refused.value
        with grpc.insecure_channel(s.grpc_location) as channel:
            stub = otg_pb2_grpc.OpenapiStub(channel)
            empty = otg_pb2_grpc.google_dot_protobuf_dot_empty__pb2.Empty()
            with pytest.raises(grpc.RpcError) as wrong:
                stub.GetVersion(empty, timeout=10,
                                metadata=[("authorization", "Bearer " + TOKEN[:-1] + "x")])
            assert wrong.value.code() == grpc.StatusCode.UNAUTHENTICATED
            version = stub.GetVersion(empty, timeout=10,
                                      metadata=[("authorization", "Bearer " + TOKEN)])
            assert version.version.app_version.startswith("strobe ")
    finally:
        s.stop()


def test_grpc_over_tls_with_the_rest_servers_certificate(lab, tmp_path):
    """--tls-cert with --grpc-listen: REST over HTTPS and gRPC over TLS, one certificate;
    snappi's secure gRPC channel (its CA the certificate) runs a flow, a plain channel gets
    nowhere."""
    import subprocess
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    grpc_port = _free_port()
    s = Server(lab, ["--grpc-listen", f"127.0.0.1:{grpc_port}", "--tls-cert", str(cert),
                     "--tls-key", str(key)], scheme="https")
    try:
        a = snappi.api(location=f"127.0.0.1:{grpc_port}", transport=snappi.Transport.GRPC)
        a._use_secure_connection(str(cert), "localhost")
        cfg = base_config(a, lab)
        f = add_flow(cfg, "secure", packets=300, pps=3000)
        eth, ip, udp = f.packet.ethernet().ipv4().udp()
        ip.src.value, ip.dst.value = "198.18.0.1", "198.18.1.1"
        a.set_config(cfg)
        transmit(a, "start", ["secure"])
        wait_stopped(a, ["secure"])
        transmit(a, "stop")
        assert flow_metrics(a)["secure"].frames_rx == 300
        a.close()
        # Without TLS, the same port answers nothing a client can use.
        plain = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        with pytest.raises(grpc.FutureTimeoutError):
            grpc.channel_ready_future(plain).result(timeout=2)
        plain.close()
        assert "gRPC with TLS" in s.output(), s.output()
    finally:
        s.stop()


def test_tagged_metrics_over_grpc(gapi, lab):
    cfg = base_config(gapi, lab)
    f = add_flow(cfg, "tagged", packets=600, pps=3000)
    eth, ip, udp = f.packet.ethernet().ipv4().udp()
    ip.src.value, ip.dst.value = "198.18.0.1", "198.18.1.1"
    udp.dst_port.value = 5678
    udp.src_port.values = [7, 8, 9]
    udp.src_port.metric_tags.metrictag(name="sport")
    gapi.set_config(cfg)
    transmit(gapi, "start", ["tagged"])
    wait_stopped(gapi, ["tagged"])
    transmit(gapi, "stop")
    req = gapi.metrics_request()
    req.flow.flow_names = ["tagged"]
    req.flow.tagged_metrics.filters.filter(name="sport", values=["0x7", "0x9"])
    m = gapi.get_metrics(req).flow_metrics[0]
    assert m.frames_rx == 600, m
    got = sorted((t.tags[0].name, t.tags[0].value.hex, t.frames_tx, t.frames_rx)
                 for t in m.tagged_metrics)
    assert got == [("sport", "0x7", 200, 200), ("sport", "0x9", 200, 200)], got
