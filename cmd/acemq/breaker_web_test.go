package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestWebStatusShowsABreaker: the status page shows an open breaker on its
// service (state, since, until, why, instance), its why escaped for HTML
// (a <script> is text) and for the terminal's escapes, and its password
// redacted; a half-open one beside it.
func TestWebStatusShowsABreaker(t *testing.T) {
	t.Parallel()
	_, dial := memoryBroker(t, "orders")
	tr, err := dial(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	why := `warehouse: <script>alert(1)</script> dial amqp://guest:guest@db: "refused"` + "\x1b[2J\n"
	until := breakerUntil
	queues := map[string]map[string]any{}
	for _, item := range []string{
		markerItem("orders.breaker.web-3", contractArgs("orders", "open", "web-3", why, breakerSince, &until), true),
		markerItem("orders.breaker.web-1", contractArgs("orders", "half-open", "web-1", "12 of the last 20 counted failures", breakerSince, nil), true),
		markerItem("orders.dlq", "{}", false),
		markerItem("orders.parked", "{}", false),
		markerItem("orders", "{}", false),
	} {
		var q map[string]any
		if err := json.Unmarshal([]byte(item), &q); err != nil {
			t.Fatal(err)
		}
		queues[q["name"].(string)] = q
	}
	fake := fakeManagement(t, "3.10.8", true, queues)
	mc, err := newMgmtClient(fake.URL, "amqp://guest:guest@localhost/", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &app{ctx: context.Background(), dial: dial, getenv: func(string) string { return "" }, now: func() time.Time { return breakerNow },
		stdout: io.Discard, stderr: io.Discard, url: "amqp://guest:guest@localhost/"}
	w, err := newWebUI(a, tr, webConfig{vhost: "/", mgmt: mc, operator: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)

	code, page := get(t, srv, "/")
	if code != http.StatusOK {
		t.Fatalf("%d\n%s", code, page)
	}
	open := breakerRow(page, "web-3")
	for _, want := range []string{
		`<span class="badge open">breaker open</span> on <code class="instance">web-3</code>`,
		`<span class="when">since 09:01:02Z (12m ago), probes at 09:13:50Z (in 48s)</span>`,
		`<span class="why">warehouse: &lt;script&gt;alert(1)&lt;/script&gt; dial amqp://xxxxx:xxxxx@db: &#34;refused&#34;\x1b[2J\n</span>`,
	} {
		if !strings.Contains(open, want) {
			t.Errorf("the open breaker's row lacks %s:\n%s", want, open)
		}
	}
	if half := breakerRow(page, "web-1"); !strings.Contains(half, `<span class="badge half-open">breaker half-open</span>`) ||
		!strings.Contains(half, "since 09:01:02Z (12m ago), probing one message at a time") {
		t.Errorf("the half-open breaker's row:\n%s", half)
	}
	// Under its service: after orders' rows, before anything else.
	if i, j := strings.Index(page, `data-queue="orders.parked"`), strings.Index(page, `data-breaker="web-1"`); i < 0 || j < i {
		t.Errorf("the breakers are not under orders:\n%s", page)
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "\x1b") || strings.Contains(page, "guest:guest") ||
		strings.Contains(page, `data-queue="orders.breaker.`) || !strings.Contains(page, `id="breakers"`) || !strings.Contains(page, `<span id="not-closed">2 circuit breakers</span> not closed.`) {
		t.Errorf("the page:\n%s", page)
	}
}

// breakerRow is the row of instance's breaker on the status page.
func breakerRow(page, instance string) string {
	i := strings.Index(page, `data-breaker="`+instance+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(page[i:], "</tr>")
	return page[i : i+j]
}
