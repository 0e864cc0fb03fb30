package slip

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// Courier carries slips from stop to stop: it starts them, and its Step
// and Compensation handlers do a stop's work and send the slip on. Every
// hop and event is a confirmed, mandatory publish through Publisher
// (mandatory whatever Publisher.Mandatory says), made before the message
// it follows is acknowledged. A Courier is safe for concurrent use; the
// stops of one slip may be served by different processes, each with a
// Courier of its own.
type Courier struct {
	Publisher *acemq.Publisher

	once      sync.Once
	mandatory *acemq.Publisher // Publisher, or one like it that is mandatory
}

// publisher is Publisher if it is mandatory, else one like it that is.
func (c *Courier) publisher() *acemq.Publisher {
	c.once.Do(func() {
		c.mandatory = c.Publisher
		if !c.Publisher.Mandatory {
			p := c.Publisher
			c.mandatory = &acemq.Publisher{Transport: p.Transport, Mandatory: true, Clock: p.Clock,
				TracerProvider: p.TracerProvider, Propagator: p.Propagator, Codec: p.Codec}
		}
	})
	return c.mandatory
}

// Itinerary is what a slip is started with.
type Itinerary struct {
	// ID is the slip's stable id; empty gets a new random one.
	ID string
	// Name says what kind of slip it is, for people.
	Name string
	// Stops are the queues to visit, in order.
	Stops []string
	// Variables are the slip's variables at its start, each encoded as
	// JSON.
	Variables map[string]any
	// Completed and Faulted are where the slip's events go; nil sends
	// none.
	Completed, Faulted *Destination
}

// Start publishes a new slip to its first stop, with o's body, content
// type, correlation id and headers, and returns its id. A slip with no
// stops completes at once: its completed event is published instead.
// o's Exchange, RoutingKey and ID must be empty: the slip chooses them.
func (c *Courier) Start(ctx context.Context, it Itinerary, o acemq.Outgoing) (string, error) {
	switch {
	case o.Exchange != "" || o.RoutingKey != "" || o.ID != "":
		return "", errors.New("acemq: slip: Start chooses where the message goes and its id: leave Outgoing's Exchange, RoutingKey and ID empty")
	case len(it.Stops) == 0 && it.Completed == nil:
		return "", errors.New("acemq: slip: an itinerary with no stops and nowhere to send its completed event does nothing")
	case unnamed(it.Stops):
		return "", errors.New("acemq: slip: an itinerary's stops need names")
	}
	doc := &Document{Version: Version, ID: it.ID, Name: it.Name, State: StateRunning,
		Itinerary: append([]string(nil), it.Stops...), Completed: it.Completed, Faulted: it.Faulted}
	if doc.ID == "" {
		doc.ID = wire.NewID()
	}
	for name, v := range it.Variables {
		if err := (&Slip{doc: doc}).SetVar(name, v); err != nil {
			return "", err
		}
	}
	p := parcel{body: o.Body, contentType: o.ContentType, correlationID: o.CorrelationID, headers: o.Headers}
	if len(doc.Itinerary) == 0 {
		doc.State = StateCompleted
		return doc.ID, c.event(ctx, p, doc, doc.Completed, StateCompleted)
	}
	return doc.ID, c.hop(ctx, p, doc, doc.Itinerary[0], doc.ID+".0")
}

// unnamed reports whether any stop has no name.
func unnamed(stops []string) bool {
	for _, s := range stops {
		if s == "" {
			return true
		}
	}
	return false
}

// parcel is what a slip message carries from stop to stop besides the
// slip: the payload, its properties and the application's headers.
type parcel struct {
	body          []byte
	contentType   string
	correlationID string
	headers       map[string]any
}

// parcelOf is the parcel of a message a stop received.
func parcelOf(m *acemq.Message) parcel {
	env := m.Envelope()
	return parcel{body: m.Body(), contentType: env.ContentType, correlationID: env.CorrelationID, headers: m.Headers()}
}

// carried are the headers of p that travel on: the application's, not the
// library's (x-acemq-*, written anew) nor the broker's.
func (p parcel) carried() map[string]any {
	h := make(map[string]any, len(p.headers)+2)
	for k, v := range p.headers {
		if strings.HasPrefix(k, "x-acemq-") || wire.IsBrokerOwned(k) {
			continue
		}
		h[k] = v
	}
	return h
}

// hop sends the slip doc on to queue, with the x-acemq-id id.
func (c *Courier) hop(ctx context.Context, p parcel, doc *Document, queue, id string) error {
	if err := c.publish(ctx, p, doc, "", queue, id, ""); err != nil {
		return fmt.Errorf("acemq: slip %s: send it on to %s: %w", doc.ID, queue, err)
	}
	return nil
}

// event publishes the slip's event (state) to d; nothing when d is nil.
func (c *Courier) event(ctx context.Context, p parcel, doc *Document, d *Destination, state string) error {
	if d == nil {
		return nil
	}
	ex, key := d.route()
	if err := c.publish(ctx, p, doc, ex, key, doc.ID+"."+state, state); err != nil {
		return fmt.Errorf("acemq: slip %s: its %s event to %s: %w", doc.ID, state, d, err)
	}
	return nil
}

func (c *Courier) publish(ctx context.Context, p parcel, doc *Document, exchange, key, id, event string) error {
	v, err := doc.encode()
	if err != nil {
		return err
	}
	h := p.carried()
	h[Header] = v
	if event != "" {
		h[EventHeader] = event
	}
	_, err = c.publisher().Publish(ctx, acemq.Outgoing{Exchange: exchange, RoutingKey: key, Body: p.body, ID: id,
		Headers: h, ContentType: p.contentType, CorrelationID: p.correlationID})
	return err
}

// now is the time on the Publisher's clock, in Unix milliseconds: the
// memory transport's virtual clock in tests.
func (c *Courier) now() int64 {
	switch {
	case c.Publisher.Clock != nil:
		return c.Publisher.Clock.Now().UnixMilli()
	}
	if cl, ok := c.Publisher.Transport.(transport.Clocked); ok {
		return cl.Clock().Now().UnixMilli()
	}
	return time.Now().UnixMilli()
}
