package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/internal/polltest"
)

// browseBreaker declares a breaker marker for q on vhost URL u, as the
// wire contract says, on a connection kept until the test ends, and checks
// in the browser that the dashboard at base shows it under q's service:
// its badge, and its why as text (a <script> in it is no element) with its
// escape sequence written out. It leaves the browser on the status page.
func browseBreaker(t *testing.T, ctx context.Context, u, base, q string) {
	t.Helper()
	_, ch := rawChannel(t, u)
	const instance = "web-7-4711-ab12"
	since := time.Now().Add(-time.Minute)
	why := "warehouse: <script>document.title='owned'</script>\x1b[2J"
	if _, err := ch.QueueDeclare(q+".breaker."+instance, false, false, true, false, amqp.Table{
		argBreakerQueue: q, argBreakerState: breakerOpen, argBreakerSince: since.UnixMilli(), argBreakerUntil: since.Add(2 * time.Minute).UnixMilli(),
		argBreakerWhy: why, argBreakerInstance: instance, "x-max-length": int32(0), "x-overflow": "reject-publish", "x-queue-type": "classic",
	}); err != nil {
		t.Fatal(err)
	}
	row := `tr[data-breaker="` + instance + `"]`
	var n int
	if !polltest.UntilEvery(60*time.Second, time.Second, func() bool {
		browse(t, ctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`#status`)))
		n = read(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('`+row+`').length`))
		return n == 1
	}) {
		t.Fatalf("the status page shows %d rows of breaker %s, want 1", n, instance)
	}
	badge, shownWhy := read(t, ctx, chromedp.Text(chromedp.CSS(row+` .badge`))), read(t, ctx, chromedp.Text(chromedp.CSS(row+` .why`)))
	scripts := read(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('script').length`))
	if badge != "breaker open" || shownWhy != strings.ReplaceAll(why, "\x1b", `\x1b`) || scripts != 0 || read(t, ctx, chromedp.Title()) == "owned" {
		t.Errorf("breaker row: badge %q, why %q, %d script elements", badge, shownWhy, scripts)
	}
}
