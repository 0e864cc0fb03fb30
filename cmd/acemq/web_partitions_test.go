package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/triage"
)

// webPartitionsListing is cannedPartitions (orders: three partitions,
// orders.p1 holding the backlog and the dead letters, orders.p2 without a
// consumer; ledger: three ordered ones, the tag of ledger.p1's active
// consumer holding ESC[2J) with an open breaker on orders.p1 whose why
// quotes a URL with its password and a <script>, and a partitioned queue
// whose name a producer chose with markup and a right-to-left override.
func webPartitionsListing(t *testing.T) string {
	t.Helper()
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(cannedPartitions), &items); err != nil {
		t.Fatal(err)
	}
	until := breakerUntil
	why := `stock: <script>alert(1)</script> dial amqp://ops:pw@db.internal: refused` + "\x1b[2J"
	for _, item := range []string{
		markerItem("orders.p1.breaker.web-3", contractArgs("orders.p1", "open", "web-3", why, breakerSince, &until), true),
		`{"name":"<b>ship` + "\u202e" + `.p0","type":"classic","state":"running","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":1}`,
		`{"name":"<b>ship` + "\u202e" + `.p0.dlq","type":"classic","state":"running","messages":0,"messages_ready":0,"messages_unacknowledged":0,"consumers":0}`,
	} {
		items = append(items, json.RawMessage(item))
	}
	b, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// webOn serves the dashboard on the management API at mgmtURL for vhost
// prod, as user ops.
func webOn(t *testing.T, mgmtURL string, cfg webConfig) (*httptest.Server, *webUI) {
	t.Helper()
	_, dial := memoryBroker(t, "unused")
	tr, err := dial(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	a := &app{ctx: context.Background(), dial: dial, getenv: func(string) string { return "" }, now: func() time.Time { return breakerNow },
		stdout: io.Discard, stderr: io.Discard, url: "amqp://ops:pw@rabbit.internal/prod"}
	mc, err := newMgmtClient(mgmtURL, a.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.vhost, cfg.mgmt, cfg.operator = "prod", mc, "alice"
	w, err := newWebUI(a, tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	return srv, w
}

// cells are a row's cells, by class (ready, unacked, consumers, dlq,
// parked, retrying, node, active, state).
var reCell = regexp.MustCompile(`<td class="(?:n )?(ready|unacked|consumers|dlq|parked|retrying|node|active|state)">(.*?)</td>`)

func cells(row string) map[string]string {
	m := map[string]string{}
	for _, c := range reCell.FindAllStringSubmatch(row, -1) {
		m[c[1]] = c[2]
	}
	return m
}

// table is the page's table with id, "" when there is none.
func table(page, id string) string {
	i := strings.Index(page, `<table id="`+id+`">`)
	if i < 0 {
		return ""
	}
	return page[i : i+strings.Index(page[i:], "</table>")]
}

// TestWebStatusPartitions: the status page shows a partitioned queue as
// acemq status does: one line of totals, a line per partition under it
// (its counts, node, triage links to its .dlq and .parked), an
// active-consumer column for the ordered ones, the partition without a
// consumer marked and said in a note, a partition's breaker under its
// partition with its why redacted and escaped; the plain table keeps the
// plain services only; every name and tag escaped.
func TestWebStatusPartitions(t *testing.T) {
	t.Parallel()
	mgmt := managementAPI(t, "prod", webPartitionsListing(t))
	srv, w := webOn(t, mgmt.URL, webConfig{})
	code, page := get(t, srv, "/")
	if code != http.StatusOK {
		t.Fatalf("%d\n%s", code, page)
	}
	if !strings.Contains(page, `<span id="services">4</span> services`) || !strings.Contains(page, `<span id="not-closed">1 circuit breaker</span> not closed`) {
		t.Errorf("the summary:\n%s", page)
	}
	plain, parts := table(page, "status"), table(page, "partitions")
	if !strings.Contains(plain, `data-queue="billing.dlq"`) || strings.Contains(plain, ".p0") || strings.Contains(plain, "orders") {
		t.Errorf("the plain table holds the plain services only:\n%s", plain)
	}
	if !strings.Contains(parts, "<th>active consumer</th>") {
		t.Errorf("an ordered set and no active-consumer column:\n%s", parts)
	}

	for _, c := range []struct {
		queue string
		label string
		want  map[string]string
	}{
		{"orders", "<td>orders (3 partitions)</td>", map[string]string{"ready": "904", "unacked": "3", "consumers": "2", "dlq": "6", "parked": "1", "retrying": "3", "node": "3 nodes", "state": "running"}},
		{"orders.p0", "&nbsp;&nbsp;orders.p0</td>", map[string]string{"ready": "1", "unacked": "1", "consumers": "1", "dlq": "0", "parked": "0", "retrying": "3", "node": "rabbit@a", "active": ""}},
		{"orders.p1", "&nbsp;&nbsp;orders.p1</td>", map[string]string{"ready": "898", "consumers": "1", "dlq": "6", "parked": "1", "node": "rabbit@b"}},
		{"orders.p2", "&nbsp;&nbsp;orders.p2</td>", map[string]string{"ready": "5", "consumers": "0", "node": "rabbit@c"}},
		{"ledger", "<td>ledger (3 partitions, ordered)</td>", map[string]string{"ready": "?", "consumers": "?", "dlq": "0", "parked": "-", "state": "2 running, 1 idle"}},
		{"ledger.p0", "", map[string]string{"consumers": "2", "active": "acemq-ledger.p0-1"}},
		{"ledger.p1", "", map[string]string{"active": `acemq-ledger.p1-\x1b[2J`}},
		{"ledger.p2", "", map[string]string{"ready": "?", "active": "?", "state": "idle"}},
	} {
		r := row(parts, c.queue)
		if r == "" || !strings.Contains(r, c.label) {
			t.Errorf("%s: no row with %s:\n%s", c.queue, c.label, parts)
			continue
		}
		got := cells(r)
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s %q, want %q\n%s", c.queue, k, got[k], v, r)
			}
		}
	}
	// The partition's links to its own set-aside queues, with the key.
	p1 := row(parts, "orders.p1")
	for _, link := range []string{`href="/triage?queue=orders.p1.dlq&amp;k=` + w.key + `"`, `href="/triage?queue=orders.p1.parked&amp;k=` + w.key + `"`} {
		if !strings.Contains(p1, link) {
			t.Errorf("orders.p1 lacks %s:\n%s", link, p1)
		}
	}
	// orders.p2 has no consumer while the others have one; a set whose
	// partitions all have none is said by its counts, not by the note.
	if p2 := row(parts, "orders.p2"); !strings.Contains(parts, `<tr class="partition idle" data-queue="orders.p2">`) || !strings.Contains(p2, "(no consumer)") {
		t.Errorf("orders.p2 is not marked without a consumer:\n%s", p2)
	}
	if strings.Contains(row(parts, "orders.p1"), "(no consumer)") || strings.Contains(row(parts, "ledger.p2"), "(no consumer)") {
		t.Errorf("a partition marked that has a consumer, or whose count is not known:\n%s", parts)
	}
	if !strings.Contains(page, `<p class="warn" id="idle">No consumer on orders.p2, while other partitions of orders have one`) {
		t.Errorf("no note on orders.p2:\n%s", page)
	}
	// The breaker under its partition: after orders.p1's line, before orders.p2's.
	b := breakerRow(parts, "web-3")
	for _, want := range []string{`<td colspan="13">`, `<span class="badge open">breaker open</span>`, `since 09:01:02Z (12m ago), probes at 09:13:50Z (in 48s)`,
		`<span class="why">stock: &lt;script&gt;alert(1)&lt;/script&gt; dial amqp://ops:xxxxx@db.internal: refused\x1b[2J</span>`} {
		if !strings.Contains(b, want) {
			t.Errorf("the breaker's row lacks %s:\n%s", want, b)
		}
	}
	if i, j, k := strings.Index(parts, `data-queue="orders.p1"`), strings.Index(parts, `data-breaker="web-3"`), strings.Index(parts, `data-queue="orders.p2"`); !(i >= 0 && i < j && j < k) {
		t.Errorf("the breaker is not under orders.p1:\n%s", parts)
	}
	if !strings.Contains(page, `id="breakers"`) {
		t.Errorf("no note on the breaker:\n%s", page)
	}
	// What a producer chose, escaped for the terminal and for HTML.
	if !strings.Contains(parts, `<td>&lt;b&gt;ship\u202e (1 partition)</td>`) || !strings.Contains(parts, `&nbsp;&nbsp;&lt;b&gt;ship\u202e.p0</td>`) {
		t.Errorf("the set named with markup:\n%s", parts)
	}
	for _, bad := range []string{"<script>", "\x1b", "\u202e", "<b>", "ops:pw"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q:\n%s", bad, page)
		}
	}
}

// TestWebStatusPartitionsUnordered: without an ordered set, no
// active-consumer column, and the breaker's row spans the twelve.
func TestWebStatusPartitionsUnordered(t *testing.T) {
	t.Parallel()
	var items []map[string]any
	if err := json.Unmarshal([]byte(webPartitionsListing(t)), &items); err != nil {
		t.Fatal(err)
	}
	var kept []map[string]any
	for _, q := range items {
		if !strings.HasPrefix(q["name"].(string), "ledger") {
			kept = append(kept, q)
		}
	}
	listing, err := json.Marshal(kept)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := webOn(t, managementAPI(t, "prod", string(listing)).URL, webConfig{})
	code, page := get(t, srv, "/")
	parts := table(page, "partitions")
	if code != http.StatusOK || parts == "" || strings.Contains(parts, "active") || !strings.Contains(breakerRow(parts, "web-3"), `<td colspan="12">`) {
		t.Errorf("%d\n%s", code, page)
	}
}

// TestWebPartitionsByDeclare: without the management API's listing, the
// dashboard started with --queue orders finds orders.p0 .. orders.p2 by
// passive declare, shows them as one service with a partition's dead
// letter in its line and the total, and the partition's triage link
// leads to the triage of its .dlq, which holds it.
func TestWebPartitionsByDeclare(t *testing.T) {
	t.Parallel()
	b, dial := partitionedBroker(t, "orders", 3)
	tr, err := dial(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	seedDeadLetter(t, tr, "orders.p1", "m-1", "exhausted 5 attempts: <b>timeout</b>\x1b[2J", b.Clock().Now())
	classic := map[string]any{"type": "classic", "arguments": map[string]any{}, "effective_policy_definition": map[string]any{}}
	fake := fakeManagement(t, "3.10.8", false, map[string]map[string]any{"orders.p0.dlq": classic, "orders.p1.dlq": classic, "orders.p2.dlq": classic})
	mc, err := newMgmtClient(fake.URL, "amqp://guest:guest@localhost/", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &app{ctx: context.Background(), dial: dial, getenv: func(string) string { return "" }, now: time.Now, stdout: io.Discard, stderr: io.Discard, url: "amqp://guest:guest@localhost/"}
	w, err := newWebUI(a, tr, webConfig{vhost: "/", mgmt: mc, queues: []string{"orders"}, operator: "alice", allowActions: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)

	code, page := get(t, srv, "/")
	parts := table(page, "partitions")
	if code != http.StatusOK || !strings.Contains(page, `<span id="services">1</span> service`) || table(page, "status") != "" || strings.Contains(parts, "missing") {
		t.Fatalf("%d\n%s", code, page)
	}
	if got := cells(row(parts, "orders")); got["dlq"] != "1" || got["ready"] != "0" || got["unacked"] != "-" || !strings.Contains(row(parts, "orders"), "orders (3 partitions)") {
		t.Errorf("the totals %v:\n%s", got, parts)
	}
	if got := cells(row(parts, "orders.p1")); got["dlq"] != "1" || got["parked"] != "0" {
		t.Errorf("orders.p1 %v:\n%s", got, parts)
	}
	m := regexp.MustCompile(`href="(/triage\?queue=orders.p1.dlq&amp;k=[0-9a-f]+)"`).FindStringSubmatch(row(parts, "orders.p1"))
	if m == nil {
		t.Fatalf("no triage link on orders.p1:\n%s", parts)
	}
	link, err := url.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
	if err != nil {
		t.Fatal(err)
	}
	// followed from a browser that sends no Sec-Fetch-Site: the key lets it through
	code, tri := send(t, srv, http.MethodGet, link.String(), nil, nil)
	id := triage.ID(triage.Key("exhausted 5 attempts: <b>timeout</b>\x1b[2J"))
	if code != http.StatusOK || !strings.Contains(tri, `<span id="depth">1</span> ready`) || !strings.Contains(tri, `id="`+id+`" data-count="1"`) ||
		strings.Contains(tri, "<b>timeout") || strings.Contains(tri, "\x1b") {
		t.Errorf("%d\n%s", code, tri)
	}
	if n := depth(t, tr, "orders.p1.dlq"); n != 1 {
		t.Errorf("the triage left %d in orders.p1.dlq, want 1", n)
	}
	if !strings.Contains(tri, `<button type="submit" class="replay">`) {
		t.Errorf("a partition's own page has no replay button:\n%s", tri)
	}
}

// TestWebTriagePartitionSet: the set line's link leads to the triage of
// every partition's .dlq at once (orders.p*.dlq): the groups across the
// partitions, each saying how many each holds with a link to that
// partition's page, its sample linked in the partition it was read
// from, no button (a move is made from the partition's page, or by acemq
// triage), every message given back. A set with a partition whose read
// counts against a delivery limit is not read together; a name that is
// no set's is refused; another site's request too.
func TestWebTriagePartitionSet(t *testing.T) {
	t.Parallel()
	b, dial := partitionedBroker(t, "orders", 3)
	tr, err := dial(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	timeout, hostile := "exhausted 5 attempts: timeout", "rejected: <b>no</b>\x1b[2J\u202e"
	seedDeadLetter(t, tr, "orders.p1", "m-1", timeout, b.Clock().Now())
	seedDeadLetter(t, tr, "orders.p2", "m-2", timeout, b.Clock().Now())
	seedDeadLetter(t, tr, "orders.p2", "m-3", timeout, b.Clock().Now())
	seedDeadLetter(t, tr, "orders.p0", "m-4", hostile, b.Clock().Now())
	classic := map[string]any{"type": "classic", "arguments": map[string]any{}, "effective_policy_definition": map[string]any{}}
	limited := map[string]any{"type": "quorum", "arguments": map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 3}, "effective_policy_definition": map[string]any{}}
	fake := fakeManagement(t, "3.10.8", false, map[string]map[string]any{"orders.p0.dlq": classic, "orders.p1.dlq": classic, "orders.p2.dlq": classic, "orders.p0.parked": classic,
		"orders.p1.parked": limited, "orders.p2.parked": classic})
	mc, err := newMgmtClient(fake.URL, "amqp://guest:guest@localhost/", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &app{ctx: context.Background(), dial: dial, getenv: func(string) string { return "" }, now: time.Now, stdout: io.Discard, stderr: io.Discard, url: "amqp://guest:guest@localhost/"}
	w, err := newWebUI(a, tr, webConfig{vhost: "/", mgmt: mc, queues: []string{"orders"}, operator: "alice", allowActions: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)

	_, page := get(t, srv, "/")
	set := row(table(page, "partitions"), "orders")
	if !strings.Contains(set, `href="/triage?queue=orders.p%2a.dlq&amp;k=`+w.key+`">triage every .dlq</a>`) || !strings.Contains(set, `href="/triage?queue=orders.p%2a.parked&amp;k=`+w.key+`">every .parked</a>`) {
		t.Fatalf("the set's line has no links to every partition's:\n%s", set)
	}
	code, tri := get(t, srv, "/triage?queue=orders.p*.dlq")
	id, hid := triage.ID(triage.Key(timeout)), triage.ID(triage.Key(hostile))
	for _, want := range []string{`<span id="depth">4</span> ready, read <span id="read">4</span> in <span id="groups">2</span> groups`,
		`id="` + id + `" data-count="3"`, `id="` + hid + `" data-count="1"`,
		`<a href="/triage?queue=orders.p1.dlq&amp;k=` + w.key + `">orders.p1.dlq</a> <b>1</b>, <a href="/triage?queue=orders.p2.dlq&amp;k=` + w.key + `">orders.p2.dlq</a> <b>2</b>`,
		`href="/message?queue=orders.p1.dlq&amp;id=m-1&amp;k=` + w.key + `"`, `href="/message?queue=orders.p0.dlq&amp;id=m-4&amp;k=` + w.key + `"`,
		`(1 of 1)`, `(2 of 2)`, `id="set-actions"`, `<p class="ro" id="cost">`} {
		if !strings.Contains(tri, want) {
			t.Errorf("the set's triage lacks %s", want)
		}
	}
	if code != http.StatusOK || strings.Contains(tri, "<button") || strings.Contains(tri, "<b>no") || strings.ContainsAny(tri, "\x1b\u202e") {
		t.Errorf("%d\n%s", code, tri)
	}
	for q, n := range map[string]int{"orders.p0.dlq": 1, "orders.p1.dlq": 1, "orders.p2.dlq": 2} {
		if got := depth(t, tr, q); got != n {
			t.Errorf("%s holds %d after the read, want %d", q, got, n)
		}
	}
	// The sample's link is to the message in its own partition.
	if code, msg := get(t, srv, "/message?queue=orders.p1.dlq&id=m-1"); code != http.StatusOK || !strings.Contains(msg, "exhausted 5 attempts: timeout") {
		t.Errorf("%d\n%s", code, msg)
	}

	for _, c := range []struct {
		path string
		h    http.Header
		code int
		says string
	}{
		{"/triage?queue=orders.p*.parked", sameOrigin, http.StatusForbidden, "orders.p1.parked: "},
		{"/triage?queue=orders.p*.x", sameOrigin, http.StatusBadRequest, "are named Q.p*.dlq or Q.p*.parked"},
		{"/triage?queue=nothing.p*.dlq", sameOrigin, http.StatusBadRequest, "no partition of nothing has a .dlq queue"},
		{"/triage?queue=orders.p*.dlq", nil, http.StatusForbidden, "does not show that it comes from the dashboard"},
		{"/triage?queue=orders.p*.dlq", http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden, "refused a request from another site"},
	} {
		code, got := send(t, srv, http.MethodGet, c.path, c.h, nil)
		if code != c.code || !strings.Contains(got, c.says) || strings.Contains(got, `data-count=`) {
			t.Errorf("%s: %d, want %d saying %q\n%s", c.path, code, c.code, c.says, got)
		}
	}
	if n := depth(t, tr, "orders.p1.parked"); n != 0 {
		t.Errorf("orders.p1.parked was read: %d", n)
	}
}

// TestStatusPartitionBreaker: acemq status counts a partition's breaker
// in its first line and redacts its why, as it does a plain queue's (the
// two fixes the dashboard's partitions needed, in breakerCount and
// redactBreakers, serve the terminal too).
func TestStatusPartitionBreaker(t *testing.T) {
	t.Parallel()
	srv := managementAPI(t, "prod", webPartitionsListing(t))
	code, out, errOut := cli(t, noBroker, "status", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", srv.URL)
	if code != 0 || !strings.Contains(out, ": 4 services, 1 circuit breaker not closed\n") || !strings.Contains(out, "amqp://ops:xxxxx@db.internal") ||
		strings.Contains(out, "ops:pw") || !strings.Contains(out, "\n    breaker web-3 ") || !strings.Contains(out, "A circuit breaker is not closed on orders.p1") {
		t.Errorf("%d\n%s\n%s", code, out, errOut)
	}
}
