package main

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/slip"
	"github.com/acemq/acemq/transport"
)

// TestWebMessageSlip: the message page shows a routing slip's block as
// peek prints it, every byte of it escaped for HTML (a <script> in a
// variable is text) and for a person (an ANSI escape shows as \x1b), and
// an unreadable slip as such with the rest of the message.
func TestWebMessageSlip(t *testing.T) {
	t.Parallel()
	srv, _, tr := webSetup(t, false, "orders")
	doc := `{"v":1,"id":"s-1","name":"fulfil<b>","state":"compensating","itinerary":[],
	 "visited":[{"stop":"stock.reserve","at":` + slipT0 + `,"record":{"r":"</code><script>alert(1)</script>"}}],
	 "variables":{"note":"<script>alert(2)</script>","db":"postgres://svc:hunter2@db/"},
	 "compensations":[{"stop":"stock.reserve","queue":"stock.release"}],"compensated":[],
	 "fault":{"stop":"card.charge","reason":"declined\u001b[2J<img src=x onerror=alert(3)>","at":` + slipT1 + `}}`
	for _, p := range []transport.Publishing{
		{RoutingKey: "orders.dlq", Mandatory: true, Headers: map[string]any{acemq.HeaderID: "s-1.c1", acemq.HeaderError: "exhausted", slip.Header: doc}, Body: []byte(`{}`)},
		{RoutingKey: "orders.dlq", Mandatory: true, Headers: map[string]any{acemq.HeaderID: "bad-1", slip.Header: int64(7)}, Body: []byte(`{"kept":1}`)},
	} {
		if _, err := tr.Publish(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	code, page := get(t, srv, "/message?queue=orders.dlq&id="+url.QueryEscape("s-1.c1"))
	if code != 200 {
		t.Fatalf("%d\n%s", code, page)
	}
	i := strings.Index(page, `<h2 id="slip-title">`)
	j := strings.Index(page, `<h2>body`)
	if i < 0 || j < i {
		t.Fatalf("no slip block:\n%s", page)
	}
	block := page[i:j]
	for _, bad := range []string{"<script", "<img", "<b>", "\x1b"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	if strings.Contains(block, "hunter2") {
		t.Errorf("the slip block shows a password:\n%s", block)
	}
	for _, want := range []string{
		`routing slip s-1 (fulfil&lt;b&gt;)`,
		`<tr><th>where</th><td><code>compensating: next stock.release (0 run, 1 to run)</code></td></tr>`,
		`<code>1. stock.reserve at 2026-12-02 08:00:00.123Z: {&#34;r&#34;:&#34;&lt;/code&gt;&lt;script&gt;alert(1)&lt;/script&gt;&#34;}</code>`,
		`&#34;note&#34;:&#34;&lt;script&gt;alert(2)&lt;/script&gt;&#34;`,
		`&#34;db&#34;:&#34;postgres://svc:xxxxx@db/&#34;`,
		`<tr><th>fault</th><td><code>at card.charge, 2026-12-02 08:01:00.456Z: declined\x1b[2J&lt;img src=x onerror=alert(3)&gt;</code></td></tr>`,
	} {
		if !strings.Contains(block, want) {
			t.Errorf("the slip block lacks %s:\n%s", want, block)
		}
	}
	code, page = get(t, srv, "/message?queue=orders.dlq&id=bad-1")
	if code != 200 || !strings.Contains(page, `<p class="err" id="slip-error">It cannot be read: acemq: slip: x-acemq-slip is a int64, not a JSON string</p>`) ||
		!strings.Contains(page, `<pre id="body">{&#34;kept&#34;:1}</pre>`) {
		t.Errorf("the unreadable slip: %d\n%s", code, page)
	}
}
