package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
)

// TestRabbitMQWebPartitions: acemq web on RabbitMQ, in a real browser, with
// an ordered partitioned queue of three quorum partitions (single active
// consumer), two consumers on the first (one active, its tag holding
// ESC[2J), a dead letter in the second's .dlq and an open breaker on the
// second: the status page shows one line of totals and one per
// partition, the active consumer's tag written out, the two partitions
// without a consumer marked and said in a note, the breaker under its
// partition, and the partition's triage link leads to its dead letter.
func TestRabbitMQWebPartitions(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	u := rabbitVhost(t)
	q := rabbitQueue()
	tr := rabbitTransport(t, u)
	parts := (acemq.Partitioned{Queue: q, Count: 3}).Queues()
	ordered := map[string]any{"x-queue-type": "quorum", "x-single-active-consumer": true}
	for _, p := range parts {
		if err := tr.Declare(context.Background(), acemq.Topology(p, retry.None(), ordered)); err != nil {
			t.Fatal(err)
		}
	}
	hostile := "the handler rejected it: <b>bold</b> \x1b[2J\u202eexe.gpj"
	seedDeadLetter(t, tr, parts[1], "m-1", hostile, time.Now().Add(-time.Hour))
	waitDepth(t, tr, parts[1]+".dlq", 1)

	_, ch := rawChannel(t, u)
	tag := "ledger-\x1b[2J-1"
	for _, tg := range []string{tag, "ledger-2"} {
		if _, err := ch.Consume(parts[0], tg, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	const instance = "web-9-1-cd34"
	since := time.Now().Add(-time.Minute)
	if _, err := ch.QueueDeclare(parts[1]+".breaker."+instance, false, false, true, false, amqp.Table{
		argBreakerQueue: parts[1], argBreakerState: breakerOpen, argBreakerSince: since.UnixMilli(), argBreakerUntil: since.Add(2 * time.Minute).UnixMilli(),
		argBreakerWhy: "stock: <script>document.title='owned'</script>", argBreakerInstance: instance, "x-max-length": int32(0), "x-overflow": "reject-publish", "x-queue-type": "classic",
	}); err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	base := startWeb(t, dialRabbitMQ, "--url", u)
	text := func(sel string) string {
		return read(t, ctx, chromedp.Evaluate[string](`(document.querySelector('`+sel+`') || {}).textContent || ''`))
	}
	row := func(name string) string { return `tr[data-queue="` + name + `"]` }
	// The management API's numbers are its last sample: reload until it
	// has the dead letter, the consumers and the breaker.
	var dlq, consumers, total, active string
	var breakers int
	if !polltest.UntilEvery(90*time.Second, time.Second, func() bool {
		browse(t, ctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`#partitions`)))
		dlq, consumers, active = text(row(q)+` .dlq`), text(row(parts[0])+` .consumers`), text(row(parts[0])+` .active`)
		total = text(row(q) + ` .consumers`) // "?" until every partition has been sampled
		breakers = read(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('tr[data-breaker="`+instance+`"]').length`))
		return dlq == "1" && consumers == "2" && total == "2" && active == `ledger-\x1b[2J-1` && breakers == 1
	}) {
		t.Fatalf("the set's .dlq %q (want 1) and consumers %q (want 2), %s's consumers %q (want 2) and active consumer %q, %d rows of the breaker (want 1)", dlq, total, parts[0], consumers, active, breakers)
	}
	if label := text(row(q) + ` td`); label != q+" (3 partitions, ordered)" {
		t.Errorf("the set's line says %q", label)
	}
	if n := text(row(parts[1]) + ` .dlq`); n != "1" {
		t.Errorf("%s's .dlq: %q, want 1", parts[1], n)
	}
	if c := text(row(q) + ` .consumers`); c != "2" {
		t.Errorf("the set's consumers: %q, want 2", c)
	}
	idle := read(t, ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('tr.partition.idle')).map(r => r.dataset.queue).join(' ')`))
	if idle != parts[1]+" "+parts[2] || !strings.Contains(text(`#idle`), "No consumer on "+parts[1]+", "+parts[2]+", while other partitions of "+q+" have one") {
		t.Errorf("the partitions without a consumer: %q; the note: %q", idle, text(`#idle`))
	}
	// The breaker's row comes right after its partition's.
	next := read(t, ctx, chromedp.Evaluate[string](`document.querySelector('`+row(parts[1])+`').nextElementSibling.dataset.breaker || ''`))
	if next != instance || text(`tr[data-breaker="`+instance+`"] .badge`) != "breaker open" {
		t.Errorf("the row after %s's is breaker %q", parts[1], next)
	}
	scripts := read(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('script').length`))
	html := read(t, ctx, chromedp.OuterHTML(chromedp.CSS(`body`)))
	if scripts != 0 || read(t, ctx, chromedp.Title()) == "owned" || strings.Contains(html, "\x1b") {
		t.Errorf("%d script elements, or an escape sequence in the page", scripts)
	}
	screenshot(t, ctx, dir, "partitions.png")

	browse(t, ctx, chromedp.Click(chromedp.CSS(row(parts[1])+` a`)), chromedp.WaitVisible(chromedp.CSS(`#summary`)))
	if groups, nread := text(`#groups`), text(`#read`); groups != "1" || nread != "1" || !strings.Contains(text(`#summary`), parts[1]+".dlq") {
		t.Errorf("the triage of %s.dlq: read %s in %s groups, want 1 in 1 (%s)", parts[1], nread, groups, text(`#summary`))
	}
	html = read(t, ctx, chromedp.OuterHTML(chromedp.CSS(`body`)))
	if strings.Contains(html, "<b>bold") || strings.ContainsAny(html, "\x1b\u202e") {
		t.Errorf("the triage page holds a producer's markup or control characters")
	}
	waitDepth(t, tr, parts[1]+".dlq", 1)

	// Every partition's .dlq at once, from the set's line.
	browse(t, ctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`#partitions`)),
		chromedp.Click(chromedp.CSS(row(q)+` a.triage-set`)), chromedp.WaitVisible(chromedp.CSS(`#summary`)))
	if groups, nread, from := text(`#groups`), text(`#read`), text(`#partitions`); groups != "1" || nread != "1" ||
		from != "Read from "+parts[0]+".dlq (0 of 0), "+parts[1]+".dlq (1 of 1), "+parts[2]+".dlq (0 of 0)." {
		t.Errorf("the triage of every .dlq: read %s in %s groups, want 1 in 1; %q", nread, groups, from)
	}
	screenshot(t, ctx, dir, "partitions-triage.png")
	waitDepth(t, tr, parts[1]+".dlq", 1)
}
