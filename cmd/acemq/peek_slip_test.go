package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/slip"
	"github.com/acemq/acemq/transport"
)

// 2026-12-02 08:00:00.123 UTC and later, in Unix milliseconds.
const (
	slipT0 = "1796198400123"
	slipT1 = "1796198460456"
	slipT2 = "1796198520789"
)

// The documents of the wire contract's example at its stages, as a
// foreign family member writes them.
const (
	slipRunning = `{"v":1,"id":"5a4c0e2e","name":"fulfil-order","state":"running",
	 "itinerary":["card.charge","shipping.ship"],
	 "visited":[{"stop":"stock.reserve","at":` + slipT0 + `,"record":{"reservation":"r-77"}}],
	 "variables":{"order":7,"reservation":"r-77"},
	 "compensations":[{"stop":"stock.reserve","queue":"stock.release","args":{"reservation":"r-77"}}],
	 "compensated":[],"fault":null,
	 "completed":{"queue":"orders.slips"},"faulted":{"exchange":"orders.events","routing_key":"slip.faulted"}}`
	slipCompensating = `{"v":1,"id":"5a4c0e2e","name":"fulfil-order","state":"compensating","itinerary":[],
	 "visited":[{"stop":"stock.reserve","at":` + slipT0 + `},{"stop":"card.charge","at":` + slipT1 + `,"record":"p-9"}],
	 "variables":{},
	 "compensations":[{"stop":"stock.reserve","queue":"stock.release"},{"stop":"card.charge","queue":"card.refund","args":{"payment":"p-9"}}],
	 "compensated":[],"fault":{"stop":"shipping.ship","reason":"exhausted 5 attempts: no courier","at":` + slipT2 + `}}`
	slipHalf = `{"v":1,"id":"5a4c0e2e","state":"half-compensated","itinerary":[],
	 "visited":[{"stop":"stock.reserve","at":` + slipT0 + `},{"stop":"card.charge","at":` + slipT1 + `}],
	 "variables":{},
	 "compensations":[{"stop":"stock.reserve","queue":"stock.release"}],
	 "compensated":[{"stop":"card.charge","queue":"card.refund","at":` + slipT2 + `}],
	 "fault":{"stop":"shipping.ship","reason":"the handler rejected it: no address","at":` + slipT1 + `,
	          "compensation":"stock.release","compensation_reason":"exhausted 3 attempts: warehouse down"}}`
	slipCompleted = `{"v":1,"id":"5a4c0e2e","state":"completed","itinerary":[],
	 "visited":[{"stop":"stock.reserve","at":` + slipT0 + `},{"stop":"card.charge","at":` + slipT1 + `},{"stop":"shipping.ship","at":` + slipT2 + `,"record":{"parcel":"z-1"}}],
	 "variables":{"order":7},"compensations":[],"compensated":[],"fault":null,"future":{"kept":true}}`
)

// printedSlip is the slip block peek prints for a message with headers.
func printedSlip(t *testing.T, headers map[string]any) string {
	t.Helper()
	ps := readSlip(headers)
	if ps == nil {
		t.Fatalf("no slip read from %v", headers)
	}
	var b bytes.Buffer
	printSlip(&b, "m-1", viewSlip(ps, noHide))
	return b.String()
}

// TestPeekSlipBlock: the slip block says where a slip stands, what lies
// ahead, what was done, what would be undone (the last registered
// first), why, and which event it is; a slip that cannot be read says
// why.
func TestPeekSlipBlock(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		headers map[string]any
		want    string
	}{
		{"running at its second stop", map[string]any{slip.Header: slipRunning}, `  slip 5a4c0e2e (fulfil-order) of m-1
    state:          running
    where:          at stop 2 of 3: card.charge
    itinerary:      card.charge → shipping.ship
    visited:        1. stock.reserve at 2026-12-02 08:00:00.123Z: {"reservation":"r-77"}
    variables:      {"order":7,"reservation":"r-77"}
    compensations:  stock.release (registered by stock.reserve): {"reservation":"r-77"}
    compensated:    -
    events go:      completed to queue orders.slips, faulted to exchange "orders.events" (key "slip.faulted")
`},
		{"compensating after a fault, as bytes", map[string]any{slip.Header: []byte(slipCompensating)}, `  slip 5a4c0e2e (fulfil-order) of m-1
    state:        compensating
    where:        compensating: next card.refund (0 run, 2 to run)
    itinerary:    -
    visited:
      1. stock.reserve at 2026-12-02 08:00:00.123Z
      2. card.charge at 2026-12-02 08:01:00.456Z: "p-9"
    variables:    -
    compensations, in the order they run (the last registered first):
      card.refund (registered by card.charge): {"payment":"p-9"}
      stock.release (registered by stock.reserve)
    compensated:  -
    fault:        at shipping.ship, 2026-12-02 08:02:00.789Z: exhausted 5 attempts: no courier
`},
		{"a half-compensated event", map[string]any{slip.Header: slipHalf, slip.EventHeader: "half-compensated"}, `  slip 5a4c0e2e of m-1
    event:          half-compensated
    state:          half-compensated
    where:          half-compensated: compensation stock.release failed (1 run, 1 not)
    itinerary:      -
    visited:
      1. stock.reserve at 2026-12-02 08:00:00.123Z
      2. card.charge at 2026-12-02 08:01:00.456Z
    variables:      -
    compensations:  stock.release (registered by stock.reserve)
    compensated:    card.refund (for card.charge) at 2026-12-02 08:02:00.789Z
    fault:
      at shipping.ship, 2026-12-02 08:01:00.456Z: the handler rejected it: no address
      and compensation stock.release failed for good: exhausted 3 attempts: warehouse down
`},
		{"a completed event", map[string]any{slip.Header: slipCompleted, slip.EventHeader: []byte("completed")}, `  slip 5a4c0e2e of m-1
    event:          completed
    state:          completed
    where:          completed: 3 stops visited
    itinerary:      -
    visited:
      1. stock.reserve at 2026-12-02 08:00:00.123Z
      2. card.charge at 2026-12-02 08:01:00.456Z
      3. shipping.ship at 2026-12-02 08:02:00.789Z: {"parcel":"z-1"}
    variables:      {"order":7}
    compensations:  -
    compensated:    -
`},
		{"bad JSON", map[string]any{slip.Header: `{"v":1,"id":`}, "  slip of m-1 cannot be read: acemq: slip: x-acemq-slip is not a slip document: unexpected end of JSON input\n"},
		{"version 2", map[string]any{slip.Header: `{"v":2,"id":"x"}`}, "  slip of m-1 cannot be read: acemq: slip: version 2, this library reads version 1\n"},
		{"an int64", map[string]any{slip.Header: int64(7)}, "  slip of m-1 cannot be read: acemq: slip: x-acemq-slip is a int64, not a JSON string\n"},
		{"no id", map[string]any{slip.Header: `{"v":1}`}, "  slip of m-1 cannot be read: acemq: slip: x-acemq-slip has no id\n"},
	} {
		if got := printedSlip(t, c.headers); got != c.want {
			t.Errorf("%s:\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
	if readSlip(map[string]any{acemq.HeaderID: "m-1"}) != nil {
		t.Error("a message without a slip has one")
	}
}

// TestPeekSlipHostile: what a producer wrote in a slip is shown escaped,
// one line per line of the block, with the passwords of URLs hidden.
func TestPeekSlipHostile(t *testing.T) {
	t.Parallel()
	doc := `{"v":1,"id":"h\u001b]52;c;cHduZWQ=\u0007","state":"running",
	 "itinerary":["card\u001b[2J\nforged: row","ship\u202egpj.exe"],
	 "visited":[{"stop":"in\rto","at":` + slipT0 + `,"record":"a\u001b[31m\nb"}],
	 "variables":{"note":"x` + "\u202e\x7f" + `y\u001b[2J\n<script>alert(1)</script>","db":"postgres://svc:hunter2@db/orders"},
	 "compensations":[],"compensated":[],
	 "fault":{"stop":"card\u001b[2J","reason":"refused\u001b[1A\nacemq: all good (dial amqp://ops:s3cret@rabbit/)","at":` + slipT1 + `}}`
	got := printedSlip(t, map[string]any{slip.Header: doc})
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u202e", "\x7f", "hunter2", "s3cret"} {
		if strings.Contains(got, bad) {
			t.Errorf("the block holds %q:\n%s", bad, got)
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if !strings.HasPrefix(line, "  ") {
			t.Errorf("a line of the block a producer forged: %q\n%s", line, got)
		}
	}
	for _, want := range []string{
		`slip h\x1b]52;c;cHduZWQ=\x07 of m-1`,
		`where:          at stop 2 of 3: card\x1b[2J\nforged: row`,
		`itinerary:      card\x1b[2J\nforged: row → ship\u202egpj.exe`,
		`1. in\rto at 2026-12-02 08:00:00.123Z: "a\u001b[31m\nb"`,
		`"note":"x\u202e\u007fy\u001b[2J\n<script>alert(1)</script>"`,
		`"db":"postgres://svc:xxxxx@db/orders"`,
		`fault:          at card\x1b[2J, 2026-12-02 08:01:00.456Z: refused\x1b[1A\nacemq: all good (dial amqp://ops:`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the block lacks %s:\n%s", want, got)
		}
	}
}

// TestPeekSlipCLI: peek prints the slip under the table (and under a
// message's record with --body), cuts a long record with a note of how
// much, and --json holds the document whole with where it stands.
func TestPeekSlipCLI(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "card.charge")
	conn := b.Connect()
	defer conn.Close()
	long := `"` + strings.Repeat("0123456789", 60) + `"`
	doc := strings.Replace(slipRunning, `"record":{"reservation":"r-77"}`, `"record":`+long, 1)
	for _, p := range []transport.Publishing{
		{RoutingKey: "card.charge", Mandatory: true, Headers: map[string]any{acemq.HeaderID: "5a4c0e2e.1", slip.Header: doc}, Body: []byte(`{"order":7}`)},
		{RoutingKey: "card.charge", Mandatory: true, Headers: map[string]any{acemq.HeaderID: "bad-1", slip.Header: `{"v":2,"id":"x"}`}, Body: []byte(`{}`)},
		{RoutingKey: "card.charge", Mandatory: true, Headers: map[string]any{acemq.HeaderID: "plain-1"}, Body: []byte(`{}`)},
	} {
		if _, err := conn.Publish(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := cli(t, dial, "peek", "--url", "amqp://x/", "--queue", "card.charge", "--spend-deliveries")
	if code != 0 {
		t.Fatalf("status %d\n%s%s", code, out, errOut)
	}
	t.Logf("\n%s", out)
	for _, want := range []string{
		"ID          ATTEMPT  AGE  REASON\n5a4c0e2e.1  1        -    -\nbad-1       1        -    -\nplain-1     1        -    -\n\n  slip 5a4c0e2e (fulfil-order) of 5a4c0e2e.1\n",
		`    visited:        1. stock.reserve at 2026-12-02 08:00:00.123Z: "0123456789`,
		"… (362 more bytes; --json has it whole)\n",
		"\n  slip of bad-1 cannot be read: acemq: slip: version 2, this library reads version 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("peek lacks %q", want)
		}
	}
	if strings.Contains(out, "of plain-1") {
		t.Error("a message without a slip shows one")
	}
	code, out, _ = cli(t, dial, "peek", "--url", "amqp://x/", "--queue", "card.charge", "--spend-deliveries", "--body", "--limit", "1")
	if code != 0 || !strings.Contains(out, "  body:   {\"order\":7}\n  slip 5a4c0e2e (fulfil-order) of 5a4c0e2e.1\n    state:") {
		t.Errorf("--body: %d\n%s", code, out)
	}

	code, out, errOut = cli(t, dial, "peek", "--url", "amqp://x/", "--queue", "card.charge", "--spend-deliveries", "--json")
	var got struct {
		Messages []struct {
			ID   string          `json:"id"`
			Slip json.RawMessage `json:"slip"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Messages) != 3 {
		t.Fatalf("%d %v\n%s%s", code, err, out, errOut)
	}
	var ok struct {
		Document *slip.Document `json:"document"`
		Position slipPosition   `json:"position"`
	}
	if err := json.Unmarshal(got.Messages[0].Slip, &ok); err != nil || ok.Document == nil {
		t.Fatalf("%v %s", err, got.Messages[0].Slip)
	}
	wantPos := slipPosition{Summary: "at stop 2 of 3: card.charge", Stop: "card.charge", Step: 2, Steps: 3, NextCompensation: "stock.release", Compensations: 1}
	if ok.Position != wantPos || ok.Document.ID != "5a4c0e2e" || string(ok.Document.Visited[0].Record) != long ||
		string(ok.Document.Variables["reservation"]) != `"r-77"` || ok.Document.Faulted.Exchange != "orders.events" {
		t.Errorf("the slip in JSON: %s", got.Messages[0].Slip)
	}
	var bad map[string]any
	if err := json.Unmarshal(got.Messages[1].Slip, &bad); err != nil || len(bad) != 1 || bad["error"] != "acemq: slip: version 2, this library reads version 1" {
		t.Errorf("the unreadable slip in JSON: %s", got.Messages[1].Slip)
	}
	if got.Messages[2].Slip != nil {
		t.Errorf("a message without a slip: %s", got.Messages[2].Slip)
	}
	if n := depth(t, conn, "card.charge"); n != 3 {
		t.Errorf("card.charge holds %d after peek, not 3", n)
	}
}

// TestPeekSlipDocumented: docs/cli.md shows a slip's dead letter as peek
// prints it.
func TestPeekSlipDocumented(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "shipping.ship")
	conn := b.Connect()
	defer conn.Close()
	_, err := conn.Publish(context.Background(), transport.Publishing{RoutingKey: "shipping.ship.dlq", Mandatory: true,
		Headers: map[string]any{acemq.HeaderID: "5a4c0e2e.2", acemq.HeaderAttempt: 5, acemq.HeaderError: "exhausted 5 attempts: no courier",
			acemq.HeaderCreated: b.Clock().Now().Add(-3 * time.Minute).UnixMilli(),
			slip.Header:         strings.Replace(slipCompensating, `"variables":{}`, `"variables":{"order":7,"reservation":"r-77","payment":"p-9"}`, 1)},
		Body: []byte(`{"order":7}`)})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, dial, "peek", "--url", "amqp://x/", "--queue", "shipping.ship.dlq")
	if code != 0 {
		t.Fatalf("%d\n%s%s", code, out, errOut)
	}
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "$ acemq peek --queue shipping.ship.dlq\n" + out + "```\n"; !strings.Contains(string(doc), want) {
		t.Errorf("docs/cli.md lacks peek's slip example:\n%s", want)
	}
}

// FuzzPeekSlip: whatever a producer put in x-acemq-slip, peek's slip
// block is printed without a panic, every line of it indented under its
// message and safe for a terminal, and --json's slip object encodes.
func FuzzPeekSlip(f *testing.F) {
	for _, s := range []string{slipRunning, slipCompensating, slipHalf, slipCompleted, `{"v":1,"id":"x","state":"running"}`,
		`{"v":1,"id":"x","visited":[{"stop":"\u001b","record":"\u202e` + "\xff\x7f" + `"}],"variables":{"a":[1,{"b":null}]}}`, `{"v":2}`, `[]`, `null`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		ps := readSlip(map[string]any{slip.Header: header, slip.EventHeader: header})
		if ps == nil {
			t.Fatal("a slip header read as none")
		}
		var b bytes.Buffer
		printSlip(&b, "m-1", viewSlip(ps, noHide))
		for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if !strings.HasPrefix(line, "  ") || !escape.IsSafe(line) {
				t.Fatalf("an unsafe line %q of\n%s", line, b.String())
			}
		}
		if _, err := json.Marshal(ps); err != nil {
			t.Fatalf("--json: %v", err)
		}
	})
}
