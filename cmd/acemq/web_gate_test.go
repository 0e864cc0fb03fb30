package main

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/transport"
)

// redelivered counts the messages of q marked redelivered, reading them
// all and giving them back (which marks them: call it last).
func redelivered(t *testing.T, tr transport.Transport, q string) (n, total int) {
	t.Helper()
	counts, n := deliveries(t, tr, q, false)
	return n, len(counts)
}

// dashboardRequests are every GET and POST of the dashboard, as a page on
// another site would make them, with the forms filled in as the
// dashboard's own would be (the token included: another site cannot know
// it, but even with it a request from another site is refused).
func dashboardRequests(w *webUI, q, group string) []struct {
	method, path string
	form         url.Values
} {
	tok := w.token
	return []struct {
		method, path string
		form         url.Values
	}{
		{"GET", "/", nil},
		{"GET", "/triage?queue=" + url.QueryEscape(q) + "&k=" + w.key, nil},
		{"GET", "/message?queue=" + url.QueryEscape(q) + "&id=m-1&k=" + w.key, nil},
		{"POST", "/triage?queue=" + url.QueryEscape(q), url.Values{"token": {tok}, "confirm": {"yes"}}},
		{"POST", "/message?queue=" + url.QueryEscape(q) + "&id=m-1", url.Values{"token": {tok}, "confirm": {"yes"}}},
		{"POST", "/replay", url.Values{"token": {tok}, "queue": {q}, "group": {group}}},
		{"POST", "/discard", url.Values{"token": {tok}, "queue": {q}, "group": {group}, "to_queue": {q + ".archive"}, "why": {"x"}}},
	}
}

// TestWebCrossSite: whatever another site makes the browser ask (every
// GET and POST, with what Chromium says of where it comes from), the
// dashboard refuses it before it reads anything: nothing moved, nothing
// marked redelivered. The same reads from the dashboard's own page do
// mark them, which shows the check would see a read.
func TestWebCrossSite(t *testing.T) {
	t.Parallel()
	reasons, _ := mixedReasons()
	srv, w, tr := webSetup(t, true, "orders", reasons...)
	group := "g00000000"
	from := []http.Header{
		{"Sec-Fetch-Site": {"cross-site"}},
		{"Sec-Fetch-Site": {"same-site"}, "Origin": {"http://127.0.0.1:1"}}, // another port of the same host
		{"Sec-Fetch-Site": {"same-site"}},
		{"Origin": {"http://127.0.0.1:1"}},
		{"Origin": {"null"}}, // a sandboxed iframe, a data: URL
		{"Sec-Fetch-Site": {"same-origin"}, "Origin": {"http://evil.example"}},
	}
	for _, h := range from {
		for _, req := range dashboardRequests(w, "orders.dlq", group) {
			code, page := send(t, srv, req.method, req.path, h, req.form)
			if code != http.StatusForbidden || !strings.Contains(page, "refused a request from another site") {
				t.Errorf("%s %s with %v: %d\n%s", req.method, req.path, h, code, page)
			}
		}
	}
	if n := depth(t, tr, "orders.dlq"); n != len(reasons) || depth(t, tr, "orders") != 0 {
		t.Errorf("something moved: %d in orders.dlq", n)
	}
	if n, total := redelivered(t, tr, "orders.dlq"); n != 0 || total != len(reasons) {
		t.Errorf("%d of %d marked redelivered by requests from another site", n, total)
	}
	// The control, on a dashboard of its own: the same page from the
	// dashboard's own link reads, and the check sees it.
	srv2, _, tr2 := webSetup(t, true, "orders", reasons...)
	if code, _ := get(t, srv2, "/triage?queue=orders.dlq"); code != 200 {
		t.Fatalf("same-origin triage: %d", code)
	}
	if n, total := redelivered(t, tr2, "orders.dlq"); n != total || total != len(reasons) {
		t.Errorf("the control read marked %d of %d", n, total)
	}
}

// TestWebNavigation: a page that reads a queue answers a link followed
// (same-origin), an address typed (none), or, from a browser that sends no
// Sec-Fetch-Site, a link that carries the key; not a bare request. The
// status page reads no message and answers any request from no other site.
func TestWebNavigation(t *testing.T) {
	t.Parallel()
	reasons, _ := mixedReasons()
	srv, w, tr := webSetup(t, false, "orders", reasons...)
	for _, c := range []struct {
		path string
		h    http.Header
		want int
	}{
		{"/", nil, 200},
		{"/triage?queue=orders.dlq", nil, 403},
		{"/triage?queue=orders.dlq&k=" + strings.Repeat("0", len(w.key)), nil, 403},
		{"/message?queue=orders.dlq&id=m-1", nil, 403},
		{"/triage?queue=orders.dlq&k=" + w.key, nil, 200},
		{"/message?queue=orders.dlq&id=m-1&k=" + w.key, nil, 200},
		{"/triage?queue=orders.dlq", http.Header{"Sec-Fetch-Site": {"none"}}, 200},
		{"/triage?queue=orders.dlq", sameOrigin, 200},
	} {
		code, page := send(t, srv, http.MethodGet, c.path, c.h, nil)
		if code != c.want {
			t.Errorf("GET %s with %v: %d, want %d\n%s", c.path, c.h, code, c.want, page)
		}
	}
	// The dashboard's own forms must carry their Origin: under
	// Referrer-Policy no-referrer Chromium sends "Origin: null", refused.
	resp, err := srv.Client().Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if p := resp.Header.Get("Referrer-Policy"); p != "same-origin" {
		t.Errorf("Referrer-Policy %q", p)
	}
	// A read-only dashboard's token confirms a read, never an action.
	if code, _ := post(t, srv, "/replay", url.Values{"token": {w.token}, "queue": {"orders.dlq"}, "group": {"g"}}); code != 403 {
		t.Errorf("a read-only replay: %d", code)
	}
	if n := depth(t, tr, "orders.dlq"); n != len(reasons) {
		t.Errorf("orders.dlq holds %d", n)
	}
}

// TestWebRefusesWorkQueues: a work queue, a rung and a delay level are not
// read (nor replayed from) unless named with --allow-read; nothing of
// them is touched.
func TestWebRefusesWorkQueues(t *testing.T) {
	t.Parallel()
	srv, w, tr := webSetup(t, true, "orders", "exhausted 5 attempts: boom")
	if _, err := tr.Publish(context.Background(), transport.Publishing{RoutingKey: "orders", Mandatory: true, Headers: map[string]any{acemq.HeaderID: "w-1"}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"orders", "orders.retry.5s", delay.Level(3), delay.Undeliverable} {
		for _, path := range []string{"/triage?queue=" + url.QueryEscape(q), "/message?queue=" + url.QueryEscape(q) + "&id=w-1"} {
			code, page := get(t, srv, path)
			if code != 403 || !strings.Contains(page, "acemq web reads only .dlq, .parked and archive queues") || !strings.Contains(page, "--allow-read "+q) {
				t.Errorf("%s: %d\n%s", path, code, page)
			}
		}
		code, page := post(t, srv, "/replay", url.Values{"token": {w.token}, "queue": {q}, "group": {"g"}})
		if code != 403 || !strings.Contains(page, "reads only") {
			t.Errorf("replay from %s: %d\n%s", q, code, page)
		}
	}
	if n, total := redelivered(t, tr, "orders"); n != 0 || total != 1 {
		t.Errorf("orders: %d of %d redelivered", n, total)
	}
}

// TestWebConfirms: a read that costs more than the redelivered mark (a
// queue named with --allow-read, a delivery limit, a cost that cannot be
// told) is shown with its cost and made only once confirmed by a POST
// with the token; the page it shows says the cost.
func TestWebConfirms(t *testing.T) {
	t.Parallel()
	limited := map[string]map[string]any{"orders.dlq": {"type": "quorum", "arguments": map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 3}, "effective_policy_definition": map[string]any{}}}
	for _, c := range []struct {
		name    string
		cfg     webConfig
		details map[string]map[string]any
		queue   string
		says    []string
	}{
		{"allow-read", webConfig{readable: []string{"orders"}}, nil, "orders", []string{"orders is not a .dlq, .parked or archive queue (it was named with --allow-read)", "orders is a work queue (classic), whose messages are its consumers&#39; work"}},
		{"delivery limit", webConfig{}, limited, "orders.dlq", []string{"this read counts against a delivery limit", "it has a delivery limit of 3 (its x-delivery-limit argument)", "dropped by the broker"}},
		{"unknown", webConfig{}, map[string]map[string]any{"orders.dlq": nil}, "orders.dlq", []string{"what this read costs cannot be told", "management API"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, w, tr := webSetupWith(t, c.cfg, "orders", c.details, "exhausted 5 attempts: boom")
			if c.queue == "orders" {
				if _, err := tr.Publish(context.Background(), transport.Publishing{RoutingKey: "orders", Mandatory: true, Headers: map[string]any{acemq.HeaderID: "w-1"}}); err != nil {
					t.Fatal(err)
				}
			}
			for _, path := range []string{"/triage?queue=" + c.queue, "/message?queue=" + c.queue + "&id=m-1"} {
				code, page := get(t, srv, path)
				if code != 200 || !strings.Contains(page, `id="confirm"`) || strings.Contains(page, `id="summary"`) || strings.Contains(page, `id="envelope"`) {
					t.Fatalf("%s: %d\n%s", path, code, page)
				}
				for _, s := range c.says {
					if !strings.Contains(page, s) {
						t.Errorf("%s does not say %q:\n%s", path, s, page)
					}
				}
				// The form posts back to the page with the token.
				action := html.UnescapeString(regexp.MustCompile(`<form method="post" id="confirm" action="([^"]*)"`).FindStringSubmatch(page)[1])
				if !strings.HasPrefix(action, path[:strings.Index(path, "?")]+"?") || !strings.Contains(page, `name="token" value="`+w.token+`"`) {
					t.Errorf("the confirm form: %s", action)
				}
				// Without the token (or without confirm), still only asked.
				for _, form := range []url.Values{{"confirm": {"yes"}}, {"token": {"nope"}, "confirm": {"yes"}}, {"token": {w.token}}} {
					if code, page := post(t, srv, action, form); code != 200 || !strings.Contains(page, `id="confirm"`) {
						t.Errorf("POST %s %v: %d", action, form, code)
					}
				}
			}
			if n, _ := redelivered(t, tr, c.queue); n != 0 {
				t.Fatalf("read before it was confirmed: %d redelivered", n)
			}
			code, page := post(t, srv, "/triage?queue="+c.queue, url.Values{"token": {w.token}, "confirm": {"yes"}})
			if code != 200 || !strings.Contains(page, `<span id="read">1</span>`) || !strings.Contains(page, `id="cost"`) {
				t.Errorf("confirmed triage: %d\n%s", code, page)
			}
			id := "m-1"
			if c.queue == "orders" {
				id = "w-1"
			}
			code, page = post(t, srv, "/message?queue="+c.queue+"&id="+id, url.Values{"token": {w.token}, "confirm": {"yes"}})
			if code != 200 || !strings.Contains(page, `id="envelope"`) {
				t.Errorf("confirmed message: %d\n%s", code, page)
			}
		})
	}
}

// awkwardIDs are ids a producer may well use (Outgoing.ID's doc suggests
// "welcome-email:evt-42") that a URL must carry escaped, once.
var awkwardIDs = []string{
	"welcome-email:evt-42", "with space", "a+b", "100%", "50%25", "a&b=c", "frag#ment", "path/to/x", "what?", "semi;colon",
	"naïve-ünïcödé-日本", "quote\"and'apos", "<b>tag</b>", "trailing ", "plus+and space %41",
	strings.Repeat("L", 255), strings.Repeat("é", 200), // 255 characters; 400 bytes
}

var reShownID = regexp.MustCompile(`<tr><th>id</th><td><code>([^<]*)</code></td></tr>`)

// TestWebSampleLinks: each group's sample link leads to its message, for
// every awkward id.
func TestWebSampleLinks(t *testing.T) {
	t.Parallel()
	srv, _, tr := webSetup(t, false, "orders")
	for i, id := range awkwardIDs {
		seedDeadLetter(t, tr, "orders", id, "the handler rejected it: case "+strings.Repeat("x", i+1), time.Now())
	}
	_, page := get(t, srv, "/triage?queue=orders.dlq")
	links := regexp.MustCompile(`<a class="sample" href="([^"]*)">`).FindAllStringSubmatch(page, -1)
	if len(links) != len(awkwardIDs) {
		t.Fatalf("%d sample links for %d groups", len(links), len(awkwardIDs))
	}
	found := map[string]bool{}
	for _, l := range links {
		href := html.UnescapeString(l[1])
		u, err := url.Parse(href)
		if err != nil {
			t.Fatal(err)
		}
		id := u.Query().Get("id")
		code, msg := get(t, srv, href)
		shown := reShownID.FindStringSubmatch(msg)
		if code != 200 || shown == nil || html.UnescapeString(shown[1]) != escape.String(id) {
			t.Errorf("%q (%s): %d\n%s", id, href, code, msg)
		}
		found[id] = true
	}
	for _, id := range awkwardIDs {
		if !found[id] {
			t.Errorf("no link carries %q", id)
		}
	}
}

// TestWebDelayTotal: the status page adds the delay levels up in one row,
// as acemq status does, and lists only the levels that hold messages
// (and the undeliverable queue).
func TestWebDelayTotal(t *testing.T) {
	t.Parallel()
	srv, _, tr := webSetup(t, false, "orders")
	if err := tr.Declare(context.Background(), delay.Topology()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := tr.Publish(context.Background(), transport.Publishing{RoutingKey: delay.Level(5), Mandatory: true, Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	_, page := get(t, srv, "/")
	total := row(page, delay.Prefix+".*")
	if !strings.Contains(total, `<td id="levels">28 levels</td>`) || readyIn(page, delay.Prefix+".*") != "3" {
		t.Errorf("the delay total:\n%s\n%s", total, page)
	}
	rows := strings.Count(page, `data-queue="`+delay.Prefix+".")
	if rows != 3 || row(page, delay.Level(5)) == "" || row(page, delay.Undeliverable) == "" {
		t.Errorf("%d delay rows, want the total, level 5 and the undeliverable queue:\n%s", rows, page)
	}
}
