// A gosnappi (Go OTG client) script run unmodified against strobe serve: the calls an
// ixia-c script makes, checked, over HTTP and, given a second address, over gRPC too.
// Usage: go run . http://127.0.0.1:PORT [127.0.0.1:GRPC_PORT] (a lab `cable` DUT behind
// the server's lab:tx and lab:rx). Exits 1 on the first check that fails.
package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/open-traffic-generator/snappi/gosnappi"
)

// prefix names the transport of the checks running.
var prefix string

func check(ok bool, format string, args ...any) {
	if !ok {
		fmt.Printf("FAIL: "+prefix+format+"\n", args...)
		os.Exit(1)
	}
}

func must(err error, what string) {
	check(err == nil, "%s: %v", what, err)
}

func flowMetric(api gosnappi.Api, name string) gosnappi.FlowMetric {
	mr := gosnappi.NewMetricsRequest()
	mr.Flow().SetFlowNames([]string{name})
	res, err := api.GetMetrics(mr)
	must(err, "flow metrics")
	items := res.FlowMetrics().Items()
	check(len(items) == 1, "one flow metric, got %d", len(items))
	return items[0]
}

func transmit(api gosnappi.Api, state gosnappi.StateTrafficFlowTransmitStateEnum) {
	cs := gosnappi.NewControlState()
	cs.Traffic().FlowTransmit().SetState(state)
	_, err := api.SetControlState(cs)
	must(err, "flow_transmit "+string(state))
}

func main() {
	api := gosnappi.NewApi()
	api.NewHttpTransport().SetLocation(os.Args[1]).SetVerify(false)
	// Over HTTP an OTG error's code is the HTTP status.
	checkServer(api, "http", 400)
	fmt.Println("gosnappi: every check passed over HTTP")
	if len(os.Args) > 2 {
		api := gosnappi.NewApi()
		api.NewGrpcTransport().SetLocation(os.Args[2]).SetRequestTimeout(30 * time.Second)
		// Over gRPC it is the gRPC status code: InvalidArgument.
		checkServer(api, "grpc", 3)
		fmt.Println("gosnappi: every check passed over gRPC")
	}
}

// checkServer runs the checks through api; a bad config's error carries badConfigCode.
func checkServer(api gosnappi.Api, transport string, badConfigCode int32) {
	prefix = transport + ": "

	v, err := api.GetVersion()
	must(err, "version")
	check(strings.HasPrefix(v.ApiSpecVersion(), "^1."), "api_spec_version %q", v.ApiSpecVersion())

	c := gosnappi.NewConfig()
	tx := c.Ports().Add().SetName("p1").SetLocation("lab:tx")
	rx := c.Ports().Add().SetName("p2").SetLocation("lab:rx")
	f := c.Flows().Add().SetName("f1")
	f.Metrics().SetEnable(true)
	f.Metrics().Latency().SetEnable(true)
	f.TxRx().Port().SetTxName(tx.Name()).SetRxNames([]string{rx.Name()})
	f.Size().SetFixed(128)
	f.Rate().SetPps(10000)
	f.Duration().FixedPackets().SetPackets(1000)
	f.Packet().Add().Ethernet()
	ip := f.Packet().Add().Ipv4()
	ip.Src().SetValue("198.18.0.1")
	ip.Dst().SetValue("198.18.1.1")
	udp := f.Packet().Add().Udp()
	udp.SrcPort().Increment().SetStart(1000).SetStep(1).SetCount(10)
	_, err = api.SetConfig(c)
	must(err, "set_config")
	got, err := api.GetConfig()
	must(err, "get_config")
	check(len(got.Flows().Items()) == 1 && got.Flows().Items()[0].Name() == "f1", "get_config returns the flow")

	transmit(api, gosnappi.StateTrafficFlowTransmitState.START)
	var m gosnappi.FlowMetric
	for i := 0; i < 200; i++ {
		m = flowMetric(api, "f1")
		if m.Transmit() == gosnappi.FlowMetricTransmit.STOPPED {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	check(m.Transmit() == gosnappi.FlowMetricTransmit.STOPPED, "the flow stops after its 1000 frames")
	transmit(api, gosnappi.StateTrafficFlowTransmitState.STOP)
	// Final metrics: strobe leaves its x_strobe extension out for gosnappi, which refuses
	// fields the model does not name.
	m = flowMetric(api, "f1")
	check(m.FramesTx() == 1000 && m.FramesRx() == 1000, "frames tx %d rx %d", m.FramesTx(), m.FramesRx())
	check(m.BytesTx() == 128000 && m.BytesRx() == 128000, "bytes tx %d rx %d", m.BytesTx(), m.BytesRx())
	check(m.Loss() == 0, "loss %v", m.Loss())
	l := m.Latency()
	check(0 < l.MinimumNs() && l.MinimumNs() <= l.AverageNs() && l.AverageNs() <= l.MaximumNs() && l.MaximumNs() < 1e9,
		"latency min %v avg %v max %v", l.MinimumNs(), l.AverageNs(), l.MaximumNs())

	pr := gosnappi.NewMetricsRequest()
	pr.Port()
	ports, err := api.GetMetrics(pr)
	must(err, "port metrics")
	for _, p := range ports.PortMetrics().Items() {
		switch p.Name() {
		case "p1":
			check(p.FramesTx() == 1000, "p1 frames_tx %d", p.FramesTx())
		case "p2":
			check(p.FramesRx() >= 1000, "p2 frames_rx %d", p.FramesRx())
		}
		check(p.Link() == gosnappi.PortMetricLink.UP, "port %s link %v", p.Name(), p.Link())
	}

	bad := gosnappi.NewConfig()
	bad.Ports().Add().SetName("x").SetLocation("nosuchif9")
	_, err = api.SetConfig(bad)
	check(err != nil, "a config with an unknown interface is refused")
	se, ok := gosnappi.FromError(err)
	check(ok && se.Code() == badConfigCode && se.HasKind() && se.Kind() == gosnappi.ErrorKind.VALIDATION,
		"an OTG validation error, got %v", err)
	check(len(se.Errors()) == 1 && strings.Contains(se.Errors()[0], "nosuchif9"), "the error names the interface: %v", se.Errors())
}
