package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// EnvScreenshots names the folder the browser test saves its screenshots
// in (docs/screenshots when they are taken for the docs); by default a
// temporary one.
const EnvScreenshots = "ACEMQ_WEB_SCREENSHOTS"

// browser starts headless Chromium (Debian's package) for the test. It
// skips only when Chromium is absent and CI is unset: under scripts/test,
// which installs it, a missing browser is a failure.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("no chromium (apt-get install chromium; scripts/test installs it)")
		}
		t.Fatalf("CI is set and chromium is not installed: %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// browse runs steps in the browser's tab, a minute at most.
func browse(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// read runs one action that returns a value.
func read[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := read(t, ctx, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRabbitMQWebBrowser: acemq web on RabbitMQ, in a real browser: the
// status page shows the .dlq's count, the triage page the groups and
// their counts, a sample's link its message; the replay button moves
// exactly its group; a read-only dashboard has no buttons.
func TestRabbitMQWebBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	u := rabbitVhost(t)
	q := rabbitQueue()
	tr := rabbitTransport(t, u)
	if err := tr.Declare(context.Background(), acemq.Topology(q, retry.None(), nil)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Declare(context.Background(), delay.Topology()); err != nil { // the status page adds their levels up
		t.Fatal(err)
	}
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	reasons, want := mixedReasons()
	created := time.Now().Add(-2 * time.Hour)
	for i, r := range reasons {
		seedDeadLetter(t, tr, q, fmt.Sprintf("m-%d", i+1), r, created)
	}
	hostile := "the handler rejected it: <b>bold</b> \x1b[2J\u202eexe.gpj"
	seedDeadLetter(t, tr, q, "evil-\x1b]52;c;cHduZWQ=\x07", hostile, created)
	want[triage.Key(hostile)] = 1
	total := len(reasons) + 1
	waitDepth(t, tr, q+".dlq", total)

	base := startWeb(t, dialRabbitMQ, "--url", u, "--allow-actions", "--operator", "alice")

	// The management API's numbers are its last sample: reload until it
	// has the messages, and has sampled the delay levels (quorum queues,
	// sampled later than the classic ones).
	var ready, levels string
	if !polltest.UntilEvery(90*time.Second, time.Second, func() bool {
		browse(t, ctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`#status`)))
		ready = read(t, ctx, chromedp.Evaluate[string](`(document.querySelector('tr[data-queue="`+q+`.dlq"] .ready') || {}).textContent || ''`)) // none while not sampled yet
		levels = read(t, ctx, chromedp.Text(chromedp.CSS(`#levels`)))
		return ready == strconv.Itoa(total) && levels == "28 levels"
	}) {
		t.Fatalf("the status page shows %q ready in %s.dlq, want %d; the delay levels' row says %q, want 28 levels", ready, q, total, levels)
	}
	if rows := read(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('tr[data-queue^="acemq.delay.v1."]').length`)); rows > 2 {
		t.Errorf("%d rows of delay queues, want the total and the undeliverable queue (no level holds a message)", rows)
	}
	screenshot(t, ctx, dir, "status.png")
	browseBreaker(t, ctx, u, base, q)

	browse(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-queue="`+q+`.dlq"] a`)), chromedp.WaitVisible(chromedp.CSS(`#summary`)))
	groups, nread := read(t, ctx, chromedp.Text(chromedp.CSS(`#groups`))), read(t, ctx, chromedp.Text(chromedp.CSS(`#read`)))
	if groups != strconv.Itoa(len(want)) || nread != strconv.Itoa(total) {
		t.Errorf("triage: read %s in %s groups, want %d in %d", nread, groups, total, len(want))
	}
	for key, n := range want {
		count := read(t, ctx, chromedp.AttributeValue(chromedp.CSS(`#`+triage.ID(key)), "data-count")).Value
		if count != strconv.Itoa(n) {
			t.Errorf("group %s (%q): %s, want %d", triage.ID(key), key, count, n)
		}
	}
	screenshot(t, ctx, dir, "triage.png")

	html := read(t, ctx, chromedp.OuterHTML(chromedp.CSS(`body`)))
	if strings.Contains(html, "<b>bold") || strings.ContainsAny(html, "\x1b\x07\u202e") {
		t.Errorf("the triage page holds a producer's markup or control characters")
	}

	replayKey := "exhausted <n> attempts: POST https://wh.internal/reserve/<n>: HTTP 503"
	g := "#" + triage.ID(replayKey)
	browse(t, ctx, chromedp.Click(chromedp.CSS(g+` a.sample`)), chromedp.WaitVisible(chromedp.CSS(`#envelope`)))
	envelope := read(t, ctx, chromedp.Text(chromedp.CSS(`#envelope`)))
	if !strings.Contains(envelope, "m-1") || !strings.Contains(envelope, "HTTP 503") {
		t.Errorf("message page: %s", envelope)
	}
	screenshot(t, ctx, dir, "message.png")

	browse(t, ctx, chromedp.Navigate(base+"triage?queue="+q+".dlq"), chromedp.WaitVisible(chromedp.CSS(g+` button.replay`)),
		chromedp.Click(chromedp.CSS(g+` button.replay`)), chromedp.WaitVisible(chromedp.CSS(`#result`)))
	moved, before, after := read(t, ctx, chromedp.Text(chromedp.CSS(`#moved`))), read(t, ctx, chromedp.Text(chromedp.CSS(`#before`))), read(t, ctx, chromedp.Text(chromedp.CSS(`#after`)))
	n := want[replayKey]
	if moved != strconv.Itoa(n) || before != strconv.Itoa(total) || after != strconv.Itoa(total-n) {
		t.Errorf("replay: moved %s, %s before, %s after; want %d, %d, %d", moved, before, after, n, total, total-n)
	}
	screenshot(t, ctx, dir, "replayed.png")
	waitDepth(t, tr, q, n)
	waitDepth(t, tr, q+".dlq", total-n)
	ids := drainIDs(t, tr, q)
	slices.Sort(ids)
	if strings.Join(ids, " ") != "m-1 m-2 m-3 m-4 m-5 m-6 m-7" {
		t.Errorf("replayed %v, want the group's m-1 to m-7", ids)
	}

	discardKey := `the handler rejected it: no such customer "<q>"`
	g = "#" + triage.ID(discardKey)
	browse(t, ctx, chromedp.Navigate(base+"triage?queue="+q+".dlq"), chromedp.WaitVisible(chromedp.CSS(g+` button.discard`)),
		chromedp.SendKeys(chromedp.CSS(g+` input[name=why]`), "customers deleted in the purge"),
		chromedp.Click(chromedp.CSS(g+` button.discard`)), chromedp.WaitVisible(chromedp.CSS(`#result`)))
	m := want[discardKey]
	if moved := read(t, ctx, chromedp.Text(chromedp.CSS(`#moved`))); moved != strconv.Itoa(m) {
		t.Errorf("discard: moved %s, want %d", moved, m)
	}
	screenshot(t, ctx, dir, "discarded.png")
	waitDepth(t, tr, q+".dlq.archive", m)
	waitDepth(t, tr, q+".dlq", total-n-m)

	ro := startWeb(t, dialRabbitMQ, "--url", u)
	browse(t, ctx, chromedp.Navigate(ro+"triage?queue="+q+".dlq"), chromedp.WaitVisible(chromedp.CSS(`#summary`)))
	buttons := read(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('button').length`))
	forms := read(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('form').length`))
	if buttons != 0 || forms != 0 {
		t.Errorf("a read-only dashboard shows %d buttons in %d forms", buttons, forms)
	}
	screenshot(t, ctx, dir, "triage-read-only.png")
	deleteQueues(t, u, q, q+".dlq", q+".parked", q+".dlq.archive")
}

// attackPage is a page of another site that makes the browser ask the
// dashboard at base for everything it serves, every way a page can
// without the dashboard's help: four <img> of each GET (what drained a
// work queue once), a no-cors fetch and an iframe of each, a no-cors
// fetch and a form posted into an iframe of each POST (with a guessed
// token). Its title turns "done" once every request has had its answer
// (each load, error or fetch settled), "timeout" if one had none in time.
func attackPage(base string, gets []string, posts map[string]url.Values) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><title>attack</title></head><body><script>
const base = ` + strconv.Quote(base) + `;
const waits = [];
let late = false;
const settle = (el, ev) => waits.push(new Promise(r => { el.addEventListener(ev || 'load', r); el.addEventListener('error', r); setTimeout(() => { late = true; r(); }, 60000); }));
`)
	for _, p := range gets {
		fmt.Fprintf(&b, "for (let i = 0; i < 4; i++) { const img = new Image(); settle(img); img.src = base + %s + '&n=' + i; }\n", strconv.Quote(p))
		fmt.Fprintf(&b, "waits.push(fetch(base + %s, {mode: 'no-cors', credentials: 'include'}).catch(() => {}));\n", strconv.Quote(p))
		fmt.Fprintf(&b, "{ const f = document.createElement('iframe'); settle(f); f.src = base + %s; document.body.appendChild(f); }\n", strconv.Quote(p))
	}
	i := 0
	for p, form := range posts {
		fmt.Fprintf(&b, "waits.push(fetch(base + %s, {method: 'POST', mode: 'no-cors', credentials: 'include', body: new URLSearchParams(%s)}).catch(() => {}));\n",
			strconv.Quote(p), strconv.Quote(form.Encode()))
		fmt.Fprintf(&b, "{ const f = document.createElement('iframe'); f.name = 'p%d'; document.body.appendChild(f); settle(f);\n", i)
		fmt.Fprintf(&b, "  const form = document.createElement('form'); form.method = 'post'; form.target = 'p%d'; form.action = base + %s;\n", i, strconv.Quote(p))
		for k, v := range form {
			fmt.Fprintf(&b, "  { const in_ = document.createElement('input'); in_.type = 'hidden'; in_.name = %s; in_.value = %s; form.appendChild(in_); }\n", strconv.Quote(k), strconv.Quote(v[0]))
		}
		b.WriteString("  document.body.appendChild(form); form.submit(); }\n")
		i++
	}
	b.WriteString("Promise.all(waits).then(() => { document.title = late ? 'timeout' : 'done'; });\n</script></body></html>")
	return b.String()
}

// deliveries reads every message of q (basic.get) and says how often each
// was delivered before (x-delivery-count, absent on a first delivery) and
// whether it was marked redelivered; then gives them all back, or with
// ack, acknowledges them.
func deliveries(t *testing.T, tr transport.Transport, q string, ack bool) (counts []int64, redelivered int) {
	t.Helper()
	var held []transport.Delivery
	for {
		d, ok, err := tr.Get(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		held = append(held, d)
		n, _ := transport.Int64(d.Headers["x-delivery-count"])
		counts = append(counts, n)
		if d.Redelivered {
			redelivered++
		}
	}
	for _, d := range held {
		var err error
		if ack {
			err = d.Ack()
		} else {
			err = d.Reject(true)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return counts, redelivered
}

// TestRabbitMQWebCrossSite: a page on another site (another port of
// 127.0.0.1, and localhost) tries every GET and POST of a dashboard that
// allows actions and may read a work queue with x-delivery-limit 2 (the
// queue a page of four <img> once drained into its .dlq): nothing is read
// and nothing moves; every message of both queues is still on its first
// delivery. Then, on the same queues: a dashboard started without
// --allow-read refuses the work queue; the one that names it shows what a
// read costs and reads only once confirmed, and the read counts once.
func TestRabbitMQWebCrossSite(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	u := rabbitVhost(t)
	q := rabbitQueue()
	tr := rabbitTransport(t, u)
	args := map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 2, "x-dead-letter-exchange": retry.DeadLetterExchange, "x-dead-letter-routing-key": q}
	if err := tr.Declare(context.Background(), acemq.Topology(q, retry.None(), args)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteQueues(t, u, q, q+".dlq", q+".parked", q+".dlq.archive") })
	reason := "exhausted 5 attempts: the warehouse is not answering"
	for i := range 10 {
		if _, err := tr.Publish(context.Background(), transport.Publishing{RoutingKey: q, Mandatory: true,
			Headers: map[string]any{acemq.HeaderID: fmt.Sprintf("w-%d", i+1), acemq.HeaderAttempt: 1}, Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		seedDeadLetter(t, tr, q, fmt.Sprintf("d-%d", i+1), reason, time.Now())
	}
	waitDepth(t, tr, q, 10)
	waitDepth(t, tr, q+".dlq", 10)
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		dir = t.TempDir()
	}

	base := startWeb(t, dialRabbitMQ, "--url", u, "--allow-actions", "--operator", "alice", "--allow-read", q)
	group := triage.ID(triage.Key(reason))
	guess := url.Values{"token": {strings.Repeat("0", 64)}, "confirm": {"yes"}}
	qe, dlq := url.QueryEscape(q), url.QueryEscape(q+".dlq")
	gets := []string{"?", "triage?queue=" + qe, "triage?queue=" + dlq, "message?queue=" + qe + "&id=w-1", "message?queue=" + dlq + "&id=d-1",
		"triage?queue=" + dlq + "&k=" + strings.Repeat("0", 32)}
	posts := map[string]url.Values{
		"triage?queue=" + qe:               guess,
		"triage?queue=" + dlq:              guess,
		"message?queue=" + qe + "&id=w-1":  guess,
		"message?queue=" + dlq + "&id=d-1": guess,
		"replay":                           {"token": guess["token"], "queue": {q + ".dlq"}, "group": {group}},
		"discard":                          {"token": guess["token"], "queue": {q + ".dlq"}, "group": {group}, "to_queue": {q + ".dlq.archive"}, "why": {"x"}},
	}
	page := attackPage(base, gets, posts)
	evil := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = rw.Write([]byte(page))
	}))
	t.Cleanup(evil.Close)
	_, port, _ := net.SplitHostPort(evil.Listener.Addr().String())
	for _, site := range []string{"http://127.0.0.1:" + port + "/", "http://localhost:" + port + "/"} {
		browse(t, ctx, chromedp.Navigate(site), chromedp.Poll[chromedp.Void](`document.title !== 'attack'`, chromedp.WithPollingTimeout(90*time.Second)))
		if title := read(t, ctx, chromedp.Title()); title != "done" {
			t.Fatalf("the page of %s: %s", site, title)
		}
		// And a top-level navigation from that page.
		browse(t, ctx, chromedp.Evaluate[chromedp.Void](`void setTimeout(() => { location.href = `+strconv.Quote(base+"triage?queue="+qe)+`; }, 0)`),
			chromedp.WaitVisible(chromedp.CSS(`pre`)))
		if msg := read(t, ctx, chromedp.Text(chromedp.CSS(`pre`))); !strings.Contains(msg, "refused a request from another site") {
			t.Errorf("navigated from %s: %s", site, msg)
		}
	}
	waitDepth(t, tr, q, 10)
	waitDepth(t, tr, q+".dlq", 10)
	if _, err := tr.Inspect(context.Background(), q+".dlq.archive"); !errors.Is(err, transport.ErrNotFound) {
		t.Errorf("the archive queue: %v", err)
	}
	counts, redelivered := deliveries(t, tr, q, false)
	if len(counts) != 10 || redelivered != 0 || slices.Max(counts) != 0 {
		t.Errorf("%s after the other site's page: delivery counts %v, %d redelivered; want 10 on their first delivery", q, counts, redelivered)
	}
	counts, redelivered = deliveries(t, tr, q+".dlq", false)
	if len(counts) != 10 || redelivered != 0 {
		t.Errorf("%s.dlq after the other site's page: %d messages, %d redelivered", q, len(counts), redelivered)
	}
	// Each message of q has now been delivered once, by that check.

	// Without --allow-read, the work queue is refused, the address typed.
	plain := startWeb(t, dialRabbitMQ, "--url", u)
	browse(t, ctx, chromedp.Navigate(plain+"triage?queue="+qe), chromedp.WaitVisible(chromedp.CSS(`#error`)))
	if msg := read(t, ctx, chromedp.Text(chromedp.CSS(`#error`))); !strings.Contains(msg, "reads only .dlq, .parked and archive queues") || !strings.Contains(msg, "--allow-read "+q) {
		t.Errorf("a dashboard without --allow-read: %s", msg)
	}
	screenshot(t, ctx, dir, "refused.png")

	// Named with --allow-read: its cost first, read once confirmed.
	browse(t, ctx, chromedp.Navigate(base+"triage?queue="+qe), chromedp.WaitVisible(chromedp.CSS(`#confirm`)))
	cost := read(t, ctx, chromedp.Text(chromedp.CSS(`#cost`)))
	if !strings.Contains(cost, "this read counts against a delivery limit") || !strings.Contains(cost, "a delivery limit of 2 (its x-delivery-limit argument)") ||
		!strings.Contains(cost, "dead-lettered to exchange "+retry.DeadLetterExchange) {
		t.Errorf("the confirmation says: %s", cost)
	}
	screenshot(t, ctx, dir, "confirm.png")
	browse(t, ctx, chromedp.Click(chromedp.CSS(`button.confirm`)), chromedp.WaitVisible(chromedp.CSS(`#summary`)))
	if n := read(t, ctx, chromedp.Text(chromedp.CSS(`#read`))); n != "10" {
		t.Errorf("the confirmed read read %s, want 10", n)
	}
	waitDepth(t, tr, q, 10)
	counts, _ = deliveries(t, tr, q, true)
	if len(counts) != 10 || slices.Min(counts) != 2 || slices.Max(counts) != 2 {
		t.Errorf("%s after the check and one confirmed read: delivery counts %v, want 2 each", q, counts)
	}
	waitDepth(t, tr, q+".dlq", 10)
}

// TestRabbitMQWebSampleLinks: each group's sample link, clicked in
// Chromium, lands on its message, for ids with every character a URL
// must escape, non-ASCII, and 255 bytes and more.
func TestRabbitMQWebSampleLinks(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	u := rabbitVhost(t)
	q := rabbitQueue()
	tr := rabbitTransport(t, u)
	if err := tr.Declare(context.Background(), acemq.Topology(q, retry.None(), nil)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteQueues(t, u, q, q+".dlq", q+".parked") })
	ids := append(slices.Clone(awkwardIDs), strings.Repeat("é", 128)+":"+strings.Repeat("z", 100)) // 357 bytes
	keys := make([]string, len(ids))
	for i, id := range ids {
		reason := "the handler rejected it: case " + strings.Repeat("x", i+1)
		keys[i] = triage.Key(reason)
		seedDeadLetter(t, tr, q, id, reason, time.Now())
	}
	waitDepth(t, tr, q+".dlq", len(ids))
	base := startWeb(t, dialRabbitMQ, "--url", u)
	// The links are followed by their href, not clicked: a click on a
	// page still settling after a navigation can find its node gone
	// (chromedp: "Could not find node with given id", a loaded CI run).
	href := func(selector string) string {
		return read(t, ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).href`, selector)))
	}
	browse(t, ctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`#status`)))
	triagePage := href(`tr[data-queue="` + q + `.dlq"] a`)
	for i, id := range ids {
		g := "#" + triage.ID(keys[i])
		browse(t, ctx, chromedp.Navigate(triagePage), chromedp.WaitVisible(chromedp.CSS(g+` a.sample`)))
		browse(t, ctx, chromedp.Navigate(href(g+` a.sample`)), chromedp.WaitVisible(chromedp.CSS(`#envelope, #error`)))
		shown := read(t, ctx, chromedp.Evaluate[string](`(document.querySelector('#envelope tr:first-child td code') || {}).textContent || document.querySelector('#error').textContent`))
		if shown != escape.String(id) {
			t.Errorf("the sample link of %q landed on %q", id, shown)
		}
	}
	waitDepth(t, tr, q+".dlq", len(ids))
}
