package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/transport"
)

// hostile are fields a producer wrote to attack the operator's terminal:
// clear the screen, write the clipboard (OSC 52), forge a table row, turn
// text around.
var hostile = struct{ id, reason, body string }{
	id:     "m-1\nm-9  1  1s  forged row\x1b[2J",
	reason: "the handler rejected it: \x1b]52;c;cm0gLXJmIH4=\x07 invoice\u202etxt.exe\u2066\u200b\u0085\x7f\xff",
	body:   "{\"note\":\"\x1b[31mred\x1b[0m\u2028\"}",
}

func seedHostile(t *testing.T, tr transport.Transport, queue string) {
	t.Helper()
	_, err := tr.Publish(context.Background(), transport.Publishing{
		RoutingKey: acemq.DeadLetterQueue(queue), Mandatory: true,
		Headers: map[string]any{acemq.HeaderID: hostile.id, acemq.HeaderAttempt: 5, acemq.HeaderError: hostile.reason},
		Body:    []byte(hostile.body),
	})
	if err != nil {
		t.Fatal(err)
	}
}

// assertSafe fails when out holds a byte or rune a terminal acts on, other
// than the line breaks the command wrote itself.
func assertSafe(t *testing.T, what, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !escape.IsSafe(line) {
			t.Errorf("%s printed an unsafe line: %q", what, line)
		}
	}
}

func TestPeekEscapes(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "orders")
	seedHostile(t, b.Connect(), "orders")
	for _, args := range [][]string{{}, {"--body"}, {"--json", "--body"}} {
		code, out, errOut := cli(t, dial, append([]string{"peek", "--url", "amqp://localhost", "--queue", "orders.dlq"}, args...)...)
		if code != 0 {
			t.Fatalf("peek %v: %d %s", args, code, errOut)
		}
		assertSafe(t, "peek "+strings.Join(args, " "), out)
		switch {
		case len(args) == 0:
			if lines := strings.Count(out, "\n"); lines != 3 || !strings.Contains(out, `m-1\nm-9  1  1s  forged row\x1b[2J  5`) ||
				!strings.Contains(out, `\x1b]52;c;cm0gLXJmIH4=\x07 invoice\u202etxt.exe\u2066\u200b\u0085\x7f\xff`) {
				t.Errorf("peek: %d lines\n%s", lines, out)
			}
		case args[0] == "--body":
			if !strings.Contains(out, `body:   {"note":"\x1b[31mred\x1b[0m\u2028"}`) {
				t.Errorf("peek --body:\n%s", out)
			}
		default:
			var got peekOut
			if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Messages) != 1 || got.Messages[0].ID != hostile.id ||
				*got.Messages[0].Body != hostile.body || got.Messages[0].Reason != strings.ToValidUTF8(hostile.reason, "\ufffd") {
				t.Errorf("peek --json does not decode to what the message holds: %v\n%s", err, out)
			}
		}
	}
}
