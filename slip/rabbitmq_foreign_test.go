package slip_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/slip"
	"github.com/acemq/acemq/transport"
)

// foreignStop is python3-pika serving one stop of a slip as another family
// member would, from docs/wire-contract.md alone: it takes one message
// from the queue argv[2], reads x-acemq-slip, records its visit and a
// variable, sends the slip on to the next stop by the default exchange,
// confirmed and mandatory, with the x-acemq-id the contract derives, and
// acknowledges. With argv[3] "start" it starts a slip of its own instead,
// to the stops that follow, and prints the slip's id.
const foreignStop = `
import json, sys, time, uuid
import pika
conn = pika.BlockingConnection(pika.URLParameters(sys.argv[1]))
ch = conn.channel()
ch.confirm_delivery()
def publish(key, body, props, slip, hop_id):
    headers = dict(props.headers or {}) if props else {}
    headers = {k: v for k, v in headers.items() if not k.startswith("x-acemq-") and k not in ("x-death",)}
    headers["x-acemq-slip"] = json.dumps(slip)
    headers["x-acemq-id"] = hop_id
    ch.basic_publish(exchange="", routing_key=key, body=body, mandatory=True,
                     properties=pika.BasicProperties(delivery_mode=2, message_id=hop_id, headers=headers,
                                                     content_type=props.content_type if props else None))
if sys.argv[3] == "start":
    stops = sys.argv[4].split(",")
    sid = str(uuid.uuid4())
    slip = {"v": 1, "id": sid, "name": "from-python", "state": "running", "itinerary": stops, "visited": [],
            "variables": {"origin": "python"}, "compensations": [], "compensated": [], "fault": None,
            "completed": {"queue": sys.argv[5]}, "future_field": {"kept": True}}
    publish(stops[0], b'{"order":9}', None, slip, sid + ".0")
    print(json.dumps({"id": sid}))
    conn.close()
    sys.exit(0)
deadline = time.time() + 60
while True:
    method, props, body = ch.basic_get(sys.argv[2])
    if method:
        break
    if time.time() > deadline:
        sys.exit("nothing arrived at " + sys.argv[2])
    time.sleep(0.05)
slip = json.loads(props.headers["x-acemq-slip"])
here = slip["itinerary"].pop(0)
assert here == sys.argv[2], (here, sys.argv[2])
slip["visited"].append({"stop": here, "at": int(time.time() * 1000), "record": {"by": "python"}})
slip["variables"]["charged_by"] = "python"
publish(slip["itinerary"][0], body, props, slip, "%s.%d" % (slip["id"], len(slip["visited"])))
ch.basic_ack(method.delivery_tag)
print(json.dumps({"id": slip["id"], "at": here, "variables": slip["variables"]}))
conn.close()
`

func runForeign(t *testing.T, args ...string) map[string]any {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", append([]string{"-c", foreignStop, brokertest.SharedURL(t)}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the foreign stop: %v: %s", err, stderr.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the foreign stop printed %q: %v", out, err)
	}
	return got
}

// TestRabbitMQSlipForeignStop: a stop served by python3-pika from the
// documented form between two of ours, and a slip a Python service
// started: both complete, the foreign stop's visit, record and variable
// carried, and a field the Go library does not know kept to the end.
func TestRabbitMQSlipForeignStop(t *testing.T) {
	s := newRabbitShop(t, nil, "stock.reserve", "shipping.ship") // card.charge is Python's
	if err := s.tr.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{{Name: s.q("card.charge"), Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	id := s.start("")
	got := runForeign(t, s.q("card.charge"), "stop")
	if got["id"] != id {
		t.Fatalf("the foreign stop handled slip %v, want %s", got["id"], id)
	}
	if v, _ := got["variables"].(map[string]any); v["reservation"] != "r-"+id[:4] {
		t.Errorf("the foreign stop read variables %v, want the reservation stock.reserve set", v)
	}
	evs := s.waitEvents(1)
	doc := evs[0].doc
	if evs[0].kind != slip.StateCompleted || !slices.Equal(visitedStops(doc), prefixed(s, stops...)) {
		t.Fatalf("event %v, visited %v", evs[0].kind, visitedStops(doc))
	}
	if string(doc.Visited[1].Record) != `{"by": "python"}` && string(doc.Visited[1].Record) != `{"by":"python"}` {
		t.Errorf("the foreign stop's record %s", doc.Visited[1].Record)
	}
	if v := variable(t, doc, "charged_by"); v != "python" {
		t.Errorf("charged_by %v", v)
	}
	if got, want := s.ran(), []string{"stock.reserve", "shipping.ship"}; !slices.Equal(got, want) {
		t.Errorf("ours ran %v, want %v", got, want)
	}

	// A slip a Python service started, through our stops only.
	started := runForeign(t, "", "start", strings.Join(prefixed(s, "shipping.ship"), ","), s.q("orders.slips"))
	var ev event
	polltest.Eventually(t, "the Python-started slip's event", func() bool {
		for _, e := range s.events() {
			if e.doc.ID == started["id"] {
				ev = e
			}
		}
		return ev.doc != nil
	})
	if ev.doc == nil || ev.kind != slip.StateCompleted || variable(t, ev.doc, "origin") != "python" {
		t.Fatalf("the Python-started slip's event: %+v", ev)
	}
	b, err := json.Marshal(ev.doc)
	if err != nil || !strings.Contains(string(b), `"future_field":{"kept":true}`) {
		t.Errorf("a field the library does not know was not kept: %s (%v)", b, err)
	}
}
